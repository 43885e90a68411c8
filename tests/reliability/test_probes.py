"""Cross-scope probes, forget canaries and TTL with a moved clock, on every backend.

- **Probes**: alice (tenant ``acme``) owns a record in every layer, and a project fact
  restricted to her (``readers=["alice"]``). Every read and by-id path (the library's, and
  the tools through :class:`~memstrata.ToolDispatcher`) called as bob (same tenant, same
  project), as alice of tenant ``globex`` and as the tenant-wide caller of ``globex`` must
  return nothing of hers (her word and her ids appear nowhere in the answer) or raise
  NotFound, and change no row. ``foreign`` counts the answers that leaked.
- **Canaries**: a unique word goes into every layer (facts and their superseded
  versions, a pending fact, episodes with thread neighbours, checkpoint versions, a closed
  task's outcome, the ledger, scratch, a feedback note, a run's task); after
  ``forget(match=word)`` the backend's raw storage (the SQLite file and its WAL; every
  text/json/tsvector column of PostgreSQL read as the owner; every Redis key and value)
  holds it nowhere. ``canary_bytes`` counts what was found.
- **TTL**: scratch entries, a run's default TTL, facts and pending facts with
  ``expires_at``, episodes with ``expires_at``: readable before, and after
  ``clock.advance`` past it unreadable through every read path (a by-id read labels it
  ``expired``, never ``active``) before any sweep; the sweep then records or deletes them.
  ``expired_visible`` counts the paths that still showed one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from backends import StoreProbe, sqlite_store_files
from memstrata import ManualClock, Memory, MemstrataError, NotFound, Scope, ToolDispatcher

ALICE = Scope(tenant="acme", user="alice", project="p")
BOB = Scope(tenant="acme", user="bob", project="p")
GLOBEX_ALICE = Scope(tenant="globex", user="alice", project="p")
GLOBEX = Scope(tenant="globex", project="p")
PROJECT = Scope(tenant="acme", project="p")
WORD = "vermilionwhisper"  # in every record of alice's and in the probes' queries
#: In every record of alice's and in nothing a probe sends: an answer holding it leaked.
CONTENT = "tangerinequill"


def _dump(value: Any) -> str:
    """The whole answer as text (records, hits, dicts, lists)."""
    if hasattr(value, "model_dump"):
        return json.dumps(value.model_dump(mode="json"), default=str)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_dump(v) for v in value) + "]"
    if isinstance(value, dict):
        return json.dumps({str(k): _dump(v) for k, v in value.items()}, default=str)
    return str(value)


class Alice:
    """Alice's records in every layer, and the ids and refs a probe may aim at."""

    def __init__(self, mem: Memory, clock: ManualClock) -> None:
        kw: dict[str, Any] = dict(kind="preference", subject="alice", attribute="drink",
                                  actor="user", source="chat")
        first = mem.facts.propose(ALICE, claim=f"Alice drinks {WORD} {CONTENT} tea", **kw)
        clock.advance(seconds=5)
        second = mem.facts.propose(ALICE, claim=f"Alice drinks {WORD} {CONTENT} coffee", **kw)
        pending = mem.facts.propose(ALICE, claim=f"Alice is called {WORD} {CONTENT}",
                                    kind="profile", subject="alice", attribute="name",
                                    actor="user", source="chat", tier="identity")
        restricted = mem.facts.propose(PROJECT, claim=f"Incident {WORD} {CONTENT} root cause found",
                                       kind="decision", subject="incident",
                                       attribute="cause", actor="user", source="postmortem",
                                       readers=["alice"])
        assert first.record and second.record and pending.record and restricted.record
        assert second.status == "superseding" and pending.status == "pending"
        self.old, self.fact = first.record.id, second.record.id
        self.pending, self.restricted = pending.record.id, restricted.record.id
        self.episode = mem.episodes.append(
            ALICE, text=f"Alice deployed {WORD} {CONTENT} to staging", actor="user",
            source="chat").id
        mem.checkpoints.save(ALICE, "release", objective=f"ship {WORD} {CONTENT}")
        mem.checkpoints.save(ALICE, "release", next_action=f"announce {WORD} {CONTENT}")
        mem.ledger.begin(ALICE, "publish:v1", intent=f"publish {WORD} {CONTENT}")
        mem.feedback(f"fact:{self.fact}", "useful", scope=ALICE, note=f"{WORD} {CONTENT} helped")
        self.run = mem.run(ALICE, task="release")
        self.run.__enter__()
        self.run.scratch.write("note", f"remember {WORD} {CONTENT}")
        self.refs = [f"fact:{self.fact}", f"fact:{self.old}", f"fact:{self.pending}",
                     f"fact:{self.restricted}", f"episode:{self.episode}",
                     "checkpoint:release@1", "checkpoint:release@2"]
        self.ids = [r.split(":", 1)[1] for r in self.refs[:5]]


def probes(mem: Memory, a: Alice, s: Scope) -> list[tuple[str, Callable[[], Any]]]:
    """Every read and by-id path, called as ``s``."""
    out: list[tuple[str, Callable[[], Any]]] = []
    for ref in a.refs:
        out.append((f"get {ref}", lambda ref=ref: mem.get(ref, scope=s)))
    for fid in (a.fact, a.old, a.pending, a.restricted):
        out += [
            (f"facts.get {fid}", lambda f=fid: mem.facts.get(f, s)),
            (f"facts.history {fid}", lambda f=fid: mem.facts.history(f, s)),
            (f"retire {fid}", lambda f=fid: mem.facts.retire(f, reason="x", scope=s)),
            (f"undo_supersede {fid}",
             lambda f=fid: mem.facts.undo_supersede(f, reason="x", scope=s)),
            (f"feedback {fid}",
             lambda f=fid: mem.feedback(f"fact:{f}", "contradicted", scope=s, note="n")),
            (f"approve {fid}", lambda f=fid: mem.review.approve(f, by="bob", scope=s)),
            (f"reject {fid}", lambda f=fid: mem.review.reject(f, reason="no", scope=s)),
        ]
    layer_sets = (["facts"], ["episodes"], ["handoffs"], ["facts", "episodes", "handoffs"])
    out += [(f"recall {ls} {d}", lambda ls=ls, d=d: mem.recall(
        s, f"{WORD} alice tea coffee deployed ship", layers=ls, decision=d, k=20))
        for ls in layer_sets for d in ("lookup", "recovery")]
    out += [
        ("facts.current", lambda: mem.facts.current(s, limit=1000)),
        ("facts.list", lambda: mem.facts.list(s, limit=1000)),
        ("facts.owned", lambda: mem.facts.owned(s)),
        ("facts.in_namespace", lambda: mem.facts.in_namespace(s, "alice", deeper=True)),
        ("facts.subject_groups", lambda: mem.facts.subject_groups(s, "alice")),
        ("context", lambda: mem.context(s, task="release", query=WORD)),
        ("episodes.get", lambda: mem.episodes.get(a.episode, s)),
        ("episodes.log", lambda: mem.episodes.log(s)),
        ("episodes.search", lambda: mem.episodes.search(s, f"{WORD} deployed", k=20)),
        ("feedback episode", lambda: mem.feedback(f"episode:{a.episode}", "useful", scope=s)),
        ("checkpoints.current", lambda: mem.checkpoints.current(s, "release")),
        ("checkpoints.versions", lambda: mem.checkpoints.versions(s, "release")),
        ("checkpoints.tasks", lambda: mem.checkpoints.tasks(s, include_closed=True)),
        ("ledger.get", lambda: mem.ledger.get(s, "publish:v1")),
        ("ledger.list", lambda: mem.ledger.list(s)),
        ("review.pending", lambda: mem.review.pending(s)),
        ("forget record_ids", lambda: _forgot(mem.forget(s, record_ids=a.refs[:5]))),
        ("forget match", lambda: _forgot(mem.forget(s, match=WORD))),
    ]
    # alice's run id, used from another scope, opens another scratchpad
    same_run = mem.run(s, run_id=a.run.run_id)
    out += [
        ("scratch.get same run id", lambda: same_run.scratch.get("note")),
        ("scratch.read same run id", lambda: same_run.scratch.read("note").value),
        ("scratch.list same run id", lambda: same_run.scratch.list()),
        ("scratch.items same run id", lambda: same_run.scratch.items()),
        ("run.ledger.get", lambda: same_run.ledger.get("publish:v1")),
    ]
    return out


def _forgot(report: Any) -> Any:
    assert report.total == 0, report.counts  # nothing of alice's was this scope's to forget
    return report


def tool_probes(mem: Memory, a: Alice, s: Scope) -> list[tuple[str, Callable[[], Any]]]:
    tools = ToolDispatcher(mem, s, task="release", run_id=a.run.run_id)
    assert "error" not in tools.dispatch("scratch_list", {})  # opens its run (a runs row)
    out: list[tuple[str, Callable[[], Any]]] = []
    for ref in a.refs:
        out += [(f"tool get {ref}", lambda ref=ref: tools.dispatch("get", {"ref": ref})),
                (f"tool feedback {ref}", lambda ref=ref: tools.dispatch(
                    "feedback", {"ref": ref, "signal": "contradicted"})),
                (f"tool retire {ref}", lambda ref=ref: tools.dispatch(
                    "retire_fact", {"ref": ref, "reason": "x"}))]
    for layers in (None, ["facts"], ["episodes"], ["handoffs"]):
        out.append((f"tool recall {layers}", lambda layers=layers: tools.dispatch(
            "recall", {"query": f"{WORD} alice", "layers": layers, "k": 20})))
    out += [
        ("tool search_history", lambda: tools.dispatch("search_history",
                                                       {"query": WORD, "k": 20})),
        ("tool get_durable_records", lambda: tools.dispatch("get_durable_records", {})),
        ("tool list_facts", lambda: tools.dispatch("list_facts", {"limit": 200})),
        ("tool get_current_task", lambda: tools.dispatch("get_current_task", {})),
        ("tool scratch_read", lambda: tools.dispatch("scratch_read", {"key": "note"})),
        ("tool scratch_list", lambda: tools.dispatch("scratch_list", {})),
        ("tool forget", lambda: tools.dispatch("forget", {"match": WORD})),
        ("tool forget ids", lambda: tools.dispatch("forget", {"record_ids": a.refs[:5]})),
        ("tool scope words", lambda: tools.dispatch("list_facts", {"user": "alice"})),
    ]
    return out


def mcp_answers(mem: Memory, a: Alice, s: Scope) -> list[tuple[str, Any]]:
    """The MCP server in-process (the SDK's client), serving ``s``: its tools and its
    resources, each answer as text."""
    import asyncio

    from mcp import Client

    from memstrata.interfaces.mcp_server import build_server

    server = build_server(mem, s, task="release")
    calls: list[tuple[str, dict[str, Any]]] = [("get", {"ref": r}) for r in a.refs] + [
        ("recall", {"query": f"{WORD} alice", "layers": ["facts", "episodes", "handoffs"]}),
        ("search_history", {"query": WORD}), ("list_facts", {}),
        ("get_durable_records", {}), ("get_current_task", {})]

    async def main() -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        async with Client(server) as client:
            for name, args in calls:
                res = await client.call_tool(name, args)
                answer = res.structured_content or {}
                if res.is_error:
                    answer = {"error": answer or str(res.content)}
                out.append((f"mcp {name} {args}", answer))
            for resource in (await client.list_resources()).resources:
                got = await client.read_resource(resource.uri)
                out.append((f"mcp resource {resource.uri}",
                            [getattr(c, "text", "") for c in got.contents]))
        return out

    return asyncio.run(main())


def _leaks(answer: Any, a: Alice) -> bool:
    """Whether an answer holds any of alice's content, or (unless it is an error, which
    may name the id it was asked for) any of her ids."""
    text = _dump(answer)
    if CONTENT in text.lower():
        return True
    error = isinstance(answer, MemstrataError) or (isinstance(answer, dict) and "error" in answer)
    return not error and any(i in text for i in a.ids)


def test_cross_scope_probes(mem: Memory, clock: ManualClock, store: StoreProbe,
                            backend: str, figures: Any) -> None:
    a = Alice(mem, clock)
    callers = {"bob": BOB, "globex alice": GLOBEX_ALICE, "globex": GLOBEX}
    calls = [(who, label, fn) for who, s in callers.items()
             for label, fn in probes(mem, a, s) + tool_probes(mem, a, s)]
    before = store.counts()
    leaked, outcomes = [], {"answered": 0, "not_found": 0, "refused": 0}
    for who, s in callers.items():  # the MCP server, in-process
        for label, answer in mcp_answers(mem, a, s):
            outcomes["answered" if "error" not in answer else "not_found"] += 1
            if _leaks(answer, a):
                leaked.append(f"{who}: {label} -> {_dump(answer)[:300]}")
    for who, label, fn in calls:
        try:
            answer = fn()
        except NotFound:
            outcomes["not_found"] += 1
            continue
        except MemstrataError as exc:  # a typed refusal (e.g. a tenant-wide forget)
            outcomes["refused"] += 1
            answer = exc
        else:
            outcomes["answered"] += 1
        if _leaks(answer, a):
            leaked.append(f"{who}: {label} -> {_dump(answer)[:300]}")
    after = store.counts()
    changed = {t: (before[t], after[t]) for t in before if before[t] != after.get(t)}
    # the restricted project fact: bob shares the project, is not a reader
    restricted_leaks = sum(a.restricted in _dump(x) for x in (
        mem.facts.current(BOB), mem.recall(BOB, f"incident {WORD} root cause").items,
        mem.context(BOB, query="incident").text))
    # and alice still sees all of hers, unchanged: the probes are not vacuous
    own = {f.id for f in mem.facts.list(ALICE, limit=1000)}
    mine = [mem.get(r, scope=ALICE) for r in a.refs]
    figures.update(backend=backend, probes=sum(outcomes.values()),
                   foreign=len(leaked) + restricted_leaks, rows_changed=len(changed),
                   **outcomes)
    assert not leaked, "\n".join(leaked)
    assert restricted_leaks == 0
    assert not changed, changed
    assert own >= {a.fact, a.old, a.pending, a.restricted} and len(mine) == len(a.refs)
    assert mem.facts.get(a.fact, ALICE).status == "active"
    assert a.run.scratch.get("note") == f"remember {WORD} {CONTENT}"
    assert outcomes["not_found"] > 0 and outcomes["answered"] > 0


# -- forget canaries ----------------------------------------------------------------------

CANARY = "quokkalilt"


def redis_hits(scratch_url: str | None, word: str) -> int:
    """Keys or values in Redis that contain ``word``."""
    if scratch_url is None:
        return 0
    import redis

    client = redis.Redis.from_url(scratch_url)
    try:
        hits = 0
        for name in client.scan_iter(count=500):
            value = client.get(name) or b""
            hits += word.encode() in (name + b" " + value).lower()
        return hits
    finally:
        client.close()


def canary_bytes(store: StoreProbe, scratch_url: str | None, word: str) -> int:
    """Occurrences of ``word`` in the raw storage: the SQLite files' bytes; on PostgreSQL
    the columns that hold it (StoreProbe, as the owner) and the Redis keys."""
    if store.backend == "sqlite":
        blob = b"".join(p.read_bytes() for p in sqlite_store_files(store.path))
        return blob.lower().count(word.encode())
    return int(store.contains(word)) + redis_hits(scratch_url, word)


def test_forget_canaries(mem: Memory, clock: ManualClock, store: StoreProbe,
                         scratch_url: str | None, backend: str, figures: Any) -> None:
    w = CANARY
    kw: dict[str, Any] = dict(kind="preference", subject="alice", attribute="snack",
                              actor="user", source="chat")
    mem.facts.propose(ALICE, claim=f"Alice snacks on {w} crisps", **kw)
    clock.advance(seconds=1)
    mem.facts.propose(ALICE, claim=f"Alice snacks on {w} biscuits", **kw)  # supersedes
    mem.facts.propose(ALICE, claim=f"Alice was born in {w}", kind="profile", subject="alice",
                      attribute="birthplace", actor="user", source="chat", tier="identity")
    keep = mem.facts.propose(ALICE, claim="Alice likes plain water", kind="preference",
                             subject="alice", attribute="drink", actor="user", source="chat")
    assert keep.record is not None
    thread = []
    for text in (f"Booked the {w} venue", "Who is catering?", "Priya's team", "Confirmed"):
        clock.advance(seconds=1)
        thread.append(mem.episodes.append(ALICE, text=text, actor="user",
                                          source="chat:planning").id)
    mem.checkpoints.save(ALICE, "offsite", objective=f"plan the {w} offsite")
    mem.checkpoints.save(ALICE, "offsite", next_action=f"pay the {w} deposit")
    mem.checkpoints.save(ALICE, "launch", objective="launch")
    mem.checkpoints.close(ALICE, "launch", outcome=f"launched at {w}")
    mem.ledger.begin(ALICE, "pay:deposit", intent=f"pay {w} deposit")
    mem.feedback(keep.record.ref, "useful", scope=ALICE, note=f"mentioned {w}")
    run = mem.run(ALICE, task=f"{w}-planning")
    run.__enter__()
    run.scratch.write("venue", f"{w} hall")
    run.scratch.write(f"{w}-key", "value")
    bob_fact = mem.facts.propose(BOB, claim="Bob likes tea", kind="preference",
                                 subject="bob", attribute="drink", actor="user", source="chat")
    before = canary_bytes(store, scratch_url, w)
    report = mem.forget(ALICE, match=w)
    after = canary_bytes(store, scratch_url, w)
    figures.update(backend=backend, layers_written=9, canary_bytes_before=before,
                   canary_bytes=after, forgotten=report.total)
    assert before > 0  # the probe can see the canary where it was
    assert after == 0, report
    assert report.counts["facts"] == 3 and report.counts["episodes"] == 2  # + the close log
    assert report.counts["checkpoints"] == 3 and report.counts["scratch"] == 2
    assert (report.counts["operations"], report.counts["runs"]) == (1, 1)
    assert report.counts["feedback"] == 1
    # what did not carry the canary is intact (the thread's other turns, bob, the kept fact)
    assert [e.id for e in mem.episodes.log(ALICE, thread="chat:planning")] == thread[1:]
    assert bob_fact.record is not None and mem.facts.get(bob_fact.record.id, BOB).status == "active"
    assert mem.facts.get(keep.record.id, ALICE).status == "active"
    assert mem.doctor() == []
    run.close()


# -- TTL with a moved clock ---------------------------------------------------------------


@pytest.fixture
def ttl_records(mem: Memory, clock: ManualClock) -> Iterator[dict[str, Any]]:
    now = clock.now()
    fact = mem.facts.propose(ALICE, claim="Alice is on call this week", kind="preference",
                             subject="alice", attribute="on_call", actor="user", source="chat",
                             expires_at=now + timedelta(hours=1))
    pending = mem.facts.propose(ALICE, claim="Alice is in Lisbon", kind="profile",
                                subject="alice", attribute="location", actor="agent",
                                source="chat", expires_at=now + timedelta(hours=1))
    ep = mem.episodes.append(ALICE, text="Alice is on call until Friday", actor="user",
                             source="chat", expires_at=now + timedelta(hours=1))
    run = mem.run(ALICE, ttl=timedelta(minutes=30))
    run.__enter__()
    run.scratch.write("default_ttl", "on call notes")
    run.scratch.write("short", "pager code", ttl=60)
    assert fact.record and pending.record and pending.status == "pending"
    yield {"fact": fact.record.id, "pending": pending.record.id, "episode": ep.id, "run": run}
    run.close()


def _visible(mem: Memory, r: dict[str, Any]) -> dict[str, bool]:
    """Whether each read path shows an expiring record."""
    f, p, e, run = r["fact"], r["pending"], r["episode"], r["run"]
    current = {x.id for x in mem.facts.current(ALICE)}
    listed = {x.id: x.status for x in mem.facts.list(ALICE)}
    recall = {h.ref for h in mem.recall(ALICE, "Alice on call week Lisbon Friday",
                                        layers=["facts", "episodes"], k=20).items}
    return {
        "facts.current": f in current,
        "facts.list active": listed.get(f) == "active",
        "facts.list pending": listed.get(p) == "pending_review",
        "get fact active": mem.get(f"fact:{f}", scope=ALICE).status == "active",  # type: ignore[union-attr]
        "facts.get active": mem.facts.get(f, ALICE).status == "active",
        "facts.history active": any(x.status == "active" for x in mem.facts.history(f, ALICE)),
        "in_namespace": f in {x.id for x in mem.facts.in_namespace(ALICE, "alice")},
        "review.pending": p in {x.id for x in mem.review.pending(ALICE)},
        "recall fact": f"fact:{f}" in recall,
        "context": "on call this week" in mem.context(ALICE, query="on call").text,
        "episodes.log": e in {x.id for x in mem.episodes.log(ALICE)},
        "episodes.search": f"episode:{e}" in {h.ref for h in mem.episodes.search(
            ALICE, "on call until Friday", k=20)},
        "recall episode": f"episode:{e}" in recall,
        "get episode current": mem.get(f"episode:{e}", scope=ALICE).status != "expired",  # type: ignore[union-attr]
        "scratch default ttl": run.scratch.get("default_ttl") is not None,
        "scratch ttl=60": run.scratch.read("short").found,
        "scratch list": bool(run.scratch.list()),
        "scratch items": bool(run.scratch.items()),
    }


def test_ttl_with_a_moved_clock(mem: Memory, clock: ManualClock, store: StoreProbe,
                                ttl_records: dict[str, Any], backend: str,
                                figures: Any) -> None:
    fresh = _visible(mem, ttl_records)
    clock.advance(seconds=30)
    assert _visible(mem, ttl_records)["scratch ttl=60"]
    clock.advance(minutes=1)
    assert not _visible(mem, ttl_records)["scratch ttl=60"]
    assert _visible(mem, ttl_records)["scratch default ttl"]
    clock.advance(hours=2)  # past every expiry; no sweep has run
    stale = _visible(mem, ttl_records)
    expired_visible = [path for path, shown in stale.items() if shown]
    hidden_when_fresh = [path for path, shown in fresh.items() if not shown]
    # the sweep records the facts expired and deletes the episode and the scratch entries
    counts_before = store.counts()
    swept = mem.sweep()
    after = store.counts()
    f = mem.facts.get(ttl_records["fact"], tenant="acme")  # the operator: stored status
    figures.update(backend=backend, paths=len(stale), expired_visible=len(expired_visible),
                   swept_facts=swept["facts"], swept_episodes=swept["episodes"],
                   swept_scratch=swept["scratch"])
    assert hidden_when_fresh == [], hidden_when_fresh  # every path showed them before
    assert expired_visible == [], expired_visible
    assert swept["facts"] == 2 and swept["episodes"] == 1
    assert f.status == "expired"
    assert after["episodes"] == counts_before["episodes"] - 1
    if mem.scratch_store.transactional:
        assert swept["scratch"] == 2 and after["scratch"] == counts_before["scratch"] - 2
    with pytest.raises(NotFound):
        mem.get(f"episode:{ttl_records['episode']}", scope=ALICE)
