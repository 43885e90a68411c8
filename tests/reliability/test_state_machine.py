"""A Hypothesis state machine over every layer, three users, on every backend.

Three users (``u0``..``u2``) of one tenant act on a store; a plain-Python model (dicts)
says what each of them should read. Rules: propose facts (the same slot supersedes, an
equal claim is a duplicate, an agent's or an identity fact waits for review; approve and
reject), retire, feedback (three contradictions retire a fact), episodes (``append``,
``append_many``), checkpoints, the ledger, scratch with TTLs on a moved clock, forget (by
match, by own ids, by another user's ids) and sweep. After every step every user's reads
(``facts.current``/``list``, the review queue, ``episodes.log``, checkpoints, the ledger,
scratch, ``get`` by reference, ``recall`` over facts, episodes and handoffs) must equal the
model, and the counters below stay at zero:

- ``foreign``: a read returned a record of another user (or another example's tenant);
- ``lost``: a record of the model is missing from a read;
- ``duplicated``: a record read twice, or two active facts in one slot;
- ``ghosts``: a read returned a record the model does not have (forgotten, rejected...).

Each example runs in a tenant of its own, so examples start from an empty store without
resetting tables. The tag words a record carries (``olive``, ``lilac``, ``umber``) are what
forget matches; no generated id can contain them (Crockford base32 has no I, L, O or U).
"""

from __future__ import annotations

import itertools
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from memstrata import Conflict, ManualClock, Memory, NotFound, Run, Scope

USERS = ("u0", "u1", "u2")
TAGS = ("olive", "lilac", "umber")
SLOTS = ("drink", "editor", "city")  # standard facts (a user's, or an agent's for review)
IDENTITY_SLOTS = ("name", "timezone")  # identity tier: always waits for a person
TASKS = ("t1", "t2")
KEYS = ("op:0", "op:1", "op:2")
SCRATCH_KEYS = ("k0", "k1", "k2")
TTLS = (60, 120, 600)  # seconds; Redis also expires on its own clock, so never shorter
ADVANCES = (1, 30, 90, 400)

SIZES = {"ci": {"max_examples": 10, "stateful_step_count": 25},
         "full": {"max_examples": 100, "stateful_step_count": 50}}

#: Shrinking a failure of a long stateful run can take many minutes: the failing steps are
#: printed unshrunk unless MEMSTRATA_SHRINK=1.
PHASES = tuple(Phase) if os.environ.get("MEMSTRATA_SHRINK") == "1" else (
    Phase.explicit, Phase.reuse, Phase.generate)

user_st = st.sampled_from(USERS)
tag_st = st.sampled_from(TAGS)
n_st = st.integers(0, 2)
pick_st = st.integers(0, 1000)


@dataclass
class MFact:
    id: str
    user: str
    attribute: str
    claim: str
    status: str
    supersedes: str | None = None
    superseded_by: str | None = None
    contradictions: int = 0


@dataclass
class Model:
    facts: dict[str, MFact] = field(default_factory=dict)
    episodes: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (user, text)
    #: (user, task) -> [(version, objective)], oldest first
    checkpoints: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    #: (user, key) -> [status, external_ref, intent]
    ledger: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    #: (user, key) -> (value, expires_at epoch seconds)
    scratch: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)

    def user_facts(self, user: str, *statuses: str) -> list[MFact]:
        return [f for f in self.facts.values()
                if f.user == user and (not statuses or f.status in statuses)]

    def slot(self, user: str, attribute: str, status: str) -> MFact | None:
        found = [f for f in self.facts.values() if f.user == user and
                 f.attribute == attribute and f.status == status]
        return found[-1] if found else None  # insertion order is creation order

    def owner(self, record_id: str) -> str | None:
        if record_id in self.facts:
            return self.facts[record_id].user
        if record_id in self.episodes:
            return self.episodes[record_id][0]
        return None


TOTALS: Counter[str] = Counter()
_TENANTS = itertools.count()


class MemoryMachine(RuleBasedStateMachine):
    """One example: three users of a fresh tenant on the test's store."""

    mem: Memory
    clock: ManualClock

    def __init__(self) -> None:
        super().__init__()
        self.tenant = f"sm{next(_TENANTS)}"
        self.scopes = {u: Scope(tenant=self.tenant, user=u) for u in USERS}
        self.m = Model()
        self.runs: dict[str, Run] = {}
        for u in USERS:
            run = self.mem.run(self.scopes[u])
            run.__enter__()
            self.runs[u] = run
        TOTALS["examples"] += 1

    def teardown(self) -> None:
        for run in self.runs.values():
            run.close()

    # -- helpers -----------------------------------------------------------------
    def _step(self) -> None:
        TOTALS["steps"] += 1
        self.clock.advance(seconds=1)  # distinct creation times: "latest" is well defined

    def _now(self) -> float:
        return self.clock.now().timestamp()

    @staticmethod
    def _pick(items: list[Any], n: int) -> Any:
        return items[n % len(items)] if items else None

    def _fail(self, kind: str, what: str) -> None:
        TOTALS[kind] += 1
        raise AssertionError(f"{kind}: {what}")

    # -- facts -------------------------------------------------------------------
    def _propose(self, user: str, attribute: str, claim: str, *, actor: str,
                 tier: str) -> None:
        res = self.mem.facts.propose(self.scopes[user], claim=claim, kind="preference",
                                     subject="user", attribute=attribute, actor=actor,
                                     source="chat", tier=tier)
        pending_verdict = actor == "agent" or tier == "identity"
        active = self.m.slot(user, attribute, "active")
        pending = self.m.slot(user, attribute, "pending_review")
        if active is not None and active.claim == claim:
            expected = "duplicate"
        elif pending is not None and pending.claim == claim:
            expected = "duplicate" if pending_verdict else "confirms"
        else:
            expected = "pending" if pending_verdict else "new"
        if expected == "duplicate":
            assert res.status == "duplicate", (res.status, res.reason)
            assert res.record is not None
            dup = active if active is not None and active.claim == claim else pending
            assert dup is not None and res.record.id == dup.id
            return
        assert res.record is not None, (res.status, res.reason)
        fid = res.record.id
        if expected == "pending":
            assert res.status == "pending", (res.status, res.reason)
            self.m.facts[fid] = MFact(fid, user, attribute, claim, "pending_review")
            return
        assert res.status == ("superseding" if active else "committed"), (res.status,
                                                                          res.reason)
        if expected == "confirms":
            assert pending is not None
            pending.status = "rejected"
        self._activate(MFact(fid, user, attribute, claim, "active"), active)

    def _activate(self, fact: MFact, active: MFact | None) -> None:
        if active is not None:
            active.status, active.superseded_by = "superseded", fact.id
            fact.supersedes = active.id
        fact.status = "active"
        self.m.facts[fact.id] = fact

    @rule(user=user_st, slot=st.sampled_from(SLOTS), tag=tag_st, n=n_st)
    def propose_own(self, user: str, slot: str, tag: str, n: int) -> None:
        self._step()
        self._propose(user, slot, f"likes {tag} {n}", actor="user", tier="standard")

    @rule(user=user_st, slot=st.sampled_from(SLOTS), tag=tag_st, n=n_st)
    def propose_agent(self, user: str, slot: str, tag: str, n: int) -> None:
        self._step()
        self._propose(user, slot, f"likes {tag} {n}", actor="agent", tier="standard")

    @rule(user=user_st, slot=st.sampled_from(IDENTITY_SLOTS), tag=tag_st, n=n_st)
    def propose_identity(self, user: str, slot: str, tag: str, n: int) -> None:
        self._step()
        self._propose(user, slot, f"is {tag} {n}", actor="user", tier="identity")

    @rule(user=user_st, pick=pick_st, approve=st.booleans(), mine=st.booleans())
    def review(self, user: str, pick: int, approve: bool, mine: bool) -> None:
        """A person approves or rejects a pending fact (``mine``: of this user's scope;
        otherwise another user's, which this scope must not reach)."""
        self._step()
        owner = user if mine else USERS[(USERS.index(user) + 1) % len(USERS)]
        fact = self._pick(self.m.user_facts(owner, "pending_review"), pick)
        if fact is None:
            return
        scope = self.scopes[user]
        if not mine:
            with pytest.raises(NotFound):
                if approve:
                    self.mem.review.approve(fact.id, by="rev", scope=scope)
                else:
                    self.mem.review.reject(fact.id, reason="no", scope=scope)
            return
        if approve:
            res = self.mem.review.approve(fact.id, by="rev", scope=scope)
            assert res.record is not None and res.record.id == fact.id
            self._activate(fact, self.m.slot(user, fact.attribute, "active"))
        else:
            out = self.mem.review.reject(fact.id, reason="no", scope=scope)
            assert out.status == "rejected"
            fact.status = "rejected"

    @rule(user=user_st, pick=pick_st)
    def retire(self, user: str, pick: int) -> None:
        self._step()
        fact = self._pick(self.m.user_facts(user), pick)
        if fact is None:
            return
        if fact.status in ("active", "pending_review"):
            out = self.mem.facts.retire(fact.id, reason="stale", scope=self.scopes[user])
            assert out.status == "retired"
            fact.status = "retired"
        else:
            with pytest.raises(Conflict):
                self.mem.facts.retire(fact.id, reason="stale", scope=self.scopes[user])

    @rule(user=user_st, pick=pick_st, signal=st.sampled_from(["useful", "contradicted"]),
          on_episode=st.booleans())
    def feedback(self, user: str, pick: int, signal: str, on_episode: bool) -> None:
        self._step()
        if on_episode:
            eid = self._pick(sorted(i for i, (u, _) in self.m.episodes.items() if u == user),
                             pick)
            if eid is not None:
                out = self.mem.feedback(f"episode:{eid}", signal, scope=self.scopes[user])
                assert out["action"] == "recorded"
            return
        fact = self._pick(self.m.user_facts(user), pick)
        if fact is None:
            return
        out = self.mem.feedback(f"fact:{fact.id}", signal, scope=self.scopes[user])
        if signal == "contradicted":
            fact.contradictions += 1
            if fact.contradictions >= 3 and fact.status == "active":
                fact.status = "retired"
                assert out["action"] == "retired", out
                return
        assert out["action"] in ("recorded", "demoted"), out

    # -- episodes --------------------------------------------------------------------
    @rule(user=user_st, tag=tag_st, n=n_st)
    def append(self, user: str, tag: str, n: int) -> None:
        self._step()
        text = f"note {tag} {n}"
        ep = self.mem.episodes.append(self.scopes[user], text=text, actor="user",
                                      source="chat")
        self.m.episodes[ep.id] = (user, text)

    @rule(user=user_st, tags=st.lists(tag_st, min_size=1, max_size=4))
    def append_many(self, user: str, tags: list[str]) -> None:
        self._step()
        texts = [f"batch {t} {i}" for i, t in enumerate(tags)]
        eps = self.mem.episodes.append_many([
            {"scope": self.scopes[user], "text": t, "actor": "tool", "source": "chat"}
            for t in texts])
        assert [e.text for e in eps] == texts
        for ep, text in zip(eps, texts, strict=True):
            self.m.episodes[ep.id] = (user, text)

    # -- checkpoints and the ledger ----------------------------------------------------
    @rule(user=user_st, task=st.sampled_from(TASKS), tag=tag_st, n=n_st)
    def checkpoint(self, user: str, task: str, tag: str, n: int) -> None:
        self._step()
        objective = f"goal {tag} {n}"
        cp = self.mem.checkpoints.save(self.scopes[user], task, objective=objective)
        versions = self.m.checkpoints.setdefault((user, task), [])
        expected = versions[-1][0] + 1 if versions else 1
        assert cp.version == expected, (cp.version, expected)
        versions.append((cp.version, objective))

    @rule(user=user_st, key=st.sampled_from(KEYS), tag=tag_st)
    def begin(self, user: str, key: str, tag: str) -> None:
        self._step()
        # one intent per key (another one for a stored key is a Conflict)
        op = self.mem.ledger.begin(self.scopes[user], key, intent=f"do {key}")
        entry = self.m.ledger.get((user, key))
        if entry is None:
            assert not op.resumed and op.status == "pending"
            self.m.ledger[(user, key)] = ["pending", None, f"do {key}"]
            return
        assert op.resumed
        if entry[0] == "failed":
            entry[0] = "pending"
        assert op.status == entry[0], (op.status, entry)

    @rule(user=user_st, key=st.sampled_from(KEYS),
          ref=st.sampled_from([None, "ref-1", "ref-2"]), fail=st.booleans())
    def finish(self, user: str, key: str, ref: str | None, fail: bool) -> None:
        self._step()
        scope, entry = self.scopes[user], self.m.ledger.get((user, key))
        if entry is None:
            with pytest.raises(NotFound):
                self.mem.ledger.complete(scope, key, external_ref=ref)
            return
        if fail:
            if entry[0] == "succeeded":
                with pytest.raises(Conflict):
                    self.mem.ledger.fail(scope, key, error="boom")
                return
            assert self.mem.ledger.fail(scope, key, error="boom").status == "failed"
            entry[0] = "failed"
            return
        if entry[0] == "succeeded" and ref not in (None, entry[1]):
            with pytest.raises(Conflict):
                self.mem.ledger.complete(scope, key, external_ref=ref)
            return
        op = self.mem.ledger.complete(scope, key, external_ref=ref)
        entry[0], entry[1] = "succeeded", ref if ref is not None else entry[1]
        assert (op.status, op.external_ref) == ("succeeded", entry[1])

    # -- scratch and time --------------------------------------------------------------
    @rule(user=user_st, key=st.sampled_from(SCRATCH_KEYS), tag=tag_st,
          ttl=st.sampled_from(TTLS))
    def scratch_write(self, user: str, key: str, tag: str, ttl: int) -> None:
        self._step()
        value = f"val {tag}"
        self.runs[user].scratch.write(key, value, ttl=ttl)
        self.m.scratch[(user, key)] = (value, self._now() + ttl)

    @rule(user=user_st, key=st.sampled_from(SCRATCH_KEYS))
    def scratch_delete(self, user: str, key: str) -> None:
        self._step()
        receipt = self.runs[user].scratch.delete(key)
        had = self.m.scratch.pop((user, key), None)
        # an expired entry may linger until a sweep: deleting it says "deleted" too
        if had is not None and had[1] > self._now():
            assert receipt == f"deleted {key}", receipt
        elif had is None:
            assert receipt == f"{key} is not set", receipt

    @rule(seconds=st.sampled_from(ADVANCES))
    def advance(self, seconds: int) -> None:
        self._step()
        self.clock.advance(seconds=seconds)

    @rule()
    def sweep(self) -> None:
        self._step()
        now = self._now()
        expired = [k for k, (_, exp) in self.m.scratch.items() if exp <= now]
        out = self.mem.sweep()
        for k in expired:
            del self.m.scratch[k]
        assert out["facts"] == 0 and out["episodes"] == 0
        if self.mem.scratch_store.transactional:  # Redis also drops on its own clock
            assert out["scratch"] >= len(expired)

    # -- forget ------------------------------------------------------------------------
    @rule(user=user_st, tag=tag_st)
    def forget_match(self, user: str, tag: str) -> None:
        self._step()
        report = self.mem.forget(self.scopes[user], match=tag)
        gone = {i for i, f in self.m.facts.items() if f.user == user and tag in f.claim}
        self._drop_facts(gone)
        eps = [i for i, (u, t) in self.m.episodes.items() if u == user and tag in t]
        for i in eps:
            del self.m.episodes[i]
        cps = 0
        for (u, _task), versions in self.m.checkpoints.items():
            if u == user:
                cps += sum(tag in obj for _, obj in versions)
                versions[:] = [(v, obj) for v, obj in versions if tag not in obj]
        ops = [k for k, e in self.m.ledger.items() if k[0] == user and tag in e[2]]
        for k in ops:
            del self.m.ledger[k]
        for k in [k for k, (v, _) in self.m.scratch.items() if k[0] == user and tag in v]:
            del self.m.scratch[k]
        assert (report.counts["facts"], report.counts["episodes"],
                report.counts["operations"]) == (len(gone), len(eps), len(ops)), report.counts
        assert report.counts["checkpoints"] == cps, report.counts

    @rule(user=user_st, pick=pick_st, mine=st.booleans(), episode=st.booleans())
    def forget_ids(self, user: str, pick: int, mine: bool, episode: bool) -> None:
        """Forget one record by id: one of this user's (a fact takes its lineage), or
        another user's id, which this scope does not own: nothing changes."""
        self._step()
        owner = user if mine else USERS[(USERS.index(user) + 2) % len(USERS)]
        if episode:
            eid = self._pick(sorted(i for i, (u, _) in self.m.episodes.items() if u == owner),
                             pick)
            if eid is None:
                return
            report = self.mem.forget(self.scopes[user], record_ids=[f"episode:{eid}"])
            if mine:
                del self.m.episodes[eid]
            assert report.counts["episodes"] == int(mine) and report.counts["facts"] == 0
            return
        fact = self._pick(self.m.user_facts(owner), pick)
        if fact is None:
            return
        report = self.mem.forget(self.scopes[user], record_ids=[f"fact:{fact.id}"])
        lineage = self._lineage(fact.id) if mine else set()
        self._drop_facts(lineage)
        assert report.counts["facts"] == len(lineage), (report.counts, lineage)
        if not mine:
            assert report.total == 0, report.counts

    def _lineage(self, fid: str) -> set[str]:
        found, todo = {fid}, [fid]
        while todo:
            f = self.m.facts[todo.pop()]
            linked = [f.supersedes, f.superseded_by] + [
                o.id for o in self.m.facts.values() if fid in (o.supersedes, o.superseded_by)]
            for other in linked:
                if other and other not in found and other in self.m.facts:
                    found.add(other)
                    todo.append(other)
        return found

    def _drop_facts(self, ids: set[str]) -> None:
        for i in ids:
            del self.m.facts[i]
        for f in self.m.facts.values():  # links to forgotten facts are cleared
            if f.supersedes in ids:
                f.supersedes = None
            if f.superseded_by in ids:
                f.superseded_by = None

    # -- what every user reads -----------------------------------------------------------
    def _compare(self, what: str, user: str, got: list[str], expected: set[str]) -> None:
        counts = Counter(got)
        dup = [i for i, n in counts.items() if n > 1]
        if dup:
            self._fail("duplicated", f"{what} of {user} lists {dup} twice")
        for i in set(counts) - expected:
            owner = self.m.owner(i)
            kind = "foreign" if owner is not None and owner != user else "ghosts"
            self._fail(kind, f"{what} of {user} returned {i} (owner {owner})")
        missing = expected - set(counts)
        if missing:
            self._fail("lost", f"{what} of {user} misses {sorted(missing)}")

    @invariant()
    def reads_equal_the_model(self) -> None:
        TOTALS["checks"] += 1
        mem, now = self.mem, self._now()
        for user in USERS:
            scope = self.scopes[user]
            current = mem.facts.current(scope, limit=1000)
            self._compare("facts.current", user, [f.id for f in current],
                          {f.id for f in self.m.user_facts(user, "active")})
            slots = Counter(f.attribute for f in current)
            if any(n > 1 for n in slots.values()):
                self._fail("duplicated", f"two active facts in one slot of {user}: {slots}")
            for f in current:
                expected = self.m.facts.get(f.id)
                assert expected is not None and f.claim == expected.claim
                assert f.scope == scope, f.scope
            listed = mem.facts.list(scope, limit=1000)
            self._compare("facts.list", user, [f.id for f in listed],
                          {f.id for f in self.m.user_facts(user)})
            for f in listed:
                mf = self.m.facts[f.id]
                assert (f.status, f.supersedes, f.superseded_by) == (
                    mf.status, mf.supersedes, mf.superseded_by), (f, mf)
            self._compare("review.pending", user, [f.id for f in mem.review.pending(scope)],
                          {f.id for f in self.m.user_facts(user, "pending_review")})
            log = mem.episodes.log(scope)
            self._compare("episodes.log", user, [e.id for e in log],
                          {i for i, (u, _) in self.m.episodes.items() if u == user})
            assert all(e.text == self.m.episodes[e.id][1] for e in log)
            for task in TASKS:
                versions = self.m.checkpoints.get((user, task), [])
                got = [(c.version, c.objective) for c in mem.checkpoints.versions(scope, task)]
                if got != versions:
                    self._fail("lost", f"checkpoints {user}/{task}: {got} != {versions}")
                cp = mem.checkpoints.current(scope, task)
                got_cp = None if cp is None else (cp.version, cp.objective)
                assert got_cp == (versions[-1] if versions else None), (got_cp, versions)
            ops = {o.key: (o.status, o.external_ref) for o in mem.ledger.list(scope)}
            want = {k: (e[0], e[1]) for (u, k), e in self.m.ledger.items() if u == user}
            if ops != want:
                self._fail("lost", f"ledger of {user}: {ops} != {want}")
            live = {k: v for (u, k), (v, exp) in self.m.scratch.items()
                    if u == user and exp > now}
            scratch = self.runs[user].scratch
            if scratch.list() != sorted(live):
                self._fail("lost", f"scratch keys of {user}: {scratch.list()} != {live}")
            for key in SCRATCH_KEYS:
                assert scratch.get(key) == live.get(key), (user, key)
        self._by_ref_and_recall()

    def _by_ref_and_recall(self) -> None:
        """The newest fact and episode of each user open for that user only; recall over
        every layer returns only the user's own live records."""
        for user in USERS:
            own = [f"fact:{f.id}" for f in self.m.user_facts(user)][-1:] + [
                f"episode:{i}" for i, (u, _) in self.m.episodes.items() if u == user][-1:]
            for ref in own:
                rec = self.mem.get(ref, scope=self.scopes[user])
                if ref.startswith("fact:"):
                    assert rec.status == self.m.facts[rec.id].status  # type: ignore[union-attr]
                for other in USERS:
                    if other == user:
                        continue
                    try:
                        self.mem.get(ref, scope=self.scopes[other])
                    except NotFound:
                        continue
                    self._fail("foreign", f"{other} opened {ref} of {user}")
            hits = self.mem.recall(self.scopes[user], "likes note goal " + " ".join(TAGS),
                                   layers=["facts", "episodes", "handoffs"], k=20,
                                   budget_tokens=8000).items
            # recall shows superseded facts too, flagged (the gate ranks current first)
            visible = {f"fact:{f.id}" for f in self.m.user_facts(user, "active",
                                                                   "superseded")} | {
                f"episode:{i}" for i, (u, _) in self.m.episodes.items() if u == user} | {
                f"checkpoint:{task}@{v}" for (u, task), vs in self.m.checkpoints.items()
                if u == user for v, _ in vs}
            for h in hits:
                if h.scope is not None and h.scope != self.scopes[user]:
                    self._fail("foreign", f"recall of {user} returned {h.ref} of {h.scope}")
                if h.ref not in visible:
                    owner = self.m.owner(h.ref.partition(":")[2])
                    kind = "foreign" if owner not in (None, user) else "ghosts"
                    self._fail(kind, f"recall of {user} returned {h.ref}")
            TOTALS["recall_hits"] += len(hits)


def test_state_machine(mem: Memory, clock: ManualClock, backend: str, size: str,
                       figures: Any) -> None:
    TOTALS.clear()

    class Machine(MemoryMachine):
        pass

    Machine.mem, Machine.clock = mem, clock
    t0 = time.monotonic()
    run_state_machine_as_test(Machine, settings=settings(
        **SIZES[size], deadline=None, database=None, derandomize=True, print_blob=True,
        phases=PHASES, suppress_health_check=list(HealthCheck)))
    figures.update(backend=backend, users=len(USERS), examples=TOTALS["examples"],
                   steps=TOTALS["steps"], checks=TOTALS["checks"],
                   recall_hits=TOTALS["recall_hits"], foreign=TOTALS["foreign"],
                   lost=TOTALS["lost"], duplicated=TOTALS["duplicated"],
                   ghosts=TOTALS["ghosts"], seconds=round(time.monotonic() - t0, 1))
    assert TOTALS["examples"] >= SIZES[size]["max_examples"] // 2
    assert TOTALS["steps"] > TOTALS["examples"]
    assert (TOTALS["foreign"], TOTALS["lost"], TOTALS["duplicated"], TOTALS["ghosts"]) == (
        0, 0, 0, 0)
