"""The memory evaluation harness: does the right memory reach the agent, and nothing else?

A *fixture* (YAML) describes a store, a moment, one request and what must
come of it::

    name: stale-deploy-instruction
    now: 2026-03-01T09:00:00Z          # the clock at the request
    scope: {project: docs-site}         # default scope of every record and the request
    store:
      facts:       [{id: old_deploy, at: 2026-01-02, claim: ..., kind: ..., subject: ...,
                     attribute: ..., actor: user, source: ..., approve: REVIEWER?,
                     retire: REASON?, supersedes: NAME?, write: STATUS?}]
      episodes:    [{id, at, text, event, actor, source, observed_at, supersedes: NAME, ...}]
      checkpoints: [{id, at, task, objective, next_action, completed, ...}]
      operations:  [{id, at, key, intent, run_id, status, external_ref}]
      procedures:  [{id, at, procedure: {...} | file: PATH, activate_by: PERSON?}]
    request: {kind: recall, need: "how do we deploy?", decision: planning}
    expect:
      include: [new_deploy]             # must be returned (recall of expected items)
      exclude: [old_deploy]             # must not be returned (a leak if it is)
      verify:  [new_deploy]             # must be returned and flagged needs_verification
      before:  [[new_deploy, old_deploy]]   # left ranks above right (right may be absent)
      empty: true                       # nothing relevant is the right answer

An item's or the request's ``scope`` replaces the fixture's default scope
(the tenant carries over unless named). Records are written through the
public API only, in time order (each item's ``at``, default ``now``, sets the
clock before it is written): a supersession is a later ``facts.propose`` in
the same slot, and ``supersedes:`` on a fact asserts that it happened. A
fact the policy sends to review is approved when the item names a reviewer
(``approve:``); an outcome other than the one the fixture expects
(``write:``, default: committed, superseding or pending) is a fixture error,
reported as a failure.

Request kinds: ``recall`` (need, decision, k, budget_tokens, layers,
principal), ``context`` (task, query, budget_tokens, principal),
``ledger_begin`` (key, intent, run_id; expect ``operation: {field: value}``),
``procedure_activate`` (name, version, by; expect ``refused: bool``),
``procedure_rollback`` (name, by), ``procedure_next`` (name, state; expect
``decision: {next_step: STEP}`` etc.). ``restart: true`` closes the store and
opens it again before the request, as a fresh worker would. Fixture names
map to references: ``fact:ID``, ``episode:ID``, ``checkpoint:TASK@N``,
``operation:KEY``, ``procedure:NAME@V``; what a request returns is mapped
back to those names.

Per fixture the harness reports recall of expected items, leaks of
forbidden ones, tokens of context returned, every failed check, and pass or
fail; the totals add them up. Each fixture runs in a fresh SQLite file in a
temporary directory under a :class:`~memstrata.clock.ManualClock`.

The ranker is swappable through ``Memory.ranker`` (``ranker=`` here, a
:data:`memstrata.retrieval.ranking.Ranker` — ``ranker(sources, request)`` like
:func:`memstrata.retrieval.ranking.hybrid` — or a name: ``default``, ``similarity`` (the
:func:`similarity_only` baseline) or ``module:function``), so a weaker ranking can be shown
to fail fixtures.
"""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ..clock import ManualClock
from ..errors import ActivationRefused, MemstrataError, ValidationError
from ..models import Hit, Scope, make_scope
from ..retrieval.ranking import Ranker, RankRequest, RankSources
from ..scoping import principal_of
from ..store.lexical import terms
from .fixtures import (
    SECTIONS,
    CheckpointItem,
    EpisodeItem,
    EvalReport,
    Expect,
    FactItem,
    Fixture,
    FixtureResult,
    OperationItem,
    ProcedureItem,
    Request,
    load_fixtures,
)


# -- rankers --------------------------------------------------------------
def similarity_only(src: RankSources, req: RankRequest) -> tuple[list[Hit], int]:
    """Baseline ranker: similarity alone, blind to status, authority and freshness.

    Similarity is the cosine of the query and record vectors when the store has
    an embedder (what a plain vector store ranks by), else BM25. It keeps the
    scope/readers/expiry filters, so what it changes is the ranking and the
    decision's freshness window; every hit is labelled current, as in a memory
    with no notion of supersession or re-check dates.
    """
    from ..layers.episode_records import episode_hit
    from ..retrieval.ranking import fact_hit

    limit = max(req.k * 5, 25)
    vectors = src.index.vectors
    qvec = src.index.embed_query(req.query) if vectors is not None else None
    scored: list[tuple[str, str, float]] = []
    with src.db.transaction(req.scope.tenant, write=False) as tx:
        if "facts" in req.layers:
            where, params = src.facts.filter_sql(req.scope, req.principal,
                                                 statuses=("active", "superseded"))
            found = (vectors.fact_scores(tx, where, params, qvec, limit)
                     if vectors is not None and qvec is not None
                     else src.db.text_search(tx, "facts", req.query, where, params, limit))
            scored += [("facts", i, s) for i, s in found]
        if "episodes" in req.layers:
            if vectors is not None and qvec is not None:
                found = vectors.search(tx, req.scope, principal_of(req.scope, req.principal),
                                       qvec, limit, now=req.now, since=req.since,
                                       until=req.until)
            else:
                where, params = src.episodes.filter_sql(req.scope, req.principal,
                                                        since=req.since, until=req.until)
                found = src.db.text_search(tx, "episodes", req.query, where, params, limit)
            scored += [("episodes", i, s) for i, s in found]
        facts = src.facts.read_many(tx, req.scope.tenant, [i for t, i, _ in scored
                                                           if t == "facts"])
        episodes = src.episodes.read_many(tx, req.scope.tenant, [i for t, i, _ in scored
                                                                 if t == "episodes"])
    # cosine is already on 0..1; BM25 is normalised by the best score
    top = 1.0 if qvec is not None else (max((s for _, _, s in scored), default=1.0) or 1.0)
    q_terms = terms(req.query, evidence=True)
    hits: list[Hit] = []
    for layer, rid, s in scored:
        if layer == "facts" and rid in facts:
            hit = fact_hit(facts[rid], 0.0, req.now)
        elif layer == "episodes" and rid in episodes:
            hit = episode_hit(episodes[rid], 0.0, False, q_terms)
        else:
            continue
        hit.score, hit.status = s / top, "current"
        hits.append(hit)
    hits.sort(key=lambda h: -h.score)
    return hits, len(scored)


RANKERS: dict[str, Ranker | None] = {"default": None, "similarity": similarity_only}


def resolve_ranker(spec: str | Ranker | None) -> tuple[str, Ranker | None]:
    """(label, callable) for a ranker name, ``module:function`` or callable."""
    if spec is None:
        return "default", None
    if not isinstance(spec, str):
        return getattr(spec, "__name__", "custom"), spec
    if spec in RANKERS:
        return spec, RANKERS[spec]
    module, _, func = spec.partition(":")
    if not func:
        raise ValidationError(f"unknown ranker {spec!r}",
                              hint="default, similarity, or module:function")
    try:
        fn = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as exc:
        raise ValidationError(f"cannot load ranker {spec!r}: {exc}") from exc
    return spec, fn


# -- running --------------------------------------------------------------
class _Run:
    """One fixture in its own store: loads the records, runs the request, checks."""

    def __init__(self, fx: Fixture, workdir: Path, embedder: Any, ranker: Ranker | None):
        self.fx, self.embedder, self.ranker = fx, embedder, ranker
        self.url = f"sqlite:///{workdir / 'memory.db'}"
        self.clock = ManualClock(fx.now)
        self.refs: dict[str, str] = {}      # fixture name -> reference
        self.failures: list[str] = []
        self.notes: list[str] = []
        self.mem = self._open()

    def _open(self) -> Any:
        from ..memory import Memory

        mem = Memory.open(self.url, clock=self.clock, embedder=self.embedder)
        mem.ranker = self.ranker
        return mem

    def scope_of(self, item_scope: Scope | None) -> Scope:
        if item_scope is None:
            return self.fx.scope
        return make_scope({**item_scope.model_dump(exclude_unset=True),
                           "tenant": item_scope.tenant if "tenant" in
                           item_scope.model_fields_set else self.fx.scope.tenant})

    # -- loading the store --
    def load(self) -> None:
        items: list[tuple[datetime, str, Any]] = [
            (i.at or self.fx.now, section, i) for section in SECTIONS
            for i in getattr(self.fx.store, section)]
        items.sort(key=lambda t: t[0])  # stable: file order within the same moment
        for at, section, item in items:
            self.clock.set(at)
            getattr(self, f"_load_{section}")(item)
        self.clock.set(self.fx.now)

    def _load_facts(self, it: FactItem) -> None:
        sc = self.scope_of(it.scope)
        res = self.mem.facts.propose(
            sc, claim=it.claim, kind=it.kind, subject=it.subject, attribute=it.attribute,
            actor=it.actor, source=it.source, confidence=it.confidence, tier=it.tier,
            sensitivity=it.sensitivity, evidence=it.evidence, valid_from=it.valid_from,
            expires_at=it.expires_at, recheck_after=it.recheck_after, readers=it.readers,
            reason=it.reason)
        allowed = [it.write] if it.write else ["committed", "superseding", "pending"]
        if res.status not in allowed:
            raise _SetupError(f"fact {it.id}: write was {res.status} ({res.reason}), "
                              f"expected {' or '.join(allowed)}")
        if res.record is None:
            return
        self.refs[it.id] = res.record.ref
        superseded = res.superseded
        if it.approve:
            if res.status != "pending":
                raise _SetupError(f"fact {it.id}: approve given but the write was {res.status}")
            res = self.mem.review.approve(res.record.id, reviewer=it.approve, tenant=sc.tenant)
            superseded = res.superseded
        if it.supersedes:
            want = self.refs.get(it.supersedes)
            if superseded is None or superseded.ref != want:
                raise _SetupError(f"fact {it.id} was to supersede {it.supersedes} but "
                                  f"superseded {superseded.ref if superseded else 'nothing'}")
        if it.retire:
            self.mem.facts.retire(res.record.id if res.record else "", reason=it.retire,
                                  tenant=sc.tenant)

    def _load_episodes(self, it: EpisodeItem) -> None:
        sup = None
        if it.supersedes:
            if it.supersedes not in self.refs:
                raise _SetupError(f"episode {it.id} supersedes unknown {it.supersedes}")
            sup = self.refs[it.supersedes]
        ep = self.mem.episodes.append(
            self.scope_of(it.scope), text=it.text, event=it.event, actor=it.actor,
            source=it.source, observed_at=it.observed_at, evidence=it.evidence,
            outcome=it.outcome, confidence=it.confidence, expires_at=it.expires_at,
            supersedes=sup, readers=it.readers)
        self.refs[it.id] = ep.ref

    def _load_checkpoints(self, it: CheckpointItem) -> None:
        fields = it.model_dump(exclude={"id", "at", "scope", "task"}, exclude_none=True)
        cp = self.mem.checkpoints.save(self.scope_of(it.scope), it.task, updated_by="fixture",
                                       **fields)
        self.refs[it.id] = cp.ref

    def _load_operations(self, it: OperationItem) -> None:
        sc = self.scope_of(it.scope)
        self.mem.ledger.begin(sc, it.key, intent=it.intent, run_id=it.run_id)
        if it.status == "succeeded":
            self.mem.ledger.complete(sc, it.key, external_ref=it.external_ref)
        elif it.status == "failed":
            self.mem.ledger.fail(sc, it.key, error=it.error or "failed")
        self.refs[it.id] = f"operation:{it.key}"

    def _load_procedures(self, it: ProcedureItem) -> None:
        from ..layers.procedure_model import load_procedure

        sc = self.scope_of(it.scope)
        if it.file is not None:
            base = Path(self.fx.path).parent if self.fx.path else Path.cwd()
            proc = load_procedure(base / it.file)
        else:
            proc = load_procedure(it.procedure or {})
        stored = self.mem.procedures.propose(proc, scope=sc, proposed_by=it.proposed_by)
        self.refs[it.id] = stored.ref
        if it.activate_by:
            self.mem.procedures.activate(stored.name, stored.version or 0,
                                         activated_by=it.activate_by, scope=sc)

    # -- the request --
    def request(self) -> tuple[list[str], int, dict[str, str]]:
        """(returned refs in order, tokens, flags per returned ref)."""
        rq = self.fx.request
        if rq.restart:
            self.mem.close()
            self.mem = self._open()
        sc = self.scope_of(rq.scope)
        method: Callable[[Request, Scope], tuple[list[str], int, dict[str, str]]] = getattr(
            self, f"_rq_{rq.kind}")
        return method(rq, sc)

    def _rq_recall(self, rq: Request, sc: Scope) -> tuple[list[str], int, dict[str, str]]:
        res = self.mem.recall(sc, rq.need or "", decision=rq.decision, k=rq.k,
                              budget_tokens=rq.budget_tokens or 800, layers=rq.layers,
                              principal=rq.principal)
        flags = {h.ref: h.verify_reason or "flagged" for h in res.items if h.needs_verification}
        return [h.ref for h in res.items], res.tokens, flags

    def _rq_context(self, rq: Request, sc: Scope) -> tuple[list[str], int, dict[str, str]]:
        ctx = self.mem.context(sc, task=rq.task, query=rq.query,
                               budget_tokens=rq.budget_tokens or 2000, principal=rq.principal)
        refs = [m.ref for m in ctx.manifest if m.included]
        flags: dict[str, str] = {}
        for line in ctx.text.splitlines():
            for ref in refs:
                if f"[{ref}]" in line and any(w in line for w in ("verify", "stale", "re-check",
                                                                  "UNTRUSTED", "superseded")):
                    flags[ref] = line
        return refs, ctx.tokens, flags

    def _rq_ledger_begin(self, rq: Request, sc: Scope) -> tuple[list[str], int, dict[str, str]]:
        op = self.mem.ledger.begin(sc, rq.key or "", intent=rq.intent or "", run_id=rq.run_id)
        want = self.fx.expect.operation or {}
        got = op.model_dump(mode="json")
        for field, value in want.items():
            if got.get(field) != value:
                self.failures.append(f"operation.{field} is {got.get(field)!r}, "
                                     f"expected {value!r}")
        return [f"operation:{op.key}"], 0, {}

    def _active_ref(self, name: str, sc: Scope) -> list[str]:
        active = self.mem.procedures.active(name, scope=sc)
        return [active.ref] if active else []

    def _rq_procedure_activate(self, rq: Request,
                               sc: Scope) -> tuple[list[str], int, dict[str, str]]:
        refused = False
        try:
            self.mem.procedures.activate(rq.name or "", rq.version or 0,
                                         activated_by=rq.by or "", scope=sc)
        except ActivationRefused as exc:
            refused = True
            report = exc.details.get("report")
            n = len(report.failures) if report is not None else "?"
            self.notes.append(f"refused: {n} failing case(s)")
        if self.fx.expect.refused is not None and refused != self.fx.expect.refused:
            self.failures.append(f"activation {'was' if refused else 'was not'} refused")
        return self._active_ref(rq.name or "", sc), 0, {}

    def _rq_procedure_rollback(self, rq: Request,
                               sc: Scope) -> tuple[list[str], int, dict[str, str]]:
        self.mem.procedures.rollback(rq.name or "", by=rq.by or "", scope=sc)
        return self._active_ref(rq.name or "", sc), 0, {}

    def _rq_procedure_next(self, rq: Request, sc: Scope) -> tuple[list[str], int, dict[str, str]]:
        decision = self.mem.procedures.next_step(rq.name or "", rq.state or {}, scope=sc)
        want = self.fx.expect.decision
        if want is not None and decision.as_expect() != want:
            self.failures.append(f"decision is {decision.as_expect()}, expected {want}")
        return self._active_ref(rq.name or "", sc), 0, {}


class _SetupError(Exception):
    """A fixture's records could not be loaded as the fixture says."""


def run_fixture(fx: Fixture, *, embedder: Any = None,
                ranker: Ranker | None = None) -> FixtureResult:
    """Run one fixture in a fresh store and check its expectations."""
    with tempfile.TemporaryDirectory(prefix="memstrata-eval-") as tmp:
        run = _Run(fx, Path(tmp), embedder, ranker)
        returned: list[str] = []
        tokens = 0
        flags: dict[str, str] = {}
        try:
            run.load()
            returned, tokens, flags = run.request()
        except (_SetupError, MemstrataError) as exc:
            run.failures.append(f"error: {exc}")
        finally:
            run.mem.close()
    names = {ref: name for name, ref in run.refs.items()}
    got = [names.get(r, r) for r in returned]
    e = fx.expect
    failures = run.failures
    missing = [n for n in e.include if n not in got]
    if missing:
        failures.append(f"missing {', '.join(missing)}")
    leaks = [n for n in e.exclude if n in got]
    if leaks:
        failures.append(f"leaked {', '.join(leaks)}")
    flagged = {names.get(r, r) for r in flags}
    for n in e.verify:
        if n not in got:
            if n not in missing:
                failures.append(f"{n} must be returned and flagged for verification")
        elif n not in flagged:
            failures.append(f"{n} not flagged for verification")
    for a, b in e.before:
        if a in got and b in got and got.index(a) > got.index(b):
            failures.append(f"{b} ranks above {a}")
        elif a not in got and a not in missing:
            failures.append(f"{a} must rank above {b} but was not returned")
    if e.empty is True and got:
        failures.append(f"expected nothing, got {', '.join(got)}")
    if e.empty is False and not got:
        failures.append("expected a result, got nothing")
    if e.max_tokens is not None and tokens > e.max_tokens:
        failures.append(f"{tokens} tokens > max {e.max_tokens}")
    found = len(e.include) - len(missing)
    return FixtureResult(
        name=fx.name, description=fx.description, kind=fx.request.kind, passed=not failures,
        expected=len(e.include), found=found,
        recall=round(found / len(e.include), 4) if e.include else None, leaks=leaks,
        tokens=tokens, returned=got, failures=failures + run.notes if failures else [])


def run_eval(fixtures: str | Path | Sequence[Fixture], *, embedder: Any = None,
             ranker: str | Ranker | None = None) -> EvalReport:
    """Run every fixture (a path or loaded fixtures); returns the report.

    ``embedder``: None (lexical only, fast), an embedder spec string
    (``"minilm"``, ``"hash"``) or an Embedder instance; a spec is resolved once
    and shared by every fixture so a model loads once.
    """
    fxs = load_fixtures(fixtures) if isinstance(fixtures, str | Path) else list(fixtures)
    label, rank = resolve_ranker(ranker)
    emb_label = embedder if isinstance(embedder, str) or embedder is None else repr(embedder)
    if isinstance(embedder, str):
        if embedder in ("none", ""):
            embedder = None
        else:
            from ..providers.embeddings import get_embedder

            embedder = get_embedder(embedder)
    results = [run_fixture(fx, embedder=embedder, ranker=rank) for fx in fxs]
    return EvalReport(results=results, ranker=label, embedder=emb_label)


__all__ = [
    "RANKERS",
    "EvalReport",
    "Expect",
    "Fixture",
    "FixtureResult",
    "Request",
    "load_fixtures",
    "resolve_ranker",
    "run_eval",
    "run_fixture",
    "similarity_only",
]
