"""Fault injection at the Nth database call of every public write path.

The requirement: every public write is one transaction including its cleanup, or it
reports exactly what it did; a failed ROLLBACK closes and reopens the handle; raw driver
errors never escape. For each write path (:data:`PATHS`) and backend, the path's state is
built, every table is snapshotted outside the library, and for N = 1, 2, ... the Nth
driver call (``execute``/``executemany``/``COMMIT``/``SAVEPOINT``..., see
:mod:`faults`) raises the driver's own error. The operation must then either

- raise a :class:`~memstrata.MemstrataError` (never ``sqlite3.Error``/``psycopg.Error``)
  and leave the store exactly equal to the snapshot ("rolled back"), or
- return (or raise the error its fault-free run raises) with the complete change: the
  store equal, ULIDs aside, to a fault-free run of the same calls from the same state, the
  result equal to that run's, and every record it names stored ("completed and
  reported"). Multi-transaction operations are checked against what they report instead:
  extraction's per-item outcomes and ``errors``; a sweep or reindex that stops after a
  commit raises a BackendError whose ``details["done"]`` must match the store
  ("reported partial").

After every injected fault the handle must work (a read, and a forget that nests a
savepoint, in a tenant of its own) and, on SQLite, another connection must be able to
take the write lock (``BEGIN IMMEDIATE``). The second test repeats the run with every
ROLLBACK failing too after the fault. The loop ends with the first N past the operation's
last call (no fault reached). At ``ci`` size long paths are sampled (every call near both
ends, a stride between; the ROLLBACK variant more sparsely); at ``full`` size every N of
every path. ``MEMSTRATA_FAULT_PATHS=forget,sweep`` runs the paths whose names contain one
of the words (to debug one path).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from faults import (
    Faults,
    Snapshot,
    difference,
    normalised,
    pg_snapshot,
    redis_snapshot,
    sqlite_snapshot,
    write_lock_free,
)
from psycopg import sql as pg_sql

from backends import PG_TABLES, remove_sqlite_store
from memstrata import (
    ActivationRefused,
    ExplicitProposer,
    ExtractionReport,
    ForgetReport,
    ManualClock,
    Memory,
    MemstrataError,
    Scope,
)
from memstrata.store.sqlite_driver import sqlite3

START = "2026-08-03T09:00:00+00:00"
ALICE = Scope(user="alice", project="docs-site")
#: The usability probe after a fault writes in a tenant of its own (registered by
#: :func:`build`, so the probe changes nothing the snapshots compare).
PROBE = Scope(tenant="probe", user="nobody", project="nowhere")
_ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
Ctx = dict[str, Any]


@dataclass
class Saved:
    """A store's rows (SQLite: the file), its Redis keys and its clock."""

    data: Any
    redis: dict[bytes, tuple[bytes, int]] | None
    now: datetime


# -- the store under test -----------------------------------------------------------------
class Store:
    """One backend's store, rebuilt from nothing as often as a path needs."""

    def __init__(self, backend: str, url: str, scratch_url: str | None, embedder: Any,
                 pg_db: Any) -> None:
        self.backend, self.url, self.scratch_url = backend, url, scratch_url
        self.embedder, self.pg_db = embedder, pg_db
        self.mem: Memory | None = None
        self.clock = ManualClock(START)
        self._admin: psycopg.Connection[Any] | None = None

    @property
    def admin(self) -> psycopg.Connection[Any]:
        """One superuser connection for snapshots and restores (PostgreSQL)."""
        if self._admin is None:
            self._admin = psycopg.connect(self.pg_db.admin_url, autocommit=True)
        return self._admin

    @property
    def path(self) -> Path:
        return Path(self.url.removeprefix("sqlite:///"))

    def fresh(self) -> Memory:
        """Close, empty everything, open again (a new clock at START)."""
        self.close()
        if self.backend == "sqlite":
            remove_sqlite_store(self.path)
        else:
            empty(self.admin)
        if self.scratch_url:
            import redis

            client = redis.Redis.from_url(self.scratch_url)
            client.flushall()
            client.close()
        self.clock = ManualClock(START)
        return self.open()

    def open(self) -> Memory:
        self.mem = Memory.open(self.url, clock=self.clock, embedder=self.embedder,
                               scratch_url=self.scratch_url)
        return self.mem

    def save(self) -> Saved:
        """Everything stored now (and the clock), to :meth:`restore` it cheaply."""
        self.close()
        if self.backend == "sqlite":
            data: Any = self.path.read_bytes()
        else:
            data = {}
            for table in PG_TABLES:
                with self.admin.cursor().copy(pg_sql.SQL("COPY {} TO STDOUT").format(
                        pg_sql.Identifier(table))) as copy:
                    data[table] = b"".join(bytes(b) for b in copy)
        redis_data = None
        if self.scratch_url:
            import redis

            client = redis.Redis.from_url(self.scratch_url)
            redis_data = {k: (client.get(k), client.pttl(k)) for k in client.scan_iter()}
            client.close()
        saved = Saved(data, redis_data, self.clock.now())
        self.open()
        return saved

    def restore(self, saved: Saved) -> Memory:
        """Back to a saved state, through a new Memory (a new process's view)."""
        self.close()
        if self.backend == "sqlite":
            remove_sqlite_store(self.path)
            self.path.write_bytes(saved.data)
        else:
            conn = self.admin
            with conn.transaction():
                conn.execute("SET LOCAL session_replication_role = replica")
                for table in PG_TABLES:
                    conn.execute(pg_sql.SQL("DELETE FROM {}").format(pg_sql.Identifier(table)))
                    with conn.cursor().copy(pg_sql.SQL("COPY {} FROM STDIN").format(
                            pg_sql.Identifier(table))) as copy:
                        copy.write(saved.data[table])
        if self.scratch_url:
            import redis

            client = redis.Redis.from_url(self.scratch_url)
            client.flushall()
            for key, (value, ttl) in (saved.redis or {}).items():
                client.set(key, value, px=ttl if ttl > 0 else None)
            client.close()
        self.clock = ManualClock(saved.now)
        return self.open()

    def snapshot(self) -> Snapshot:
        if self.backend == "sqlite":
            snap = sqlite_snapshot(str(self.path))
        else:
            snap = pg_snapshot(self.admin, PG_TABLES)
        if self.scratch_url:
            snap.update(redis_snapshot(self.scratch_url))
        return snap

    def close(self) -> None:
        if self.mem is not None:
            self.mem.close()
            self.mem = None

    def shut(self) -> None:
        self.close()
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def empty(conn: psycopg.Connection[Any]) -> None:
    """Delete every row (as the superuser, triggers off): what ``backends.reset`` does,
    in a tenth of the time of its TRUNCATE, since every path starts from nothing."""
    with conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")
        for table in PG_TABLES:
            conn.execute(pg_sql.SQL("DELETE FROM {}").format(pg_sql.Identifier(table)))


# -- the write paths ----------------------------------------------------------------------
def later(mem: Memory, **delta: float) -> None:
    """Move the store's clock on (setups do; the operations under test never do)."""
    clock = mem.clock
    assert isinstance(clock, ManualClock)
    clock.advance(**delta)


def propose(mem: Memory, claim: str, *, attribute: str = "standup format",
            actor: str = "user", kind: str = "preference", **kw: Any) -> Any:
    return mem.facts.propose(ALICE, claim=claim, kind=kind, subject="alice",
                             attribute=attribute, actor=actor, source="chat:s1", **kw)


def fact_id(res: Any) -> str:
    assert res.record is not None, res
    return str(res.record.id)


def log(mem: Memory, text: str, **kw: Any) -> Any:
    kw.setdefault("thread", "chat:s1")
    return mem.episodes.append(ALICE, text=text, actor="user", source="chat:s1", **kw)


PROCEDURE: dict[str, Any] = {
    "name": "deploy", "owner": "alice", "preconditions": ["on_call"],
    "steps": ["build", "verify"],
    "cases": [{"name": "start", "state": {"conditions": ["on_call"]},
               "expect": {"next_step": "build"}}],
}
BROKEN = {**PROCEDURE, "cases": [{"name": "wrong", "state": {"conditions": ["on_call"]},
                                  "expect": {"next_step": "verify"}}]}


def enter_run(mem: Memory, ctx: Ctx, **args: Any) -> Any:
    """Open (again, after a restore: ``runs.start`` is idempotent) the run of the setup."""
    ctx["run_args"] = args = args or ctx["run_args"]
    run = mem.run(ALICE, **args)
    run.__enter__()
    ctx["run"] = run
    return run


def _scratch(mem: Memory, ctx: Ctx) -> None:
    run = enter_run(mem, ctx, task="weekly-report", run_id="run-1")
    run.scratch.write("draft", "status: the docs deploy pipeline is green")
    run.scratch.write("notes", {"owner": "alice", "channel": "#docs-standup"})


def _facts_and_episodes(mem: Memory, ctx: Ctx) -> None:
    ctx["a"] = fact_id(propose(mem, "Alice prefers async standup updates"))
    later(mem, minutes=1)
    ctx["b"] = fact_id(propose(mem, "Alice prefers live standups again"))
    ctx["other"] = fact_id(propose(mem, "Alice writes in British English",
                                   attribute="spelling"))
    for n, text in enumerate(["the deploy pipeline failed on the preview build",
                              "re-ran the preview build, it passed",
                              "posted the status report in #docs-standup"]):
        ctx[f"e{n}"] = log(mem, text).id
        later(mem, minutes=1)
    mem.feedback(f"fact:{ctx['b']}", "useful", note="the standup preference helped")
    mem.checkpoints.save(ALICE, "weekly-report", objective="post the standup status report")
    mem.ledger.begin(ALICE, "post-standup", intent="post the standup status to #docs")
    _scratch(mem, ctx)
    later(mem, minutes=1)


def _pending(mem: Memory, ctx: Ctx) -> None:
    ctx["active"] = fact_id(propose(mem, "Alice leads the docs team", attribute="role",
                                    kind="profile"))
    ctx["pending"] = fact_id(propose(mem, "Alice leads the platform team", attribute="role",
                                     kind="profile", tier="identity"))
    later(mem, minutes=1)


def _contradicted_twice(mem: Memory, ctx: Ctx) -> None:
    ctx["a"] = fact_id(propose(mem, "Alice prefers async standup updates"))
    for _ in range(2):
        mem.feedback(f"fact:{ctx['a']}", "contradicted", note="she asked for a live one")
    later(mem, minutes=1)


def _thread(mem: Memory, ctx: Ctx) -> None:
    for n, text in enumerate(["opened the release checklist for v17",
                              "added the translation review step",
                              "asked alice about the calendar template",
                              "added a 9:30 standup slot to the template"]):
        ctx[f"e{n}"] = log(mem, text, thread="chat:s2").id
        later(mem, minutes=10)


def _ledger(mem: Memory, ctx: Ctx) -> None:
    mem.ledger.begin(ALICE, "post-standup", intent="post the standup status to #docs",
                     run_id="run-1")
    mem.ledger.begin(ALICE, "send-mail", intent="mail the report", run_id="run-1")
    mem.ledger.fail(ALICE, "send-mail", error="smtp timeout")
    later(mem, minutes=1)


def _procedures(mem: Memory, ctx: Ctx) -> None:
    mem.procedures.propose(PROCEDURE, by="alice")
    mem.procedures.propose({**PROCEDURE, "steps": ["lint", "build", "verify"], "cases": [
        {"name": "start", "state": {"conditions": ["on_call"]},
         "expect": {"next_step": "lint"}}]}, by="alice")
    mem.procedures.propose(BROKEN, by="alice")
    mem.procedures.activate("deploy", 1, by="alice")
    later(mem, minutes=1)


def _expiring(mem: Memory, ctx: Ctx) -> None:
    soon = mem.clock.now() + timedelta(hours=1)
    ctx["a"] = fact_id(propose(mem, "Alice is on call this week", attribute="on call",
                               expires_at=soon))
    ctx["e"] = log(mem, "the preview build expires soon", expires_at=soon).id
    run = enter_run(mem, ctx, task="weekly-report", run_id="run-1", ttl=600)
    run.scratch.write("draft", "status draft")
    later(mem, hours=2)


def _open_run(mem: Memory) -> str:
    run = mem.run(ALICE, task="weekly-report", run_id="run-9")
    run.__enter__()
    return run.run_id


EXTRACT_SESSION = [
    {"role": "system", "content": "You are the docs team's writing assistant."},
    {"role": "user", "content": "Remember that I prefer async standup updates in "
                                "#docs-standup."},
    {"role": "assistant", "content": "Noted."},
    {"role": "user", "content": "Also remember that the release notes use British English."},
    {"role": "user", "content": "And forget that I write the weekly report on Fridays."},
]


def _extract_setup(mem: Memory, ctx: Ctx) -> None:
    propose(mem, "Alice writes the weekly report on Fridays", attribute="weekly report day")
    later(mem, minutes=1)


@dataclass
class WritePath:
    """One public write path: the state it starts from and the call."""

    name: str
    op: Callable[[Memory, Ctx], Any]
    setup: Callable[[Memory, Ctx], None] | None = None
    #: The fault-free call raises this after storing its record (e.g. a refused activation).
    expect: type[MemstrataError] | None = None
    #: Check a partly completed run against what it reported (multi-transaction paths).
    reported: Callable[[Any, Snapshot, Snapshot, Any], str | None] | None = None
    #: Check a raised error that says what was done (``details["done"]``) against the
    #: store (multi-tenant paths: one transaction per tenant).
    partial: Callable[[MemstrataError, Snapshot, Snapshot], str | None] | None = None


def _extract_reported(result: Any, before: Snapshot, after: Snapshot,
                      reference: Any) -> str | None:
    """An extraction writes each item in its own transaction and reports failures in
    ``errors``: the facts it names are stored, and every item failed or is reported."""
    assert isinstance(result, ExtractionReport) and isinstance(reference, ExtractionReport)
    stored = " ".join(after["facts"])
    for item in result.items:
        if item.ref and item.status in ("committed", "pending", "superseding") and \
                item.ref.removeprefix("fact:") not in stored:
            return f"reported {item.status} {item.ref}, not stored"
    if len(result.items) + len(result.errors) < len(reference.items):
        return f"{len(reference.items)} items expected, {len(result.items)} reported with " \
               f"{len(result.errors)} errors"
    if not result.errors:
        return "changed less than the fault-free run and reported no error"
    return None


def _sweep_partial(exc: MemstrataError, before: Snapshot, after: Snapshot) -> str | None:
    """A sweep that stopped at a tenant reports the tenants and counts it had swept: the
    store changed by exactly those counts."""
    done = exc.details["done"]["counts"]

    def expired(snap: Snapshot) -> int:
        return sum("expired" in r for r in snap["facts"])

    def scratch(snap: Snapshot) -> int:
        return len(snap.get("scratch", [])) + len(snap.get("redis", []))

    measured = {"facts": expired(after) - expired(before),
                "episodes": len(before["episodes"]) - len(after["episodes"]),
                "scratch": scratch(before) - scratch(after)}
    return None if measured == done else f"reported {done}, but the store changed {measured}"


def _reindex_partial(exc: MemstrataError, before: Snapshot, after: Snapshot) -> str | None:
    """A reindex that stopped after clearing reports how many records it re-embedded: the
    store holds exactly that many vectors (every record here is the one tenant's)."""
    done = exc.details["done"]
    if len(after["vectors"]) != done["embedded"]:
        return f"reported {done['embedded']} re-embedded, the store holds " \
               f"{len(after['vectors'])} vectors"
    return None


PATHS = [
    WritePath("facts.propose:new", lambda m, c: propose(m, "Alice prefers async standups")),
    WritePath("facts.propose:duplicate", lambda m, c: propose(m, "Alice prefers async standups"),
              lambda m, c: (propose(m, "Alice prefers async standups"),
                            later(m, minutes=5))),
    WritePath("facts.propose:superseding", lambda m, c: propose(m, "Alice prefers live standups"),
              lambda m, c: (propose(m, "Alice prefers async standups",
                                    readers=["alice", "bob"]),
                            later(m, minutes=5))),
    WritePath("facts.propose:pending", lambda m, c: propose(
        m, "Alice is the docs team lead", attribute="role", kind="profile", tier="identity")),
    WritePath("facts.propose:confirms-pending",
              lambda m, c: propose(m, "Alice prefers async standups"),
              lambda m, c: (propose(m, "Alice prefers async standups", actor="tool"),
                            later(m, minutes=5))),
    WritePath("facts.retire", lambda m, c: m.facts.retire(c["b"], reason="she changed her mind",
                                                          scope=ALICE), _facts_and_episodes),
    WritePath("facts.undo_supersede", lambda m, c: m.facts.undo_supersede(
        c["b"], reason="the live standups were a trial", scope=ALICE), _facts_and_episodes),
    WritePath("facts.extend_expiry", lambda m, c: m.facts.extend_expiry(
        ALICE, {c["a"]: m.clock.now() + timedelta(days=30)}), _expiring),
    WritePath("review.approve", lambda m, c: m.review.approve(c["pending"], by="carol"),
              _pending),
    WritePath("review.approve:edited", lambda m, c: m.review.approve(
        c["pending"], by="carol", claim="Alice leads the platform and docs teams"), _pending),
    WritePath("review.reject", lambda m, c: m.review.reject(c["pending"], reason="not true",
                                                            by="carol"), _pending),
    WritePath("feedback:useful", lambda m, c: m.feedback(f"fact:{c['b']}", "useful",
                                                         note="used in the report"),
              _facts_and_episodes),
    WritePath("feedback:contradicted-retires", lambda m, c: m.feedback(
        f"fact:{c['a']}", "contradicted", note="wrong again"), _contradicted_twice),
    WritePath("feedback:episode", lambda m, c: m.feedback(f"episode:{c['e1']}", "ignored"),
              _facts_and_episodes),
    WritePath("episodes.append", lambda m, c: log(m, "the docs site deployed from main")),
    WritePath("episodes.append:supersedes", lambda m, c: log(
        m, "the preview build failed on a flaky link check", supersedes=f"episode:{c['e0']}"),
        _facts_and_episodes),
    WritePath("episodes.append_many:superseding-and-neighbours",
              lambda m, c: m.episodes.append_many([
        {"scope": ALICE, "text": "alice said the slot is 9:30 daily", "actor": "user",
         "source": "chat:s2", "thread": "chat:s2",
         "observed_at": m.clock.now() - timedelta(minutes=25)},
        {"scope": ALICE, "text": "added the translation and style review steps",
         "actor": "agent", "source": "chat:s2", "thread": "chat:s2",
         "supersedes": f"episode:{c['e1']}",
         "observed_at": m.clock.now() - timedelta(minutes=15)},
    ]), _thread),
    WritePath("checkpoints.save", lambda m, c: m.checkpoints.save(
        ALICE, "weekly-report", by="agent", next_action="post it", completed=["draft"]),
        _facts_and_episodes),
    WritePath("checkpoints.close:outcome", lambda m, c: m.checkpoints.close(
        ALICE, "weekly-report", outcome="posted in #docs-standup", by="agent"),
        _facts_and_episodes),
    WritePath("run.checkpoint.save", lambda m, c: c["run"].checkpoint.save(next_action="mail"),
              _facts_and_episodes),
    WritePath("ledger.begin", lambda m, c: m.ledger.begin(ALICE, "tag-release",
                                                          intent="tag v17", run_id="run-2")),
    WritePath("ledger.begin:resume-unknown", lambda m, c: m.ledger.begin(
        ALICE, "post-standup", intent="post the standup status to #docs", run_id="run-2"),
        _ledger),
    WritePath("ledger.begin:retry-failed", lambda m, c: m.ledger.begin(
        ALICE, "send-mail", intent="mail the report", run_id="run-2"), _ledger),
    WritePath("ledger.complete", lambda m, c: m.ledger.complete(
        ALICE, "post-standup", external_ref="slack:msg/1"), _ledger),
    WritePath("ledger.fail", lambda m, c: m.ledger.fail(ALICE, "post-standup",
                                                        error="channel archived"), _ledger),
    WritePath("run.open", lambda m, c: _open_run(m)),
    WritePath("run.close", lambda m, c: c["run"].close(), _facts_and_episodes),
    WritePath("run.scratch.write", lambda m, c: c["run"].scratch.write("draft", "v2 draft"),
              _facts_and_episodes),
    WritePath("run.scratch.write_many", lambda m, c: c["run"].scratch.write_many(
        [("a", "one"), ("b", {"two": 2}), ("draft", "v3")]), _facts_and_episodes),
    WritePath("run.scratch.delete", lambda m, c: c["run"].scratch.delete("draft"),
              _facts_and_episodes),
    WritePath("run.scratch.discard", lambda m, c: c["run"].scratch.discard(),
              _facts_and_episodes),
    WritePath("procedures.propose", lambda m, c: m.procedures.propose(PROCEDURE, by="alice")),
    WritePath("procedures.activate", lambda m, c: m.procedures.activate("deploy", 2, by="bob"),
              _procedures),
    WritePath("procedures.activate:refused", lambda m, c: m.procedures.activate(
        "deploy", 3, by="bob"), _procedures, expect=ActivationRefused),
    WritePath("procedures.rollback", lambda m, c: m.procedures.rollback("deploy", by="bob"),
              lambda m, c: (_procedures(m, c), m.procedures.activate("deploy", 2, by="bob"),
                            later(m, minutes=1))),
    WritePath("forget:match", lambda m, c: m.forget(ALICE, "standup"), _facts_and_episodes),
    WritePath("forget:subject", lambda m, c: m.forget(ALICE, subject="alice"),
              _facts_and_episodes),
    WritePath("forget:record_ids", lambda m, c: m.forget(
        ALICE, record_ids=[c["a"], c["e1"]]), _facts_and_episodes),
    WritePath("forget:scope", lambda m, c: m.forget(ALICE), _facts_and_episodes),
    WritePath("sweep", lambda m, c: m.sweep(), _expiring, partial=_sweep_partial),
    WritePath("reindex", lambda m, c: m.reindex(), _facts_and_episodes,
              partial=_reindex_partial),
    WritePath("extract", lambda m, c: m.extract(ALICE, EXTRACT_SESSION, ExplicitProposer(),
                                                task="weekly-report"),
              _extract_setup, reported=_extract_reported),
]


# -- comparing outcomes -------------------------------------------------------------------
def summary(result: Any) -> str:
    """What a result says, ULIDs aside (compared with the fault-free run's)."""
    if isinstance(result, BaseException):
        return type(result).__name__
    if isinstance(result, ForgetReport):
        return f"forgot {sorted(result.counts.items())}"
    if isinstance(result, ExtractionReport):
        return repr(sorted((i.status, i.claim or "") for i in result.items))
    if hasattr(result, "model_dump"):
        data = result.model_dump(exclude={"reason", "similar", "notes"})
        text = repr(data)
    else:
        text = repr(result)
    return _ULID.sub("<id>", text)


def named_ids(result: Any) -> set[str]:
    """The record ids a result names (each must be stored)."""
    if isinstance(result, ForgetReport | ExtractionReport | BaseException):
        return set()
    text = repr(result.model_dump()) if hasattr(result, "model_dump") else repr(result)
    return set(_ULID.findall(text))


@dataclass
class Tally:
    paths: int = 0
    calls: int = 0
    injected: int = 0
    rolled_back: int = 0
    completed: int = 0
    #: Raised after part of a multi-transaction change, saying exactly what was done.
    reported_partial: int = 0
    rollbacks_failed: int = 0
    failures: list[str] = field(default_factory=list)
    #: Paths that completed (and reported it) despite a fault, with how often.
    completed_paths: dict[str, int] = field(default_factory=dict)


def positions(calls: int, size: str, *, rollback_fails: bool) -> list[int]:
    """The calls to fail: all of them at full size; at ci size every call of a short path,
    else both ends and a stride between (the rollback variant samples more sparsely)."""
    every = list(range(1, calls + 1))
    edge, limit = (2, 5) if rollback_fails else (4, 12)
    if size == "full" or calls <= limit:
        return every
    stride = max(2, (calls - 2 * edge) // (limit - 2 * edge))
    middle = list(range(edge + 1, calls - edge + 1, stride))
    return sorted({*every[:edge], *middle, *every[-edge:]})


def run(path: WritePath, mem: Memory, ctx: Ctx) -> Any:
    try:
        return path.op(mem, ctx)
    except MemstrataError as exc:
        if path.expect is not None and isinstance(exc, path.expect):
            return exc
        raise


def build(store: Store, path: WritePath) -> tuple[Memory, Ctx, Saved]:
    """The path's starting state, from nothing; saved, so :func:`again` is cheap."""
    mem = store.fresh()
    ctx: Ctx = {}
    if path.setup is not None:
        path.setup(mem, ctx)
    mem.forget(PROBE, "no-such-text")  # what usable() does, once before the snapshot
    return mem, ctx, store.save()


def again(store: Store, ctx: Ctx, saved: Saved) -> tuple[Memory, Ctx, Snapshot]:
    """The saved starting state, in a new Memory (its run opened again)."""
    mem = store.restore(saved)
    if "run_args" in ctx:
        enter_run(mem, ctx)
    return mem, ctx, store.snapshot()


def usable(store: Store, mem: Memory) -> str | None:
    """After a fault: another connection may write, and the handle reads and writes."""
    if store.backend == "sqlite" and not write_lock_free(str(store.path)):
        return "the write lock is still held after the fault"
    try:
        mem.facts.current(ALICE)
        mem.forget(PROBE, "no-such-text")  # a maintenance transaction with a savepoint
    except Exception as exc:
        return f"the handle is broken after the fault: {type(exc).__name__}: {exc}"
    return None


def exercise(store: Store, faults: Faults, path: WritePath, size: str, tally: Tally, *,
             rollback_fails: bool) -> None:
    """Every chosen N for one path (see the module docstring)."""
    _, ctx, saved = build(store, path)
    mem, ctx, _ = again(store, ctx, saved)
    with faults.armed(mem, 10**9):
        reference = run(path, mem, ctx)
        calls = faults.calls
    expected = normalised(store.snapshot())
    tally.paths += 1
    tally.calls += calls
    fail = tally.failures.append

    mem, ctx, before = again(store, ctx, saved)
    for n in [*positions(calls, size, rollback_fails=rollback_fails), calls + 1]:
        where = f"{store.backend} {path.name} call {n}/{calls}"
        raised: BaseException | None = None
        result: Any = None
        rebuild = False
        with faults.armed(mem, n, rollback_fails=rollback_fails):
            try:
                result = run(path, mem, ctx)
            except Exception as exc:
                raised = exc
        tally.rollbacks_failed += faults.rollbacks_failed
        if faults.fired:
            tally.injected += 1
        elif n <= calls:
            fail(f"{where}: the fault-free run made {calls} calls, this one fewer")
        if isinstance(raised, sqlite3.Error | psycopg.Error) or (
                raised is not None and not isinstance(raised, MemstrataError)):
            fail(f"{where}: raw {type(raised).__name__} escaped: {raised}")
            mem, ctx, before = again(store, ctx, saved)
            continue
        after = store.snapshot()
        done = raised.details.get("done") if isinstance(raised, MemstrataError) else None
        if raised is not None and done is not None and after != before:
            problem = path.partial(raised, before, after) if path.partial else \
                "no check for a partial change"
            if problem:
                fail(f"{where}: raised {type(raised).__name__} saying what was done, but "
                     f"{problem}")
            else:
                tally.reported_partial += 1
            rebuild = True
        elif raised is not None:
            if after != before:
                fail(f"{where}: raised {type(raised).__name__} ({raised}) but the store "
                     f"changed: {difference(before, after)}")
                mem, ctx, before = again(store, ctx, saved)  # go on from the path's state
                continue
            else:
                tally.rolled_back += 1
        else:
            problem = None
            if path.reported is not None and normalised(after) != expected:
                problem = path.reported(result, before, after, reference)
            elif normalised(after) != expected:
                problem = f"returned but the store is not the complete change: " \
                          f"{difference(expected, normalised(after))}"
            elif summary(result) != summary(reference):
                problem = f"reported {summary(result)}, not {summary(reference)}"
            elif missing := named_ids(result) - {m for rows in after.values() for r in rows
                                                 for m in _ULID.findall(r)}:
                problem = f"reports records that are not stored: {sorted(missing)}"
            elif isinstance(result, ForgetReport) and not result.compacted and not result.notes:
                problem = "compaction failed without a note"
            if problem:
                fail(f"{where}: {problem}")
            elif faults.fired:
                tally.completed += 1
                tally.completed_paths[path.name] = tally.completed_paths.get(path.name, 0) + 1
        if faults.fired and (broken := usable(store, mem)):
            fail(f"{where}: {broken}")
        if not faults.fired:
            break  # past the last call: the operation completed (checked above)
        if raised is None or rebuild:
            mem, ctx, before = again(store, ctx, saved)  # changed: start again from there


@pytest.fixture
def fault_store(request: pytest.FixtureRequest, backend: str, store_url: str,
                scratch_url: str | None, minilm: Any) -> Iterator[Store]:
    pg_db = None if backend == "sqlite" else request.getfixturevalue("pg_conformance_db")
    store = Store(backend, store_url, scratch_url, minilm, pg_db)
    yield store
    store.shut()


def _check_all(fault_store: Store, size: str, figures: Any, *, rollback_fails: bool) -> None:
    faults = Faults(fault_store.backend)
    tally = Tally()
    started = time.monotonic()
    only = os.environ.get("MEMSTRATA_FAULT_PATHS")  # a comma-separated subset, to debug
    chosen = [p for p in PATHS if not only or any(o in p.name for o in only.split(","))]
    with faults.installed():
        for path in chosen:
            exercise(fault_store, faults, path, size, tally, rollback_fails=rollback_fails)
    figures.update(backend=fault_store.backend, paths=tally.paths, calls=tally.calls,
                   injected=tally.injected, rolled_back=tally.rolled_back,
                   completed=tally.completed, reported_partial=tally.reported_partial,
                   rollbacks_failed=tally.rollbacks_failed,
                   failures=len(tally.failures), completed_paths=tally.completed_paths,
                   seconds=round(time.monotonic() - started, 1))
    assert not tally.failures, "\n".join(tally.failures[:40])
    assert tally.paths == len(chosen)
    assert tally.injected >= tally.paths  # every path met at least one fault
    assert tally.rolled_back + tally.completed + tally.reported_partial == tally.injected
    if rollback_fails:
        assert tally.rollbacks_failed > 0


def test_every_write_path_rolls_back_or_completes_at_every_fault(
        fault_store: Store, size: str, figures: Any) -> None:
    _check_all(fault_store, size, figures, rollback_fails=False)


def test_a_failing_rollback_reopens_the_handle_and_releases_the_lock(
        fault_store: Store, size: str, figures: Any) -> None:
    _check_all(fault_store, size, figures, rollback_fails=True)


def test_after_a_failed_rollback_another_process_opens_the_file_and_writes(
        db_path: Path, minilm: Any) -> None:
    """The case reported before: a fault, then a failing ROLLBACK, must not leave the
    handle inside a transaction holding the file's write lock (another process's
    ``Memory.open`` then failed with "database is locked"), and no raw sqlite3 error may
    escape."""
    url = f"sqlite:///{db_path}"
    mem = Memory.open(url, clock=ManualClock(START), embedder=minilm)
    ctx: Ctx = {}
    _facts_and_episodes(mem, ctx)
    faults = Faults("sqlite")
    with faults.armed(mem, 6, rollback_fails=True), pytest.raises(MemstrataError) as err:
        mem.forget(ALICE, "standup")
    assert faults.fired and faults.rollbacks_failed >= 1
    assert not isinstance(err.value, sqlite3.Error)
    other = Memory.open(url, clock=ManualClock(START), embedder=None, busy_timeout_ms=500)
    try:
        assert other.forget(ALICE, "standup").counts["facts"] == 2
    finally:
        other.close()
    assert mem.facts.current(ALICE) != []  # the first handle works: it sees the forget
    assert all("standup" not in f.claim for f in mem.facts.current(ALICE))
    mem.close()
