"""The public facade: :class:`Memory` composes the wings over one backend.

``Memory.open()`` opens the embedded default (``$MEMSTRATA_HOME/memory.db``);
``Memory.open("sqlite:///path")`` or ``Memory.open("postgresql://...")`` picks another.
The facade holds no state of its own beyond the open connections: every layer reads and
writes through the backend, so any number of processes can share one store. It builds the
layers (:mod:`memstrata.layers`), the retrieval gate and context assembly
(:mod:`memstrata.retrieval`) and extraction (:mod:`memstrata.extraction`), handing each the
parts it uses; nothing below this module imports it. ``mem.run(scope, task=...)`` opens a
run whose scratchpad is discarded when it ends.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .calls import checked_calls
from .clock import Clock, SystemClock
from .config import Config
from .errors import ArgumentError, BackendError, MemstrataError, NotFound, ValidationError
from .governance.policy import PolicyConfig, WritePolicy
from .ids import new_id
from .inputs import options_arg, ref_arg, tenant_arg
from .layers.checkpoints import Checkpoints, task_arg
from .layers.episode_records import run_thread
from .layers.episodes import Episodes
from .layers.facts import RETIRE_AFTER_CONTRADICTIONS, Facts
from .layers.feedback import SIGNALS as FEEDBACK_SIGNALS
from .layers.feedback import Feedback
from .layers.forget import ForgetTargets
from .layers.forget import forget as _forget
from .layers.indexing import RecordIndex
from .layers.indexing import reindex as _reindex
from .layers.ledger import Ledger
from .layers.procedures import Procedures
from .layers.retention import sweep as _sweep
from .layers.review import Review
from .layers.runs import Runs, run_id_arg
from .layers.scratch import DEFAULT_TTL, Scratch, SQLScratchStore
from .models import (
    Checkpoint,
    Context,
    Episode,
    Fact,
    ForgetReport,
    Hit,
    Operation,
    Scope,
    make_scope,
)
from .notices import say_once
from .retrieval.context import assemble
from .retrieval.ranking import Ranker, RankSources, hybrid
from .retrieval.recall import Gate, Recall
from .store.base import Database, ScratchStore
from .store.doctor import verify
from .store.engines import open_database

if TYPE_CHECKING:
    from collections.abc import Callable

    from .extraction.proposers import Proposer
    from .extraction.run import ExtractionReport
    from .providers.embeddings import Embedder

#: ``episodes.search`` asks the gate with this budget, so ``k`` alone bounds its answer.
HISTORY_BUDGET = 1_000_000


def _parts(clock: Any, policy: Any, tenant: Any) -> tuple[WritePolicy | None, str]:
    """The checked ``clock``, ``policy`` (a PolicyConfig made a WritePolicy) and ``tenant``
    (None: ``"default"``) of :class:`Memory`: a typed error for anything else."""
    if isinstance(policy, PolicyConfig):
        policy = WritePolicy(policy)
    if policy is not None and not isinstance(policy, WritePolicy):
        raise ArgumentError(f"policy must be a WritePolicy or a PolicyConfig, got "
                            f"{type(policy).__name__}",
                            hint="e.g. policy=PolicyConfig(min_confidence=0.8)")
    if clock is not None and not callable(getattr(clock, "now", None)):
        raise ArgumentError(f"clock must have now() (a Clock), got {type(clock).__name__}",
                            hint="e.g. clock=ManualClock('2026-01-01T00:00:00+00:00')")
    return policy, tenant_arg("default" if tenant is None else tenant)


@checked_calls
class Memory:
    """Layered memory for one agent deployment."""

    def __init__(self, db: Database, *, clock: Clock | None = None,
                 policy: WritePolicy | PolicyConfig | None = None,
                 embedder: Embedder | None = None, scratch_store: ScratchStore | None = None,
                 tenant: str = "default") -> None:
        policy, tenant = _parts(clock, policy, tenant)
        self.db = db
        self.clock: Clock = clock or SystemClock()
        self.policy: WritePolicy = policy or WritePolicy()
        self.default_tenant = tenant
        self.index = RecordIndex(db, embedder)
        self.facts = Facts(db, self.clock, self.policy, self.index, default_tenant=tenant)
        self.review = Review(db, self.facts, self.index, self.clock)
        self.episodes = Episodes(db, self.clock, self.policy, self.index, default_tenant=tenant)
        self.checkpoints = Checkpoints(db, self.clock, index=self.index,
                                       on_close=self._log_close)
        self.ledger = Ledger(db, self.clock)
        self.runs = Runs(db, self.clock)
        self.procedures = Procedures(db, self.clock, default_tenant=tenant)
        self._feedback = Feedback(db, self.clock, self.facts, self.episodes,
                                  default_tenant=tenant)
        self.scratch_store: ScratchStore = scratch_store or SQLScratchStore(db)
        self.gate = Gate(RankSources(db, self.facts, self.episodes, self.index,
                                     checkpoints=self.checkpoints), self.policy,
                         self.clock)
        self.episodes.bind_ranker(self._rank_history)

    def _rank_history(self, scope: Scope, query: str, k: int, since: datetime | None,
                      until: datetime | None, principal: str | None) -> list[Hit]:
        """``episodes.search``: the gate over the log alone; ``k`` bounds the answer."""
        return self.gate.recall(scope, query, layers=["episodes"], k=k,
                                budget_tokens=HISTORY_BUDGET, principal=principal,
                                since=since, until=until).items

    @classmethod
    def open(cls, url: str | os.PathLike[str] | None = None, *, clock: Clock | None = None,
             policy: WritePolicy | PolicyConfig | None = None, embedder: Any = "default",
             scratch_url: str | None = None, tenant: str = "default",
             **db_options: Any) -> Memory:
        """Open a store by URL (default: ``$MEMSTRATA_URL`` or the embedded SQLite file).

        ``embedder``: ``"default"`` uses the configured embedder (``$MEMSTRATA_EMBEDDER``,
        else the offline MiniLM model when installed), ``None`` disables vectors,
        or pass an Embedder instance or spec string (``"minilm"``, ``"hash"``, ...).
        ``scratch_url`` (or ``$MEMSTRATA_SCRATCH_URL``): scratch in Redis.
        ``tenant``: the tenant of the calls that take no scope (an operator's by-id
        ``get``, ``forget`` without a scope's user...); a :class:`Scope` names its own
        (``Scope(tenant=..., user=...)``, ``"default"`` when not given).
        """
        _parts(clock, policy, tenant)  # before a store is opened for nothing
        emb = _resolve_embedder(embedder)
        db = open_database(url, **db_options)
        scratch_url = scratch_url or os.environ.get("MEMSTRATA_SCRATCH_URL")
        scratch_store = None
        try:
            if scratch_url:
                from .store.redis_scratch import RedisScratchStore

                scratch_store = RedisScratchStore.from_url(scratch_url)
        except BaseException:
            db.close()
            raise
        return cls(db, clock=clock, policy=policy, embedder=emb, tenant=tenant,
                   scratch_store=scratch_store)

    @classmethod
    def from_config(cls, config: Config, **overrides: Any) -> Memory:
        """Open the store a :class:`~memstrata.config.Config` names (``memstrata`` CLI and
        servers); ``overrides`` go to :meth:`open`."""
        options: dict[str, Any] = {
            "embedder": None if config.embedder == "none" else config.embedder,
            "scratch_url": config.scratch_url,
            "tenant": config.values.get("tenant") or "default",
        }
        if config.policy_values:
            options["policy"] = config.policy()
        if "embedder" not in overrides and options["embedder"] is None and \
                config.sources.get("embedder") == "default":
            # nobody chose lexical-only: the default fell back to it (MiniLM's extra is
            # missing), which the CLI and servers say once, as Memory.open() does
            from .providers.embeddings import missing_minilm_packages

            missing = missing_minilm_packages()
            if missing:
                _lexical_notice(missing)
        options.update(overrides)
        return cls.open(config.url, **options)

    def _log_close(self, cp: Checkpoint) -> None:
        """A task closed with an outcome: the outcome is an episode of its own."""
        self.episodes.append(cp.scope, text=f"Task {cp.task} closed: {cp.outcome}",
                             event="task_closed", actor="system", source=cp.ref,
                             outcome=cp.outcome, observed_at=cp.closed_at)

    # -- plumbing ---------------------------------------------------------
    @property
    def embedder(self) -> Embedder | None:
        """The embedder records are indexed with (None: lexical search only)."""
        return self.index.embedder

    @property
    def ranker(self) -> Ranker:
        """The ranking function of the gate (the seam the evaluation harness uses)."""
        return self.gate.ranker

    @ranker.setter
    def ranker(self, value: Ranker | None) -> None:
        self.gate.ranker = value or hybrid

    def close(self) -> None:
        """Bring the vector files up to date (the next process opens them instead of
        loading), then close the database and the scratch store."""
        if self.index.made_vectors is not None:
            with contextlib.suppress(MemstrataError):  # a cache: the next open rebuilds it
                self.index.made_vectors.sync()
        self.db.close()
        self.scratch_store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Memory({self.db.url!r})"

    # -- runs -------------------------------------------------------------
    def run(self, scope: Scope | dict[str, Any], *, task: str | None = None,
            run_id: str | None = None, ttl: timedelta | float = DEFAULT_TTL) -> Run:
        """Open a run: a scratchpad, the task's checkpoint and the ledger, bound to scope."""
        return Run(self, make_scope(scope), task=task, run_id=run_id, ttl=ttl)

    # -- reads across layers ----------------------------------------------
    def get(self, ref: str, *, scope: Scope | dict[str, Any] | None = None,
            principal: str | None = None) -> Fact | Episode | Checkpoint:
        """Open a reference returned by recall/search (``fact:ID``, ``episode:ID``,
        ``checkpoint:TASK@N``). With ``scope``, the record must apply to it and be
        readable by the principal, else NotFound (no existence leak)."""
        layer, ident = ref_arg(ref)
        if layer == "fact":
            return self.facts.get(ident, scope, principal=principal)
        if layer == "episode":
            return self.episodes.get(ident, scope, principal=principal)
        task, _, version = ident.rpartition("@")  # a checkpoint: ref_arg knows no other
        if scope is None:
            raise ValidationError("opening a checkpoint reference needs a scope",
                                  hint="pass scope=Scope(user=..., project=...)")
        found = [c for c in self.checkpoints.versions(scope, task) if c.version == int(version)]
        if not found:
            raise NotFound(f"no checkpoint {ref}",
                           hint=f"mem.checkpoints.versions(scope, {task!r}) (CLI: memstrata "
                                f"checkpoint show {task} --all-versions) lists them")
        return found[0]

    def recall(self, scope: Scope | dict[str, Any], query: str | None = None, *,
               decision: str = "lookup", layers: Sequence[str] | None = None, k: int = 5,
               budget_tokens: int = 800, principal: str | None = None,
               since: datetime | str | None = None, until: datetime | str | None = None,
               need: str | None = None) -> Recall:
        """The retrieval gate (DESIGN §6). ``query`` says what is needed (``need=`` is the
        older spelling)."""
        return self.gate.recall(scope, _query(query, need), decision=decision, layers=layers,
                                k=k, budget_tokens=budget_tokens, principal=principal,
                                since=since, until=until)

    def context(self, scope: Scope | dict[str, Any], task: str | None = None,
                query: str | None = None, budget_tokens: int = 2000, *,
                principal: str | None = None, facts_limit: int | None = None,
                facts_cap: int | None = None) -> Context:
        """What a session starts with, within a token budget, with a manifest.
        ``facts_limit`` caps the standard facts (``facts_cap=`` is the older spelling)."""
        if facts_limit is not None and facts_cap is not None and facts_limit != facts_cap:
            raise ValidationError("facts_limit= and facts_cap= differ", hint="pass one")
        limit = facts_limit if facts_limit is not None else facts_cap
        return assemble(self.facts, self.checkpoints, self.gate, self.clock, scope, task=task,
                        query=query, budget_tokens=budget_tokens, principal=principal,
                        facts_limit=40 if limit is None else limit)

    def feedback(self, ref: str, signal: str, *, scope: Scope | dict[str, Any] | None = None,
                 principal: str | None = None, note: str | None = None,
                 tenant: str | None = None) -> dict[str, Any]:
        """Record how a recalled item served; repeated contradiction retires a fact. With
        ``scope``, the record must apply to it (NotFound otherwise)."""
        return self._feedback.record(ref, signal, scope=scope, principal=principal, note=note,
                                     tenant=tenant)

    # -- writes across layers ---------------------------------------------
    def extract(self, scope: Scope | dict[str, Any], transcript: Any,
                proposer: Proposer | None = None, **options: Any) -> ExtractionReport:
        """End-of-session extraction through the write policy (DESIGN §5)."""
        from .extraction.run import ExtractionTargets, extract

        options_arg(options, list(inspect.signature(extract).parameters)[4:], "extract")
        if proposer is not None and not callable(getattr(proposer, "propose", None)):
            raise ValidationError(f"proposer must be a Proposer, got {type(proposer).__name__}",
                                  hint="e.g. ExplicitProposer() or LLMProposer(client)")
        targets = ExtractionTargets(
            facts=self.facts, checkpoints=self.checkpoints, policy=self.policy,
            clock=self.clock, forget_ids=lambda sc, ids: self.forget(sc, record_ids=ids))
        return extract(targets, make_scope(scope), transcript, proposer, **options)

    def forget(self, scope: Scope | dict[str, Any], match: str | None = None, *,
               subject: str | None = None, record_ids: Sequence[str] | None = None,
               force: bool = False, dry_run: bool = False,
               principal: str | None = None, as_reader: bool = False,
               actor: str | None = None) -> ForgetReport:
        """Delete for real, everywhere the content lives; returns counts per layer.
        ``principal``: forget only the restricted facts and episodes it may read (None:
        every record the scope owns). ``as_reader`` (an agent's forget): only what the
        caller may read, the records of exactly its scope. ``actor``: who forgets (a
        program, such as ``agent``, forgets no identity fact: see
        :func:`memstrata.layers.forget.forget`)."""
        targets = ForgetTargets(self.facts, self.episodes, self.checkpoints, self.ledger,
                                self.procedures, self.runs, self._feedback, self.scratch_store,
                                self.index.vectors)
        return _forget(self.db, targets, scope, match=match, subject=subject,
                       record_ids=record_ids, force=force, dry_run=dry_run,
                       principal=principal, as_reader=as_reader, actor=actor)

    def sweep(self) -> dict[str, int]:
        """Retention: expire scratch by TTL, facts and episodes by ``expires_at``."""
        return _sweep(self.db, self.clock, self.facts, self.episodes, self.scratch_store,
                      self.index.vectors)

    def reindex(self, progress: Callable[[int, int], None] | None = None, *,
                missing: bool = False) -> int:
        """Re-embed every fact, episode and checkpoint version with the current embedder
        (after a model change), and rewrite the lexical entries of the threads that hold a
        restricted or expiring turn (:meth:`Episodes.rebuild_restricted_threads`); returns
        how many records were embedded. With ``missing``, embed only the records that have
        no vector (``doctor`` reports them: written while the store was opened without an
        embedder, or left by a reindex that stopped) and keep the rest. Records other
        processes write or forget meanwhile keep (or get no) vector as they should
        (:func:`memstrata.layers.indexing.reindex`)."""
        total = _reindex(self.index, [self.facts, self.episodes, self.checkpoints],
                         progress=progress, missing=missing)
        rewritten: list[str] = []
        try:
            for tenant in self.db.tenants():
                with self.db.transaction(tenant) as tx:
                    self.episodes.rebuild_restricted_threads(tx, tenant)
                rewritten.append(tenant)
        except MemstrataError as exc:
            raise BackendError(
                f"the reindex re-embedded all {total} records, then stopped rewriting the word "
                f"index of threads with restricted or expiring turns: {exc}",
                hint="run the reindex again (it starts over)",
                done={"embedded": total, "total": total, "rewritten": rewritten}) from exc
        return total

    def doctor(self) -> list[str]:
        """Re-derive the stored invariants; returns what is broken (empty = healthy)."""
        return verify(self.db, self.clock.now())

    def stats(self) -> dict[str, Any]:
        """Row counts, size and migrations of the store."""
        return self.db.stats()


@checked_calls
class Run:
    """One run of an agent: scratch (discarded on exit), checkpoint, ledger."""

    def __init__(self, mem: Memory, scope: Scope, *, task: str | None, run_id: str | None,
                 ttl: timedelta | float) -> None:
        self.mem = mem
        self.scope = scope
        self.task = None if task is None else task_arg(task)
        self.run_id = (new_id() if run_id is None or run_id == "" else
                       run_id_arg(run_id))
        self.scratch = Scratch(mem.scratch_store, mem.clock, scope, self.run_id, ttl,
                               runs=mem.runs)
        self.checkpoint = RunCheckpoint(mem, scope, self.task, self.run_id)
        self.ledger = RunLedger(mem, scope, self.run_id)
        self._open = False

    def __enter__(self) -> Run:
        self.mem.runs.start(self.scope, self.run_id, self.task)
        self._open = True
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def log(self, text: str, *, source: str, actor: str = "agent", **fields: Any) -> Episode:
        """Append an episode of this run: its thread is the run (``run:RUN_ID``) unless
        ``thread=`` names another (see :meth:`memstrata.layers.episodes.Episodes.append`)."""
        options_arg(fields, _LOG_FIELDS, "run.log")
        if fields.get("thread") is None:  # not given, or None: the run
            fields["thread"] = run_thread(self.run_id)
        return self.mem.episodes.append(self.scope, text=text, source=source, actor=actor,
                                        **fields)

    def close(self) -> None:
        """End the run: discard its scratchpad and record the end time, together (scratch in
        the database: one transaction; elsewhere the end is recorded first, so a failure
        leaves the scratchpad as it was). A close that raised may be called again."""
        if not self._open:
            return
        if self.mem.scratch_store.transactional:
            with self.mem.db.transaction(self.scope.tenant):
                self.scratch.discard()
                self.mem.runs.end(self.scope, self.run_id)
        else:
            self.mem.runs.end(self.scope, self.run_id)
            self.scratch.discard()
        self._open = False


@checked_calls
class RunCheckpoint:
    """``run.checkpoint``: the task checkpoint bound to the run's scope and task."""

    def __init__(self, mem: Memory, scope: Scope, task: str | None, run_id: str) -> None:
        self._mem, self._scope, self._task, self._run_id = mem, scope, task, run_id

    def _need_task(self) -> str:
        if self._task is None:
            raise ValidationError("this run has no task", hint="mem.run(scope, task='...')")
        return self._task

    def save(self, **fields: Any) -> Checkpoint:
        """Save the task's checkpoint (see :meth:`Checkpoints.save`); the run names the
        scope, the task and who saved it."""
        fixed = sorted({"scope", "task", "by", "updated_by"} & set(fields))
        if fixed:
            raise ArgumentError(f"run.checkpoint.save() sets {', '.join(fixed)} itself",
                                hint="pass only the checkpoint's fields (objective, plan, "
                                     "next_action, ...) and as_of; the run's scope, task and "
                                     "id are used")
        return self._mem.checkpoints.save(self._scope, self._need_task(),
                                          by=f"run:{self._run_id}", **fields)

    def load(self) -> Checkpoint | None:
        """The task's current checkpoint, or None."""
        return self._mem.checkpoints.current(self._scope, self._need_task())

    current = load


@checked_calls
class RunLedger:
    """``run.ledger``: the ledger bound to the run's scope, stamped with its run id."""

    def __init__(self, mem: Memory, scope: Scope, run_id: str) -> None:
        self._mem, self._scope, self._run_id = mem, scope, run_id

    def begin(self, key: str, *, intent: str) -> Operation:
        return self._mem.ledger.begin(self._scope, key, intent=intent, run_id=self._run_id)

    def complete(self, key: str, *, external_ref: str | None = None) -> Operation:
        return self._mem.ledger.complete(self._scope, key, external_ref=external_ref)

    def fail(self, key: str, *, error: str) -> Operation:
        return self._mem.ledger.fail(self._scope, key, error=error)

    def get(self, key: str) -> Operation | None:
        return self._mem.ledger.get(self._scope, key)


def _query(query: str | None, need: str | None) -> str:
    if query is not None and need is not None and query != need:
        raise ValidationError("query= and need= differ", hint="pass one")
    value = query if query is not None else need
    if value is None:
        raise ValidationError("recall needs a query", hint="describe in a sentence what is needed")
    return value


#: What ``run.log`` passes on to :meth:`Episodes.append` besides text, source and actor.
_LOG_FIELDS = frozenset(inspect.signature(Episodes.append).parameters) - {
    "self", "scope", "text", "source", "actor"}

def _lexical_notice(missing: Sequence[str]) -> None:
    """Say once per process that search is lexical only, and what to install."""
    say_once("lexical",
             "memstrata: no embedder installed (missing %s): every search is lexical only; "
             "pip install 'memstrata[embeddings]' for semantic search, or set "
             "MEMSTRATA_EMBEDDER=none to say you mean it", ", ".join(missing))


def _resolve_embedder(embedder: Any) -> Embedder | None:
    if embedder is None or embedder == "none":
        return None
    if embedder == "default":
        spec = os.environ.get("MEMSTRATA_EMBEDDER") or None
        if spec is None:
            from .providers.embeddings import missing_minilm_packages

            # the offline MiniLM model when its extra is installed; lexical-only otherwise
            missing = missing_minilm_packages()
            if missing:
                _lexical_notice(missing)
                return None
            return _resolve_embedder("minilm")
        if spec == "none":
            return None
        embedder = spec
    if isinstance(embedder, str):
        from .providers.embeddings import get_embedder

        return get_embedder(embedder)
    resolved: Embedder = embedder
    return resolved


__all__ = ["FEEDBACK_SIGNALS", "RETIRE_AFTER_CONTRADICTIONS", "Memory", "Run"]
