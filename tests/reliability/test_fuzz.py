"""A seeded fuzzer over every public method and every tool, on every backend.

The targets are found by introspection, not listed: every public method of
:class:`~memstrata.Memory`, of each layer it exposes (``facts``, ``episodes``,
``checkpoints``, ``ledger``, ``review``, ``procedures``) and of a run (``run``,
``run.scratch``, ``run.checkpoint``, ``run.ledger``); the public functions and the
:class:`~memstrata.ToolDispatcher` of ``memstrata.__all__``; and every tool of the
dispatcher (``memstrata.interfaces.tools.TOOLS``). Left out, with the reason:

- methods that take an open transaction (a ``tx`` parameter): the layers' internals,
  called by the library with rows it validated;
- :data:`NOT_FUZZED`: lifecycle calls (``close``, ``open``) and the helpers that take an
  already validated record or scope (SQL fragments, index texts);
- the pydantic record classes of ``__all__`` (``Scope``, ``Candidate``...), whose
  constructors raise pydantic's own ``ValidationError``: every method takes a scope as a
  dict too, and the fuzzer sends bad dicts, so the conversion to memstrata's error is
  exercised there.

Each call gets one or more odd arguments (wrong types, None, huge text, lone surrogates,
NUL bytes, negative/huge/NaN numbers, nested dicts, "yesterday", naive datetimes,
unknown fields where a method takes ``**fields``) next to good ones, from a seeded RNG.
A call must succeed or raise a :class:`~memstrata.MemstrataError`; a tool must return a
dict, and an error dict names a MemstrataError type. After every failed call the row
counts of every table (and the Redis keys) are unchanged.
"""

from __future__ import annotations

import inspect
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

import memstrata
from backends import StoreProbe
from memstrata import ManualClock, Memory, MemstrataError, Scope, ToolDispatcher
from memstrata.interfaces.tools import TOOLS

S = Scope(user="alice", project="docs-site")
SIZES = {"ci": {"calls": 700, "tool_calls": 250}, "full": {"calls": 16_000, "tool_calls": 5000}}
SEEDS = {"sqlite": 1, "postgres": 2, "postgres+redis": 3}
RESEED_EVERY = 150

#: Public methods that are not fuzzed, and why.
NOT_FUZZED = {
    "close": "ends the store or run under test",
    "open": "opens another store (files, servers)",
    "from_config": "opens another store from a Config",
    "bind_ranker": "wiring of the facade (takes the gate's function)",
    "filter_sql": "an SQL fragment for a validated Scope (the layers' and tests' seam)",
    "caller": "resolves an already validated caller (internal to by-id reads)",
    "line": "the thread line of a stored episode",
    "index_text": "the lexical entry of a stored record",
    "embed_text": "the vector text of a stored record",
    "text_of": "the search text of a stored checkpoint",
    "claim_cosines": "scores for the extraction judges over a validated Scope",
}
#: Public functions of ``memstrata.__all__`` that change process-wide registries.
NOT_CALLED = {"register_embedder", "register_engine"}


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque object>"


BAD: list[Any] = [
    None, "", "   ", "\ud800", "a\ud800b", "a\x00b", "x" * 100_000, "\n\t", -1, 0, 1, 2**64,
    -(2**63), 1e308, -0.5, math.nan, math.inf, True, False, [], [None], ["\ud800"], [1, 2],
    ["x" * 5000] * 3, {}, {"a": {"b": {"c": [1, {"d": None}]}}}, {"user": "\ud800"},
    {"user": 5}, {"tenant": None}, {"nope": 1}, "yesterday", "2026-13-45",
    "next week", b"bytes", (1, 2), {1, 2}, datetime(2026, 1, 1), timedelta(seconds=-5),
    timedelta(days=10**6), _Opaque(), "fact:", "episode:\x00", "checkpoint:@", ":",
    "fact:01ZZZZZZZZZZZZZZZZZZZZZZZZ", "../../etc/passwd", "%s%s%n", "'; DROP TABLE facts;--",
    "*?[]\\", "ünïcødé ☃", "🙂" * 500,
]


class Context:
    """Records the good arguments point at; re-seeded when the fuzzed calls consumed them."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.run = mem.run(S, task="t")
        self.run.__enter__()
        self.seed()

    def seed(self) -> None:
        mem = self.mem
        kw: dict[str, Any] = dict(kind="preference", subject="user", attribute="drink",
                                  actor="user", source="chat")
        first = mem.facts.propose(S, claim="Prefers tea", **kw)
        second = mem.facts.propose(S, claim="Prefers coffee now", **kw)
        pending = mem.facts.propose(S, claim="Is called Al", kind="profile", subject="user",
                                    attribute="name", actor="user", source="chat",
                                    tier="identity")
        ep = mem.episodes.append(S, text="Deployed the docs site", actor="tool", source="ci")
        cp = mem.checkpoints.save(S, "t", objective="ship the docs")
        mem.ledger.begin(S, "k", intent="publish")
        self.run.scratch.write("k", "v")
        self.fact_id = (second.record or first.record).id  # type: ignore[union-attr]
        self.pending_id = pending.record.id if pending.record else self.fact_id
        self.episode_id = ep.id
        self.checkpoint_ref = cp.ref

    def good(self, name: str, default: Any) -> Any:
        """A valid value for a parameter called ``name``."""
        table: dict[str, Any] = {
            "scope": S, "ref": f"fact:{self.fact_id}", "fact_id": self.fact_id,
            "episode_id": self.episode_id, "task": "t", "key": "k", "text": "hello world",
            "claim": "Prefers green tea", "kind": "preference", "subject": "user",
            "attribute": "drink", "actor": "user", "source": "chat", "query": "docs",
            "need": None, "k": 5, "limit": 10, "budget_tokens": 800, "signal": "useful",
            "reason": "no longer true", "by": "rev", "intent": "publish", "error": "boom",
            "external_ref": "ext-1", "match": "zq-never-stored", "record_ids": ["fact:01ZZZZ"],
            "prefix": "", "value": "v", "ttl": 60, "values": [("a", "b")],
            "items": [{"scope": S, "text": "batch item", "actor": "user", "source": "s"}],
            "name": "proc", "version": 1, "v1": 1, "v2": 2, "state": {},
            "proc": {"name": "proc"}, "transcript": [{"role": "user", "content": "hi"}],
            "until": {}, "root": "user", "decision": "lookup", "layers": ["facts"],
            "mem": self.mem, "spec": "hash", "cand": None, "delta": timedelta(seconds=1),
        }
        if name == "until" and default is not inspect.Parameter.empty:
            return default  # recall/search/log's date bound (extend_expiry's has no default)
        if name in table:
            return table[name]
        return None if default is inspect.Parameter.empty else default


def targets(ctx: Context) -> list[tuple[str, Callable[..., Any]]]:
    """(label, bound callable) of every fuzzed public method and function."""
    mem, run = ctx.mem, ctx.run
    owners: dict[str, Any] = {
        "Memory": mem, "facts": mem.facts, "episodes": mem.episodes,
        "checkpoints": mem.checkpoints, "ledger": mem.ledger, "review": mem.review,
        "procedures": mem.procedures, "Run": run, "run.scratch": run.scratch,
        "run.checkpoint": run.checkpoint, "run.ledger": run.ledger,
        "ManualClock": ManualClock("2026-08-03T09:00:00+00:00"),  # not the store's clock
    }
    out = []
    for label, obj in owners.items():
        for name in sorted(dir(type(obj))):
            if name.startswith("_") or name in NOT_FUZZED:
                continue
            attr = inspect.getattr_static(type(obj), name)
            if isinstance(attr, property):
                continue
            fn = getattr(obj, name)
            if not callable(fn) or "tx" in inspect.signature(fn).parameters:
                continue
            out.append((f"{label}.{name}", fn))
    for name in memstrata.__all__:
        value = getattr(memstrata, name)
        if inspect.isfunction(value) and name not in NOT_CALLED:
            out.append((name, value))
    out.append(("ToolDispatcher", ToolDispatcher))
    return out


def _params(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    if fn is ToolDispatcher:
        return list(inspect.signature(ToolDispatcher.__init__).parameters.values())[1:]
    return list(inspect.signature(fn).parameters.values())


def make_call(rng: random.Random, ctx: Context, fn: Callable[..., Any]
              ) -> tuple[list[Any], dict[str, Any], list[str]]:
    """Arguments for one call: good values with one or more odd ones; returns the odd
    parameters' names too (empty: an all-good call)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    params = [p for p in _params(fn) if p.kind is not p.VAR_POSITIONAL]
    fixed = [p for p in params if p.kind is not p.VAR_KEYWORD]
    n_bad = 0 if not params or rng.random() < 0.08 else rng.choice((1, 1, 1, 2, 3))
    bad_names = {p.name for p in rng.sample(params, min(n_bad, len(params)))}
    for p in fixed:
        optional = p.default is not inspect.Parameter.empty
        if p.name in bad_names:
            value = rng.choice(BAD)
        elif optional and rng.random() < 0.5:
            continue  # leave the default
        else:
            value = ctx.good(p.name, p.default)
        if p.kind is p.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[p.name] = value
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            if p.name in bad_names:
                field = rng.choice(("objective", "notes", "plan", "nope", "thread", "event",
                                    "proposer", "\ud800", "user"))
                kwargs[field] = rng.choice(BAD)
            elif fn == ctx.mem.checkpoints.save or fn == ctx.run.checkpoint.save:
                kwargs["objective"] = "ship it"
    return args, kwargs, sorted(bad_names)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


class Snapshot:
    """Row counts per table and, on ``postgres+redis``, the Redis keys with the moment each
    expires on Redis's own (wall) clock: a key Redis expired by itself is no change."""

    def __init__(self, rows: dict[str, int], keys: dict[bytes, float]) -> None:
        self.rows, self.keys = rows, keys

    def diff(self, before: Snapshot) -> dict[str, Any]:
        out: dict[str, Any] = {t: (before.rows.get(t), n) for t, n in self.rows.items()
                               if before.rows.get(t) != n}
        added = set(self.keys) - set(before.keys)
        now = time.monotonic()
        removed = {k for k in set(before.keys) - set(self.keys) if before.keys[k] > now}
        if added or removed:
            out["redis_keys"] = {"added": sorted(added), "removed": sorted(removed)}
        return out


class Counts:
    """Row counts of every table, and the Redis keys of the ``postgres+redis`` variant."""

    def __init__(self, store: StoreProbe, redis_url: str | None) -> None:
        self.store = store
        self.redis = None
        if redis_url is not None:
            import redis

            self.redis = redis.Redis.from_url(redis_url)

    def __call__(self) -> Snapshot:
        keys: dict[bytes, float] = {}
        if self.redis is not None:
            names = list(self.redis.scan_iter(count=1000))
            pipe = self.redis.pipeline()
            for name in names:
                pipe.pttl(name)
            now = time.monotonic()
            for name, ttl in zip(names, pipe.execute(), strict=True):
                if ttl != -2:  # -2: gone already; -1: no expiry
                    keys[name] = math.inf if ttl == -1 else now + ttl / 1000 - 0.25
        return Snapshot(self.store.counts(), keys)

    def close(self) -> None:
        if self.redis is not None:
            self.redis.close()


@pytest.fixture
def counts(store: StoreProbe, scratch_url: str | None) -> Iterator[Counts]:
    c = Counts(store, scratch_url)
    yield c
    c.close()


def test_fuzz_public_methods(mem: Memory, counts: Counts, backend: str, size: str,
                             figures: Any) -> None:
    rng = random.Random(SEEDS[backend])
    ctx = Context(mem)
    calls = targets(ctx)
    tally: Counter[str] = Counter()
    untyped: dict[tuple[str, str], str] = {}
    changed: dict[str, str] = {}
    per_method: Counter[str] = Counter()
    baseline = counts()
    t0 = time.monotonic()
    for n in range(SIZES[size]["calls"]):
        if n and n % RESEED_EVERY == 0:
            ctx.seed()
            baseline = counts()
        label, fn = rng.choice(calls)
        args, kwargs, bad = make_call(rng, ctx, fn)
        per_method[label] += 1
        tally["calls"] += 1
        try:
            fn(*args, **kwargs)
        except MemstrataError as exc:
            tally["typed"] += 1
            tally["typed_with_hint"] += exc.hint is not None
            after = counts()
            diff = after.diff(baseline)
            if diff:
                changed.setdefault(label, f"{type(exc).__name__} changed {diff} "
                                          f"(bad: {bad})")
                baseline = after
        except Exception as exc:  # the finding: an error outside the family
            tally["untyped"] += 1
            where = ", ".join(f"{k}={_short(v)}" for k, v in kwargs.items() if k in bad)
            untyped.setdefault((label, type(exc).__name__),
                               f"{label}({where} {_short(args)}) -> "
                               f"{type(exc).__name__}: {_short(str(exc))}")
            baseline = counts()
        else:
            tally["succeeded"] += 1
            baseline = counts()
    figures.update(backend=backend, calls=tally["calls"], typed=tally["typed"],
                   typed_with_hint=tally["typed_with_hint"], succeeded=tally["succeeded"],
                   untyped=tally["untyped"], counts_changed_by_failed_calls=len(changed),
                   methods=len(per_method), seconds=round(time.monotonic() - t0, 1))
    ctx.run.close()
    assert len(per_method) == len(calls), set(dict(calls)) - set(per_method)
    assert not untyped, "errors outside MemstrataError:\n" + "\n".join(untyped.values())
    assert not changed, "failed calls that changed rows:\n" + "\n".join(
        f"{k}: {v}" for k, v in changed.items())
    assert tally["typed"] > tally["calls"] // 2


ERROR_TYPES = {c.__name__ for c in (MemstrataError, *MemstrataError.__subclasses__())} | {
    c.__name__ for base in MemstrataError.__subclasses__() for c in base.__subclasses__()}
SCOPE_WORDS = ("user", "tenant", "scope", "principal", "readers", "project")


def tool_arguments(rng: random.Random, ctx: Context, tool: Any) -> Any:
    """The arguments of one tool call: the model's fields, good or odd, sometimes an
    unknown or scope-naming field, sometimes not an object at all."""
    roll = rng.random()
    if roll < 0.05:
        return rng.choice(["{", "[1, 2]", "null", "", "  ", '"text"', "{\"a\": \ud800}", 5,
                           [1], "x" * 10_000])
    args: dict[str, Any] = {}
    fields = tool.args.model_fields
    bad = set(rng.sample(sorted(fields), min(len(fields), rng.choice((0, 1, 1, 2)))))
    for name, info in fields.items():
        if name in bad:
            args[name] = rng.choice([*BAD, "", None, "x" * 9000])
        elif info.is_required() or rng.random() < 0.5:
            good = {"ref": f"fact:{ctx.fact_id}", "signal": "useful", "kind": "preference",
                    "status": "active", "decision": "lookup", "layers": ["facts"],
                    "record_ids": ["fact:01ZZZZ"], "match": "zq-never-stored",
                    "dry_run": True}.get(name)
            args[name] = good if good is not None else ctx.good(name, "x")
            if args[name] is None or isinstance(args[name], Scope):
                args[name] = "x"
    if rng.random() < 0.15:
        args[rng.choice((*SCOPE_WORDS, "nope", "\ud800"))] = rng.choice(BAD[:12])
    if rng.random() < 0.2:
        try:
            return json.dumps(args, default=str)
        except (UnicodeEncodeError, ValueError):
            return args
    return args


def test_fuzz_tools(mem: Memory, counts: Counts, backend: str, size: str,
                    figures: Any) -> None:
    rng = random.Random(100 + SEEDS[backend])
    ctx = Context(mem)
    tally: Counter[str] = Counter()
    problems: dict[str, str] = {}
    names = [t.name for t in TOOLS] + ["no_such_tool"]
    seen: Counter[str] = Counter()
    with ToolDispatcher(mem, S, task="t") as tools:
        # the dispatcher starts its run (a ``runs`` row) on the first scratch or ledger
        # call: started here, so a failed first call is not charged with it
        assert "error" not in tools.dispatch("scratch_list", {})
        baseline = counts()
        t0 = time.monotonic()
        for n in range(SIZES[size]["tool_calls"]):
            if n and n % RESEED_EVERY == 0:
                ctx.seed()
                baseline = counts()
            name = rng.choice(names)
            tool = next((t for t in TOOLS if t.name == name), None)
            arguments = tool_arguments(rng, ctx, tool) if tool else {"x": 1}
            seen[name] += 1
            tally["calls"] += 1
            try:
                out = tools.dispatch(name, arguments)
                json.dumps(out, default=str)
            except Exception as exc:  # dispatch must never raise
                tally["untyped"] += 1
                problems.setdefault(f"{name} raised {type(exc).__name__}",
                                    f"{_short(arguments)}: {_short(str(exc))}")
                baseline = counts()
                continue
            if not isinstance(out, dict):
                tally["untyped"] += 1
                problems.setdefault(f"{name} returned {type(out).__name__}", _short(out))
                continue
            if "error" not in out:
                tally["succeeded"] += 1
                baseline = counts()
                continue
            if out.get("type") in ERROR_TYPES and out["error"]:
                tally["typed"] += 1
            else:
                tally["untyped"] += 1
                problems.setdefault(f"{name} error type {out.get('type')!r}", _short(out))
            after = counts()
            if after.diff(baseline):
                problems.setdefault(f"{name} failed and changed rows",
                                    f"{_short(arguments)} -> {_short(out)}")
                baseline = after
    figures.update(backend=backend, calls=tally["calls"], typed=tally["typed"],
                   succeeded=tally["succeeded"], untyped=tally["untyped"],
                   tools=len(seen), seconds=round(time.monotonic() - t0, 1))
    assert set(seen) == set(names)
    assert not problems, "\n".join(f"{k}: {v}" for k, v in problems.items())
    assert tally["untyped"] == 0 and tally["typed"] > tally["calls"] // 4
