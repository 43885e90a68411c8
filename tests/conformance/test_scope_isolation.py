"""Scope and readers filtering on every read path (DESIGN §4)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest

from memstrata import ManualClock, Memory, NotFound, Scope

ALICE_DOCS = Scope(user="alice", project="docs-site")
ALICE_API = Scope(user="alice", project="api")
BOB_DOCS = Scope(user="bob", project="docs-site")


def _pref(mem: Memory, scope: Scope, claim: str, attribute: str, **kw: object) -> str:
    res = mem.facts.propose(scope, claim=claim, kind="preference", subject="user",
                            attribute=attribute, actor="user", source="chat", **kw)  # type: ignore[arg-type]
    assert res.record is not None
    return res.record.id


def test_user_fact_never_reaches_another_user(mem: Memory) -> None:
    _pref(mem, Scope(user="alice"), "Alice prefers British spelling in docs", "spelling")
    assert [f.claim for f in mem.facts.current(ALICE_DOCS)] == [
        "Alice prefers British spelling in docs"]
    assert [f.claim for f in mem.facts.current(ALICE_API)] == [
        "Alice prefers British spelling in docs"]
    assert mem.facts.current(BOB_DOCS) == []
    assert mem.recall(BOB_DOCS, "British spelling docs").items == []
    assert "British" not in mem.context(BOB_DOCS, query="spelling").text


def test_user_project_fact_stays_in_its_project(mem: Memory) -> None:
    _pref(mem, ALICE_DOCS, "Docs site uses Hugo for alice's pages", "generator")
    assert len(mem.facts.current(ALICE_DOCS)) == 1
    assert mem.facts.current(ALICE_API) == []
    assert mem.facts.current(Scope(user="alice")) == []
    assert mem.facts.current(BOB_DOCS) == []


def test_project_fact_applies_to_every_user_of_the_project(mem: Memory) -> None:
    _pref(mem, Scope(project="docs-site"), "Docs site deploys from main", "deploy_branch")
    assert len(mem.facts.current(ALICE_DOCS)) == 1
    assert len(mem.facts.current(BOB_DOCS)) == 1
    assert mem.facts.current(ALICE_API) == []


def test_tenants_are_isolated(mem: Memory) -> None:
    _pref(mem, Scope(tenant="acme", user="alice"), "Acme alice likes tea", "drink")
    assert mem.facts.current(Scope(tenant="globex", user="alice")) == []
    mem.episodes.append(Scope(tenant="acme", user="alice"), text="tea ordered for the team",
                        source="erp", actor="tool")
    assert mem.episodes.search(Scope(tenant="globex", user="alice"), "tea ordered") == []


def test_foreign_episode_matching_perfectly_never_appears(mem: Memory) -> None:
    mem.episodes.append(BOB_DOCS, text="Bob's salary negotiation notes: asked for a raise",
                        event="hr_note", actor="user", source="chat")
    mem.episodes.append(ALICE_DOCS, text="Alice reviewed the docs navigation",
                        event="review", actor="user", source="chat")
    hits = mem.episodes.search(ALICE_DOCS, "Bob's salary negotiation notes: asked for a raise")
    assert all("salary" not in h.excerpt for h in hits)
    assert mem.recall(ALICE_DOCS, "salary negotiation raise").items == []


def test_readers_restrict_within_a_scope(mem: Memory) -> None:
    project = Scope(project="docs-site")
    fid = _pref(mem, project, "Incident 42 root cause: leaked staging credentials rotated",
                "incident_42", readers=["alice"])
    assert [f.id for f in mem.facts.current(ALICE_DOCS)] == [fid]
    assert mem.facts.current(BOB_DOCS) == []
    assert mem.recall(BOB_DOCS, "incident 42 root cause").items == []
    assert mem.recall(ALICE_DOCS, "incident 42 root cause").items[0].ref == f"fact:{fid}"
    with pytest.raises(NotFound):
        mem.get(f"fact:{fid}", scope=BOB_DOCS)
    assert mem.get(f"fact:{fid}", scope=ALICE_DOCS).id == fid
    # a replacement inherits the readers of what it supersedes (access follows the source)
    res = mem.facts.propose(project, claim="Incident 42 closed after credential rotation",
                            kind="preference", subject="user", attribute="incident_42",
                            actor="user", source="postmortem")
    assert res.record is not None and res.record.readers == ["alice"]
    assert mem.facts.current(BOB_DOCS) == []


def test_restricted_episode_hidden_from_other_principals(mem: Memory) -> None:
    project = Scope(project="docs-site")
    mem.episodes.append(project, text="Payroll export for March failed", event="payroll",
                        actor="tool", source="hr-system", readers=["carol"])
    assert mem.episodes.search(ALICE_DOCS, "payroll export") == []
    assert len(mem.episodes.search(project, "payroll export", principal="carol")) == 1


def test_common_term_pruning_counts_only_the_callers_rows(
        mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user's data never changes what this user's search finds: a word common in
    bob's episodes stays in alice's query, and a query of only common words still finds."""
    from memstrata.store import pg_search, sqlite_search

    alice, bob = Scope(user="alice"), Scope(user="bob")
    mem.episodes.append_many([{"scope": bob, "text": f"kubernetes deploy {i} went fine",
                               "source": f"ci:{i}", "actor": "user", "thread": f"b{i}"}
                              for i in range(40)])
    mine = {e.ref for e in mem.episodes.append_many([
        {"scope": alice, "text": f"kubernetes upgrade {i} needs a drain", "source": f"ops:{i}",
         "actor": "user", "thread": f"a{i}"} for i in range(3)])}

    def found(scope: Scope, query: str) -> set[str]:
        return {h.ref for h in mem.episodes.search(scope, query, k=50)}

    unpruned = found(alice, "kubernetes")
    for module in (sqlite_search, pg_search):  # every index is large; 10 rows make a word common
        monkeypatch.setattr(module, "LARGE_INDEX_ROWS", -1)
        monkeypatch.setattr(module, "COMMON_TERM_DOCS", 10)
    assert found(alice, "kubernetes") == unpruned == mine
    # for bob "kubernetes" and "deploy" are both common: neither is dropped to nothing
    assert len(found(bob, "kubernetes deploy")) == 40
    # "deploy" is common for bob; "upgrade" (alice's) is not his: his query keeps finding
    assert found(bob, "deploy upgrade") and not found(bob, "deploy upgrade") & mine



def _scores(mem: Memory, scope: Scope, query: str) -> list[tuple[str, float]]:
    return [(h.excerpt, round(h.score, 9)) for h in mem.episodes.search(scope, query, k=10)]


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
@pytest.mark.parametrize("other", [Scope(user="ana", project="harbor"),
                                   Scope(tenant="acme", user="zed")], ids=["user", "tenant"])
def test_another_callers_rows_never_move_a_ranking(mem: Memory, other: Scope, large: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """bo's rows searched alone, then beside another user's or tenant's rows full of the
    query's words (and of other lengths): the same hits, the same scores (a word's weight
    and the mean entry length come from bo's rows alone). Over a large index too, where a
    caller alone in it is scored in one query and a caller beside others word by word."""
    from memstrata.store import pg_search, sqlite_search

    if large:
        for module in (sqlite_search, pg_search):
            monkeypatch.setattr(module, "LARGE_INDEX_ROWS", -1)
    bo = Scope(user="bo", project="harbor")
    for text, source in (("Kickoff call with the Zephyrine team went fine", "b:1"),
                         ("The kickoff deck needs a budget slide before Friday's review",
                          "b:2"),
                         ("Budget review moved to Friday", "b:3")):
        mem.episodes.append(bo, text=text, actor="user", source=source)
    queries = ("Zephyrine kickoff", "kickoff budget", "Friday review")
    alone = [_scores(mem, bo, q) for q in queries]
    assert all(len(hits) >= 2 for hits in alone)
    mem.episodes.append_many([{"scope": other, "text": f"Zephyrine legal hold item {i} " +
                               "kickoff budget " * (i % 3), "actor": "user",
                               "source": f"a:{i}"} for i in range(40)])
    assert [_scores(mem, bo, q) for q in queries] == alone


@pytest.mark.parametrize("change", ["mid-thread turns", "expiry"])
def test_another_tenants_row_never_moves_a_long_lived_callers_ranking(
        store_url: str, scratch_url: str | None, clock: ManualClock, change: str) -> None:
    """A long-lived process remembers a caller's word counts over a large index (3,000
    rows). The caller's own rows then change where a count topped up with new rows cannot
    see: turns written into the middle of threads rewrite their neighbours' context in
    place, or rows expire within the hour. Another tenant's row, appended and then
    forgotten, must move none of the caller's scores, and a fresh process must rank as
    the long-lived one (SQLite scored a caller alone with the table's fresh statistics and
    switched to its stale remembered ones; a forget or a tenth of growth took them again)."""
    from backends import open_store

    rng = random.Random(4)
    vocab = [f"w{n}" for n in range(60)]
    al, start = Scope(user="al"), clock.now() - timedelta(days=1)

    def text() -> str:
        words = [rng.choice(vocab) for _ in range(rng.randint(5, 25))]
        for word in ("redis", "timeout", "deploy"):
            if rng.random() < 0.05:
                words.insert(rng.randrange(len(words) + 1), word)
        return " ".join(words)

    mem = open_store(store_url, scratch_url, clock)
    mem.episodes.append_many([
        {"scope": al, "text": text(), "actor": "user", "source": f"chat:{i // 20}",
         "observed_at": start + timedelta(seconds=i),
         "expires_at": clock.now() + timedelta(minutes=10) if i % 7 == 0 else None}
        for i in range(3000)])
    query = "redis timeout"
    _scores(mem, al, query)  # the counts are remembered
    if change == "expiry":
        clock.advance(timedelta(minutes=30))
    else:
        mem.episodes.append_many([  # into the middle of threads
            {"scope": al, "text": "redis", "actor": "user", "source": f"chat:{t}",
             "observed_at": start + timedelta(seconds=20 * t + 10, milliseconds=500)}
            for t in range(40)])
    before = _scores(mem, al, query)
    zed = Scope(tenant="acme", user="zed")
    other = mem.episodes.append(zed, text="hello world", actor="user", source="x:1")
    assert _scores(mem, al, query) == before
    assert mem.forget(zed, record_ids=[other.id], force=True).counts["episodes"] == 1
    assert _scores(mem, al, query) == before
    fresh = open_store(store_url, scratch_url, clock)
    assert _scores(fresh, al, query) == before
    fresh.close()
    mem.close()


def test_a_word_first_written_after_a_search_that_found_none_is_found(
        mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-lived process (an MCP server, an agent loop) searched a word no row held, then
    a row with it was written: the next search finds it (a remembered count of 0 left the
    word out of every query over a large index until the index grew by a tenth)."""
    from memstrata.store import pg_search, sqlite_search

    for module in (sqlite_search, pg_search):  # every index is large
        monkeypatch.setattr(module, "LARGE_INDEX_ROWS", -1)
    you = Scope(user="u")
    mem.episodes.append_many([{"scope": you, "text": f"routine note {i} about the sync",
                               "actor": "user", "source": f"c:{i}"} for i in range(30)])
    assert mem.episodes.search(you, "papaya", k=5) == []
    lunch = mem.episodes.append(you, text="We ordered papaya for the team lunch",
                                actor="user", source="c:x")
    assert [h.ref for h in mem.episodes.search(you, "papaya", k=5)] == [lunch.ref]
    assert mem.recall(you, "papaya lunch", layers=["episodes"]).refs[:1] == [lunch.ref]


def test_two_windows_weigh_words_as_a_fresh_process_does(
        store_url: str, scratch_url: str | None, clock: ManualClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Over a large index a process remembers word counts; after a search "since last
    month", one "since this morning" weighs the words as a fresh process does (the windows
    shared the month's counts; words now weigh among every row the caller may read,
    whatever the window)."""
    from backends import open_store
    from memstrata.store import pg_search, sqlite_search

    for module in (sqlite_search, pg_search):
        monkeypatch.setattr(module, "LARGE_INDEX_ROWS", -1)
    you = Scope(user="u")
    now = clock.now()
    mem = open_store(store_url, scratch_url, clock)
    # the month: "zebra" in half the rows; this morning (the last 4 hours): in two of four
    mem.episodes.append_many([
        {"scope": you, "text": ("zebra " if i < 60 or i in (117, 119) else "kernel ")
         + f"routine entry {i}", "actor": "user", "source": f"c:{i}",
         "observed_at": now - timedelta(hours=120 - i)} for i in range(120)])
    month, morning = now - timedelta(days=30), now - timedelta(hours=5)

    def ranked(m: Memory, since: datetime) -> list[tuple[str, float]]:
        return [(h.ref, round(h.score, 9))
                for h in m.episodes.search(you, "zebra kernel", k=10, since=since)]

    ranked(mem, month)
    fresh = open_store(store_url, scratch_url, clock)
    assert ranked(mem, morning) == ranked(fresh, morning)
    fresh.close()
    mem.close()
