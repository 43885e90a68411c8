"""The storage seam: the protocols a backend implements, and nothing else.

A backend is a :class:`Database` (transactions, lexical search, its vector index) and,
optionally, a :class:`ScratchStore` elsewhere (Redis). The layers speak to these
protocols only; which engine serves a URL is decided in :mod:`memstrata.store.engines`,
through the same registry a third-party engine uses.

Contract of a :class:`Database`:

- ``transaction(tenant)`` yields a :class:`Tx`; everything inside commits together or
  not at all; nested calls are savepoints. ``write=False`` is a read. ``maintenance=True``
  allows the deletes that the schema's append-only guards otherwise refuse (forget and
  retention only). Every statement of the layers names its tenant in SQL; an engine with
  row-level security (PostgreSQL) also confines the transaction to it.
- SQL is written with ``?`` placeholders and portable syntax (a table alias on delete,
  ``ON CONFLICT``); rows come back as dicts; driver errors come back as memstrata's
  :class:`~memstrata.errors.BackendError` / :class:`~memstrata.errors.Conflict`.
- ``text_search`` ranks rows of ``episodes`` or ``facts`` by a BM25-like relevance
  *within* a caller-supplied filter (scope, readers, status), so filtering always happens
  before ranking; ``index_text`` writes a row's lexical entry in the caller's transaction.
- ``vector_index(model, dims)`` returns the engine's :class:`VectorIndex` for one
  embedding model; ``tenants()`` lists every tenant with data, so maintenance (retention,
  doctor, reindex) can visit each one; ``capabilities`` says what the engine offers.

A :class:`VectorIndex` only stores and searches vectors: it never embeds text and never
decides what text a record is embedded with (the layers do, :mod:`memstrata.layers.indexing`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    import numpy as np

    from ..models import Scope
    from .lexical import AllCommon

Row = dict[str, Any]


class Tx(Protocol):
    """One open transaction."""

    #: Whether the outermost transaction may write: what it reads may yet be rolled back,
    #: so nothing beside the database (a cache) may keep it.
    writable: bool

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; returns the affected row count."""
        ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run a statement once per row of parameters."""
        ...

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of a query, or None."""
        ...

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of a query."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """What an engine offers beyond the protocol's common ground."""

    #: Row-level security: a transaction sees only its tenant's rows.
    tenant_isolation: bool = False
    #: Several processes (or hosts) may share the store concurrently.
    shared: bool = True
    #: Deleted text leaves the files at once (secure delete + compaction), not later.
    secure_delete: bool = False


#: The nearest episodes to a query vector, as (id, cosine), best first
#: (:meth:`VectorIndex.prepare_search`).
Nearest: TypeAlias = Callable[["np.ndarray"], list[tuple[str, float]]]


class VectorIndex(Protocol):
    """Vectors of facts, episodes and checkpoint versions for one embedding model,
    searched after filtering."""

    model: str
    dims: int

    def check_model(self, tx: Tx) -> None:
        """Record the model on first use; refuse another model's vectors (ConfigError)."""
        ...

    def add(self, tx: Tx, table: str, tenant: str, ids: Sequence[str], vectors: Any) -> None:
        """Store (or replace) the vectors of records of ``table`` in the caller's transaction."""
        ...

    def search(self, tx: Tx, scope: Scope, principal: str | None, qvec: np.ndarray, k: int, *,
               now: datetime, since: datetime | None = None,
               until: datetime | None = None) -> list[tuple[str, float]]:
        """(episode id, cosine) of the ``k`` nearest episodes that pass the episode read
        filter (scope applies, readers, unexpired, observed within the dates)."""
        ...

    def prepare_search(self, tx: Tx, scope: Scope, principal: str | None, k: int, *,
                       now: datetime, since: datetime | None = None,
                       until: datetime | None = None) -> Nearest | None:
        """:meth:`search` as a function of the query vector alone, over this transaction's
        view, that needs no transaction: it may run on the thread that embeds the query,
        while the caller's lexical searches run. None where the search itself reads the
        database (PostgreSQL): the caller then calls :meth:`search`."""
        ...

    def fact_scores(self, tx: Tx, where: str, params: Sequence[Any], qvec: np.ndarray,
                    limit: int, *, weight: str = "1.0") -> list[tuple[str, float]]:
        """(fact id, cosine) of facts passing ``where`` (alias ``r``), best first; exact.
        The ``limit`` best are chosen by the cosine times ``weight`` (SQL over ``r``, as
        :meth:`Database.text_search` takes it)."""
        ...

    def record_scores(self, tx: Tx, tenant: str, table: str, ids: Sequence[str],
                      qvec: np.ndarray) -> dict[str, float]:
        """The cosine of each of these records of ``table`` that has a vector of this model
        (exact; for the few records a caller selected itself, e.g. checkpoint versions)."""
        ...

    def clear(self, tx: Tx, tenant: str) -> int:
        """Delete every vector of the tenant and the recorded model (before a reindex)."""
        ...

    def invalidate(self) -> None:
        """Drop what is cached in this process (after a reindex or a forget)."""
        ...

    def sync(self, tenant: str | None = None) -> None:
        """Bring the index's own files (where it keeps any beside the database) up to date
        with the database: scrub deleted vectors now (after a forget or a sweep), add the
        ones written (on close). ``None``: every tenant. A no-op where the database is the
        index."""
        ...


class ScratchStore(Protocol):
    """Where scratch entries live (the SQL table, or Redis with native TTL)."""

    #: Whether the store writes through the database's transactions (then a forget removes
    #: scratch entries in its own transaction, all or nothing).
    transactional: bool

    def put(self, scope: Scope, run_id: str, key: str, value: str, now: datetime,
            expires_at: datetime) -> None: ...

    def put_many(self, scope: Scope, run_id: str, items: Sequence[tuple[str, str]],
                 now: datetime, expires_at: datetime) -> None:
        """Write several entries at once: all of them or none."""
        ...

    def get(self, scope: Scope, run_id: str, key: str, now: datetime) -> str | None: ...

    def keys(self, scope: Scope, run_id: str, prefix: str, now: datetime) -> list[str]: ...

    def entries(self, scope: Scope, run_id: str, prefix: str,
                now: datetime) -> list[tuple[str, str]]:
        """(key, value) of the live entries under ``prefix``, by key, read at once."""
        ...

    def delete(self, scope: Scope, run_id: str, key: str) -> bool: ...

    def discard(self, scope: Scope, run_id: str) -> int: ...

    def sweep(self, now: datetime) -> int:
        """Delete every expired entry; returns how many."""
        ...

    def sweep_tenant(self, tenant: str, now: datetime) -> int:
        """Delete one tenant's expired entries; returns how many (a transactional store does
        it inside the caller's open transaction, so retention sweeps a tenant all at once)."""
        ...

    def forget(self, scope: Scope, match: str | None, *, dry_run: bool = False,
               exact: bool = False) -> int:
        """Delete (unless ``dry_run``: count) entries owned by ``scope`` (with ``exact``:
        those of exactly ``scope``, a reader's forget) whose key or value contains
        ``match``."""
        ...

    def close(self) -> None: ...


class Database(Protocol):
    """What a backend offers to the layers."""

    url: str
    #: The engine's name ("sqlite", "postgresql"), for messages and stats only: code above
    #: ``store/`` never branches on it (it asks :attr:`capabilities`).
    engine: str
    capabilities: Capabilities

    def transaction(
        self, tenant: str, *, write: bool = True, maintenance: bool = False
    ) -> AbstractContextManager[Tx]: ...

    def tenants(self) -> list[str]:
        """Every tenant that has (or had) rows, sorted."""
        ...

    def readers_clause(self, column: str) -> str:
        """SQL true when the principal (one ``?`` parameter) may read the row."""
        ...

    def text_search(
        self,
        tx: Tx,
        table: str,
        query: str,
        where: str,
        params: Sequence[Any],
        limit: int,
        drop: Sequence[str] = (),
        all_common: AllCommon = "keep",
        among: tuple[str, Sequence[Any]] | None = None,
        weight: tuple[str, Sequence[Any]] | None = None,
    ) -> list[tuple[str, float]]:
        """(id, score) for rows of ``table`` matching ``query`` and ``where`` (alias ``r``);
        higher score is better. With ``weight`` (an SQL expression over ``r``'s scope
        columns, ``id`` and ``status``, and its parameters) the rows are chosen and ordered
        by score times weight, and their own scores returned: the ranking's adjustments
        decide which rows the ``limit`` keeps, so a current or more specific row is not cut
        behind many superseded or broader ones of the same words. Each word weighs by its
        frequency among the rows ``among`` (a filter and its parameters; default ``where``)
        admits alone: the rows the caller may read, whatever their time or status, so that
        a window, an expiry or a status change never leaves a long-lived process weighing
        words apart from a fresh one.
        Rows outside it (another user's, another tenant's) never move a score or an order
        (on PostgreSQL, a long-lived process's counts for a caller with many rows lag its
        own writes until the index grows by a tenth: :mod:`memstrata.store.pg_search`).
        In a large index the query's very common words are left out
        (:func:`memstrata.store.lexical.selective`); ``all_common="drop"`` (for a caller that
        also ranks by vectors) returns nothing when every word is that common."""
        ...

    def index_text(self, tx: Tx, table: str, record_id: str, tenant: str, text: str,
                   context: str = "") -> None:
        """Add or replace the lexical index entry of one row; ``context`` (neighbouring
        records of the same thread) is indexed in a second, lower-weighted column."""
        ...

    def vector_index(self, model: str, dims: int) -> VectorIndex:
        """The engine's vector index for vectors of ``model`` with ``dims`` dimensions."""
        ...

    def lock_threads(self, tx: Tx, tenant: str, threads: Sequence[tuple[str, str]]) -> None:
        """Hold other writers of these episode threads ((scope key, thread) pairs) off until
        the transaction ends: an append places its turns in their threads, and a forget or
        a sweep re-indexes the turns around the ones it deletes, each from what the
        transaction reads, so two of them must not work on one thread at once. A no-op
        where every write transaction already excludes the others (SQLite)."""
        ...

    def vector_count(self, tx: Tx, tenant: str, record_ids: Sequence[str]) -> int:
        """How many stored vectors (of any model) belong to these records."""
        ...

    def delete_vectors(self, tx: Tx, tenant: str, record_ids: Sequence[str]) -> int:
        """Delete the stored vectors (of any model) of these records, in the caller's
        transaction (their rows stay); returns how many."""
        ...

    def sync_vectors(self, tenant: str | None = None) -> None:
        """Scrub deleted vectors from the vector index's own files (where the engine keeps
        any beside the database), whatever model made them and whether or not this
        process has an embedder: after a forget or a sweep. ``None``: every tenant. A
        no-op where the database is the index; BackendError when files could not be
        written."""
        ...

    def compact(self) -> list[str]:
        """After a forget: rewrite indexes and logs so deleted text leaves the files.
        Returns what it could not compact and why (empty: everything), for the report."""
        ...

    def stats(self) -> dict[str, Any]:
        """Row counts, size and applied migrations, for people."""
        ...

    def verify(self) -> list[str]:
        """Engine-level integrity problems (empty list when healthy)."""
        ...

    def close(self) -> None: ...


__all__ = ["Capabilities", "Database", "Nearest", "Row", "ScratchStore", "Tx", "VectorIndex"]
