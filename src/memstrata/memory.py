"""The public facade: :class:`Memory` ties the layers to one backend.

``Memory.open()`` opens the embedded default (``$MEMSTRATA_HOME/memory.db``);
``Memory.open("sqlite:///path")`` or ``Memory.open("postgresql://...")`` picks
another. The facade holds no state of its own beyond the open connections:
every layer reads and writes through the backend, so any number of
processes can share one store. ``mem.run(scope, task=...)`` opens a run whose
scratchpad is discarded when it ends.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .checkpoints import Checkpoints
from .clock import Clock, SystemClock
from .context import assemble
from .episodes import Episodes
from .errors import NotFound, ValidationError
from .facts import Facts, Review
from .forget import forget as _forget
from .ids import new_id
from .ledger import Ledger
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
from .policy import PolicyConfig, WritePolicy
from .recall import Recall
from .recall import recall as _recall
from .runtime import Indexer, Runtime
from .scoping import SCOPE_COLUMNS, scope_values
from .scratch import DEFAULT_TTL, Scratch, ScratchStore, SQLScratchStore
from .store.base import Database, open_database

if TYPE_CHECKING:
    from .procedures import Procedures

FEEDBACK_SIGNALS = ("useful", "contradicted", "superseded", "ignored")
#: Contradicted this many times, a fact is retired (and flagged for review).
RETIRE_AFTER_CONTRADICTIONS = 3


class Memory:
    """Layered memory for one agent deployment."""

    def __init__(self, db: Database, *, clock: Clock | None = None,
                 policy: WritePolicy | PolicyConfig | None = None, embedder: Any = None,
                 scratch_store: ScratchStore | None = None, tenant: str = "default") -> None:
        if isinstance(policy, PolicyConfig):
            policy = WritePolicy(policy)
        self.db = db
        vectors = None
        if embedder is not None:
            from .vectors import make_vector_index

            vectors = make_vector_index(db, embedder)
        self.rt = Runtime(db=db, clock=clock or SystemClock(), policy=policy or WritePolicy(),
                          indexer=Indexer(db, vectors), default_tenant=tenant)
        self.facts = Facts(self.rt)
        self.review = Review(self.rt, self.facts)
        self.episodes = Episodes(self.rt)
        self.checkpoints = Checkpoints(self.rt)
        self.ledger = Ledger(self.rt)
        self.scratch_store: ScratchStore = scratch_store or SQLScratchStore(self.rt)
        self._procedures: Procedures | None = None
        #: Replaces :func:`memstrata.ranking.rank_candidates` (same signature) in ``recall``
        #: when set; the seam the evaluation harness uses to compare rankers.
        self.ranker: Callable[..., tuple[list[Hit], int]] | None = None

    @classmethod
    def open(cls, url: str | os.PathLike[str] | None = None, *, clock: Clock | None = None,
             policy: WritePolicy | PolicyConfig | None = None, embedder: Any = "default",
             scratch_url: str | None = None, tenant: str = "default",
             **db_options: Any) -> Memory:
        """Open a store by URL (default: ``$MEMSTRATA_URL`` or the embedded SQLite file).

        ``embedder``: ``"default"`` uses the configured embedder (``$MEMSTRATA_EMBEDDER``,
        else the offline MiniLM model when installed), ``None`` disables vectors,
        or pass an Embedder instance or spec string (``"minilm"``, ``"hash"``, ...).
        """
        db = open_database(url, **db_options)
        emb = _resolve_embedder(embedder)
        scratch_store = None
        scratch_url = scratch_url or os.environ.get("MEMSTRATA_SCRATCH_URL")
        mem = cls(db, clock=clock, policy=policy, embedder=emb, tenant=tenant)
        if scratch_url:
            from .store.redis_scratch import RedisScratchStore

            scratch_store = RedisScratchStore.from_url(scratch_url)
            mem.scratch_store = scratch_store
        return mem

    @property
    def procedures(self) -> Procedures:
        """Versioned procedures with eval-gated activation (:mod:`memstrata.procedures`)."""
        if self._procedures is None:
            from .procedures import Procedures

            self._procedures = Procedures(self.rt)
        return self._procedures

    # -- plumbing ---------------------------------------------------------
    @property
    def clock(self) -> Clock:
        return self.rt.clock

    @property
    def embedder(self) -> Any:
        v = self.rt.index.vectors
        return v.embedder if v is not None else None

    def close(self) -> None:
        self.db.close()
        close = getattr(self.scratch_store, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Memory({self.db.url!r})"

    # -- runs -------------------------------------------------------------
    def run(self, scope: Scope | dict[str, Any], *, task: str | None = None,
            run_id: str | None = None, ttl: timedelta = DEFAULT_TTL) -> Run:
        """Open a run: a scratchpad, the task's checkpoint and the ledger, bound to scope."""
        return Run(self, make_scope(scope), task=task, run_id=run_id, ttl=ttl)

    # -- reads across layers ----------------------------------------------
    def get(self, ref: str, *, scope: Scope | dict[str, Any] | None = None,
            principal: str | None = None) -> Fact | Episode | Checkpoint:
        """Open a reference returned by recall/search (``fact:ID``, ``episode:ID``,
        ``checkpoint:TASK@N``). With ``scope``, the record must apply to it and be
        readable by the principal, else NotFound (no existence leak)."""
        if not isinstance(ref, str) or ":" not in ref:
            raise ValidationError(f"not a reference: {ref!r}",
                                  hint="references look like fact:ID or episode:ID")
        sc = make_scope(scope) if scope is not None else None
        tenant = sc.tenant if sc else self.rt.default_tenant
        layer, _, ident = ref.partition(":")
        record: Fact | Episode | Checkpoint
        if layer == "fact":
            record = self.facts.get(ident, tenant=tenant)
        elif layer == "episode":
            record = self.episodes.get(ident, tenant=tenant)
        elif layer == "checkpoint":
            task, _, version = ident.rpartition("@")
            if sc is None:
                raise ValidationError("opening a checkpoint reference needs a scope")
            found = [c for c in self.checkpoints.versions(sc, task) if str(c.version) == version]
            if not found:
                raise NotFound(f"no checkpoint {ref}")
            return found[0]
        else:
            raise ValidationError(f"unknown reference type {layer!r}",
                                  hint="fact:ID, episode:ID or checkpoint:TASK@N")
        if sc is not None:
            who = principal if principal is not None else sc.user
            if not record.scope.applies_to(sc) or (
                record.readers is not None and who not in record.readers
            ):
                raise NotFound(f"no {layer} {ident} in {sc}")
        return record

    def recall(self, scope: Scope | dict[str, Any], need: str, *, decision: str = "lookup",
               layers: Sequence[str] | None = None, k: int = 5, budget_tokens: int = 800,
               principal: str | None = None, since: datetime | None = None,
               until: datetime | None = None) -> Recall:
        """The retrieval gate (DESIGN §6)."""
        return _recall(self, scope, need, decision=decision, layers=layers, k=k,
                       budget_tokens=budget_tokens, principal=principal, since=since,
                       until=until)

    def context(self, scope: Scope | dict[str, Any], task: str | None = None,
                query: str | None = None, budget_tokens: int = 2000, *,
                principal: str | None = None, facts_cap: int = 40) -> Context:
        """What a session starts with, within a token budget, with a manifest."""
        return assemble(self, scope, task=task, query=query, budget_tokens=budget_tokens,
                        principal=principal, facts_cap=facts_cap)

    def feedback(self, ref: str, signal: str, *, note: str | None = None,
                 tenant: str | None = None) -> dict[str, Any]:
        """Record how a recalled item served; repeated contradiction retires a fact."""
        if signal not in FEEDBACK_SIGNALS:
            raise ValidationError(f"signal must be one of {', '.join(FEEDBACK_SIGNALS)}")
        tenant = tenant or self.rt.default_tenant
        layer, _, ident = ref.partition(":")
        if layer == "fact":
            fact = self.facts.get(ident, tenant=tenant)
        elif layer == "episode":
            self.episodes.get(ident, tenant=tenant)
            fact = None
        else:
            raise ValidationError(f"feedback takes fact:ID or episode:ID refs, got {ref!r}")
        action = "recorded"
        with self.db.transaction(tenant) as tx:
            tx.execute("INSERT INTO feedback (tenant, ref, signal, note, created_at) "
                       "VALUES (?, ?, ?, ?, ?)", (tenant, ref, signal, note, self.clock.now()))
            if fact is not None and signal == "contradicted":
                n = tx.one("SELECT count(*) AS n FROM feedback WHERE tenant = ? AND ref = ? "
                           "AND signal = 'contradicted'", (tenant, ref))
                count = int(n["n"]) if n else 0
                tx.execute("UPDATE facts SET feedback_score = feedback_score - 1 "
                           "WHERE tenant = ? AND id = ?", (tenant, fact.id))
                if count >= RETIRE_AFTER_CONTRADICTIONS and fact.status == "active":
                    tx.execute("UPDATE facts SET status = 'retired', valid_to = ?, reason = ? "
                               "WHERE tenant = ? AND id = ?",
                               (self.clock.now(), f"retired after {count} contradictions",
                                tenant, fact.id))
                    action = "retired"
                else:
                    action = "demoted"
            elif fact is not None and signal == "useful":
                tx.execute("UPDATE facts SET feedback_score = feedback_score + 1, "
                           "last_confirmed_at = ? WHERE tenant = ? AND id = ?",
                           (self.clock.now(), tenant, fact.id))
        return {"ref": ref, "signal": signal, "action": action}

    # -- writes across layers ---------------------------------------------
    def extract(self, scope: Scope | dict[str, Any], transcript: Any, proposer: Any = None,
                **options: Any) -> Any:
        """End-of-session extraction through the write policy (DESIGN §5)."""
        from .extraction import extract

        return extract(self, make_scope(scope), transcript, proposer, **options)

    def forget(self, scope: Scope | dict[str, Any], match: str | None = None, *,
               subject: str | None = None, record_ids: Sequence[str] | None = None,
               force: bool = False, dry_run: bool = False) -> ForgetReport:
        """Delete for real, everywhere the content lives; returns counts per layer."""
        return _forget(self.rt, self.scratch_store, make_scope(scope), match=match,
                       subject=subject, record_ids=record_ids, force=force, dry_run=dry_run)

    def sweep(self) -> dict[str, int]:
        """Retention: expire scratch by TTL, facts and episodes by ``expires_at``."""
        now = self.clock.now()
        out = {"scratch": self.scratch_store.sweep(now), "facts": 0, "episodes": 0}
        # A backend with row-level security (PostgreSQL) shows one tenant per transaction.
        tenants = getattr(self.db, "tenants", None)
        for tenant in tenants() if tenants is not None else [self.rt.default_tenant]:
            with self.db.transaction(tenant, maintenance=True) as tx:
                out["facts"] += tx.execute(
                    "UPDATE facts SET status = 'expired', valid_to = expires_at WHERE status "
                    "IN ('active', 'pending_review') AND expires_at IS NOT NULL AND "
                    "expires_at <= ?", (now,))
                out["episodes"] += tx.execute(
                    "DELETE FROM episodes WHERE expires_at IS NOT NULL AND expires_at <= ?",
                    (now,))
        if out["episodes"]:
            self.db.compact()
        return out

    def doctor(self) -> list[str]:
        """Re-derive the stored invariants; returns what is broken (empty = healthy)."""
        from .doctor import verify

        return verify(self)

    def stats(self) -> dict[str, Any]:
        return self.db.stats()


class Run:
    """One run of an agent: scratch (discarded on exit), checkpoint, ledger."""

    def __init__(self, mem: Memory, scope: Scope, *, task: str | None, run_id: str | None,
                 ttl: timedelta) -> None:
        self.mem = mem
        self.scope = scope
        self.task = task
        self.run_id = run_id or new_id()
        self.scratch = Scratch(mem.scratch_store, mem.rt, scope, self.run_id, ttl)
        self.checkpoint = RunCheckpoint(mem, scope, task, self.run_id)
        self.ledger = RunLedger(mem, scope, self.run_id)
        self._open = False

    def __enter__(self) -> Run:
        with self.mem.db.transaction(self.scope.tenant) as tx:
            tx.execute(f"INSERT INTO runs ({SCOPE_COLUMNS}, run_id, task, started_at) VALUES "
                       "(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, run_id) DO NOTHING",
                       (*scope_values(self.scope), self.run_id, self.task,
                        self.mem.clock.now()))
        self._open = True
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """End the run: discard its scratchpad and record the end time."""
        if not self._open:
            return
        self._open = False
        self.scratch.discard()
        with self.mem.db.transaction(self.scope.tenant) as tx:
            tx.execute("UPDATE runs SET ended_at = ? WHERE tenant = ? AND run_id = ?",
                       (self.mem.clock.now(), self.scope.tenant, self.run_id))


class RunCheckpoint:
    """``run.checkpoint``: the task checkpoint bound to the run's scope and task."""

    def __init__(self, mem: Memory, scope: Scope, task: str | None, run_id: str) -> None:
        self._mem, self._scope, self._task, self._run_id = mem, scope, task, run_id

    def _need_task(self) -> str:
        if self._task is None:
            raise ValidationError("this run has no task", hint="mem.run(scope, task='...')")
        return self._task

    def save(self, **fields: Any) -> Checkpoint:
        return self._mem.checkpoints.save(self._scope, self._need_task(),
                                          updated_by=f"run:{self._run_id}", **fields)

    def load(self) -> Checkpoint | None:
        return self._mem.checkpoints.current(self._scope, self._need_task())

    current = load


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


def _resolve_embedder(embedder: Any) -> Any:
    if embedder is None or embedder == "none":
        return None
    if embedder == "default":
        spec = os.environ.get("MEMSTRATA_EMBEDDER") or None
        if spec is None:
            from .embeddings import missing_minilm_packages

            # the offline MiniLM model when its extra is installed; lexical-only otherwise
            return None if missing_minilm_packages() else _resolve_embedder("minilm")
        if spec == "none":
            return None
        embedder = spec
    if isinstance(embedder, str):
        from .embeddings import get_embedder

        return get_embedder(embedder)
    return embedder


__all__ = ["Memory", "Run"]
