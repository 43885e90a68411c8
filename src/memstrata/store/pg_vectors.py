"""Vectors on PostgreSQL: pgvector rows beside their records, HNSW for episodes.

Contract (:class:`memstrata.store.base.VectorIndex`; this index never embeds text):
- A vector is written in the transaction of its record and deleted with it (schema
  trigger), so forget removes vectors too. Episode vectors carry copies of the episode's
  filter columns (scope, readers, expiry, ``observed_at``; episodes are immutable).
- The model's ``model:dims`` is recorded per tenant (``meta``); a store opened with
  another embedder refuses vector search and writes with :class:`ConfigError` (hint:
  ``memstrata reindex``) rather than mixing vector spaces, also when another process
  re-embedded the tenant after this one began (the record is read once in each transaction).
- ``search`` filters by tenant, scope, readers, expiry and dates *in SQL* before the
  top k, so a foreign record never takes a slot. Episodes of an indexed dimension go
  through the partial HNSW index with ``hnsw.iterative_scan = relaxed_order`` (pgvector
  0.8): the scan keeps walking the graph until k rows pass the filter (or
  ``hnsw.max_scan_tuples`` is reached); rows are re-sorted by exact score. If fewer than
  k come back while more rows pass the filter, the query runs again as an exact scan,
  so a selective filter costs a scan of the rows it selects but never loses results.
- Facts are few per scope: ``fact_scores`` is exact; so is ``record_scores`` (the
  checkpoint versions a ranking selected).
- Scores are dot products of unit vectors (cosine), as in the SQLite backend.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..scoping import applies_sql
from .base import Nearest, Tx
from .pg_schema import INDEXED_DIMS
from .pg_tx import PgTx, translate
from .sql import chunks, marks, observed_between

if TYPE_CHECKING:
    from ..models import Scope

_EF_SEARCH_MIN = 40
_UPSERT = ("ON CONFLICT (tenant, record_id) DO UPDATE SET vec = excluded.vec, "
           "model = excluded.model, dims = excluded.dims")
_MAX_SCAN_TUPLES = 40_000
#: The readers test over the copied column (as :meth:`PostgresDatabase.readers_clause`).
_READERS = "(v.readers IS NULL OR jsonb_exists(v.readers::jsonb, ?))"


class PgVectorIndex:
    """Finds nearest neighbours within a filter, in PostgreSQL (pgvector)."""

    def __init__(self, model: str, dims: int) -> None:
        self.model = model
        self.dims = int(dims)
        #: The transactions whose model check passed (each checks once, however many
        #: searches it runs: a recall reads facts and episodes in one).
        self._checked_in: weakref.WeakSet[Tx] = weakref.WeakSet()

    @property
    def _label(self) -> str:
        return f"{self.model}:{self.dims}"

    # -- model identity -------------------------------------------------
    def check_model(self, tx: Tx) -> None:
        """Record the model for the tenant on first write; refuse a different one. Read once in
        every transaction that searches or writes (one row by its key): another process
        may have re-embedded the tenant with another model since."""
        if tx in self._checked_in:
            return
        tx = _pg(tx)
        tenant = tx.tenant
        row = tx.raw_one("SELECT value FROM meta WHERE tenant = %s AND key = 'embedding_model'",
                         (tenant,))
        if row is None:
            other = tx.raw_one("SELECT model, dims FROM vectors WHERE tenant = %s AND "
                               "(model <> %s OR dims <> %s) LIMIT 1",
                               (tenant, self.model, self.dims))
            if other is not None:
                raise ConfigError("the store has vectors of an unrecorded model",
                                  hint="run `memstrata reindex` to re-embed with " + self.model)
            if not tx.writable:
                return  # recorded by the first write
            tx.raw_execute("INSERT INTO meta (tenant, key, value) VALUES "
                           "(%s, 'embedding_model', %s) ON CONFLICT (tenant, key) DO NOTHING",
                           (tenant, self._label))
            row = tx.raw_one("SELECT value FROM meta WHERE tenant = %s AND "
                             "key = 'embedding_model'", (tenant,))
        if row is not None and row["value"] != self._label:
            raise ConfigError(
                f"the store's vectors were made by {row['value']}, not {self._label}",
                hint="run `memstrata reindex` to re-embed, or open with the original embedder",
            )
        self._checked_in.add(tx)

    # -- writes -----------------------------------------------------------
    def add(self, tx: Tx, table: str, tenant: str, ids: Sequence[str], vectors: Any) -> None:
        tx = _pg(tx)
        self.check_model(tx)
        mat = np.asarray(vectors, dtype=np.float32)
        if mat.ndim != 2 or mat.shape[0] != len(ids) or mat.shape[1] != self.dims:
            raise ConfigError(f"expected {len(ids)} vectors of {self.dims} dims, "
                              f"got shape {mat.shape}")
        last = {rid: i for i, rid in enumerate(ids)}  # one row per id: the last vector wins
        keys = list(last)
        vecs = [mat[last[rid]] for rid in keys]
        if table == "episodes":
            # the episode's filter columns come along (see the schema)
            tx.raw_execute(
                "INSERT INTO vectors (tenant, record_id, layer, model, dims, vec, s_user, "
                "s_project, s_agent, expires_at, observed_at, readers) SELECT r.tenant, "
                "r.id, 'episodes', %s, %s, x.vec, r.s_user, r.s_project, r.s_agent, "
                "r.expires_at, r.observed_at, r.readers FROM unnest(%s::text[], "
                "%s::vector[]) AS x(id, vec) JOIN episodes r ON r.tenant = %s AND "
                "r.id = x.id " + _UPSERT, (self.model, self.dims, keys, vecs, tenant))
        elif table in ("facts", "checkpoints"):
            tx.raw_execute(
                "INSERT INTO vectors (tenant, record_id, layer, model, dims, vec) SELECT %s, "
                "x.id, %s, %s, %s, x.vec FROM unnest(%s::text[], %s::vector[]) "
                "AS x(id, vec) " + _UPSERT, (tenant, table, self.model, self.dims, keys, vecs))
        else:
            raise ValueError(table)

    def clear(self, tx: Tx, tenant: str) -> int:
        tx = _pg(tx)
        removed = tx.raw_execute("DELETE FROM vectors WHERE tenant = %s", (tenant,))
        tx.raw_execute("DELETE FROM meta WHERE tenant = %s AND key = 'embedding_model'",
                       (tenant,))
        return removed

    # -- search -----------------------------------------------------------
    def search(self, tx: Tx, scope: Scope, principal: str | None, qvec: np.ndarray, k: int, *,
               now: datetime, since: datetime | None = None,
               until: datetime | None = None) -> list[tuple[str, float]]:
        """(id, cosine) of the k nearest episodes that pass the filter, best first."""
        tx = _pg(tx)
        self.check_model(tx)
        q = np.asarray(qvec, dtype=np.float32)
        hnsw, exact = self._queries(scope, principal, q, k, now, since, until)
        if hnsw is not None:
            self._tune(tx, k)
            rows = tx.raw_all(*hnsw)
            if len(rows) >= k:
                return _best(rows, k)
        return _best(tx.raw_all(*exact), k)

    def prepare_search(self, tx: Tx, scope: Scope, principal: str | None, k: int, *,
                       now: datetime, since: datetime | None = None,
                       until: datetime | None = None) -> Nearest | None:
        """None: the search is a query (pgvector's), so it runs in the caller's
        transaction (:meth:`search`)."""
        return None

    def explain(self, tx: PgTx, scope: Scope, principal: str | None, k: int, *,
                now: datetime, exact: bool = False) -> str:
        """PostgreSQL's plan for an episode vector search (for operators and tests)."""
        q = np.zeros(self.dims, dtype=np.float32)
        q[0] = 1.0
        hnsw, exact_query = self._queries(scope, principal, q, k, now, None, None)
        query, params = exact_query if exact or hnsw is None else hnsw
        if query is not exact_query[0]:
            self._tune(tx, k)
        return "\n".join(str(r["QUERY PLAN"]) for r in tx.raw_all("EXPLAIN " + query, params))

    def _tune(self, tx: PgTx, k: int) -> None:
        tx.raw_one("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                   "set_config('hnsw.ef_search', %s, true), "
                   "set_config('hnsw.max_scan_tuples', %s, true)",
                   (str(max(_EF_SEARCH_MIN, k)), str(_MAX_SCAN_TUPLES)))

    def _queries(self, scope: Scope, principal: str | None, q: np.ndarray, k: int,
                 now: datetime, since: datetime | None, until: datetime | None,
                 ) -> tuple[tuple[str, tuple[Any, ...]] | None, tuple[str, tuple[Any, ...]]]:
        """The HNSW query (None for an unindexed dimension) and the exact query."""
        where, params = _episode_filter(scope, principal, now, since, until)
        dims = self.dims
        exact = (translate("SELECT v.record_id AS id, (v.vec <#> ?) AS d FROM vectors v WHERE "
                           f"v.dims = ? AND v.layer = 'episodes' AND {where} AND v.model = ? "
                           "ORDER BY d LIMIT ?"), (q, dims, *params, self.model, k))
        if dims not in INDEXED_DIMS:
            return None, exact
        # Only the index expression vec::vector(D), with the partial-index predicate as
        # literals, lets the planner walk the HNSW graph.
        dist = f"(v.vec::vector({dims}) <#> ?::vector({dims}))"
        hnsw = (translate(f"SELECT v.record_id AS id, {dist} AS d FROM vectors v WHERE "
                          f"v.dims = {dims} AND v.layer = 'episodes' AND {where} AND "
                          f"v.model = ? ORDER BY {dist} LIMIT ?"),
                (q, *params, self.model, q, k))
        return hnsw, exact

    def fact_scores(self, tx: Tx, where: str, params: Sequence[Any], qvec: np.ndarray,
                    limit: int, *, weight: str = "1.0") -> list[tuple[str, float]]:
        """(id, cosine) of facts passing ``where`` (alias ``r``), the ``limit`` best by the
        cosine times ``weight``; exact."""
        self.check_model(tx)
        rows = tx.all(
            "SELECT r.id AS id, -(v.vec <#> ?) AS s FROM facts r JOIN vectors v ON "
            "v.tenant = r.tenant AND v.record_id = r.id WHERE v.model = ? AND v.dims = ? "
            f"AND {where} ORDER BY -(v.vec <#> ?) * {weight} DESC, r.id LIMIT ?",
            (np.asarray(qvec, dtype=np.float32), self.model, self.dims, *params,
             np.asarray(qvec, dtype=np.float32), min(limit, 5000)))
        return [(r["id"], float(r["s"])) for r in rows]

    def record_scores(self, tx: Tx, tenant: str, table: str, ids: Sequence[str],
                      qvec: np.ndarray) -> dict[str, float]:
        self.check_model(tx)
        q = np.asarray(qvec, dtype=np.float32)
        out: dict[str, float] = {}
        for chunk in chunks(list(ids)):
            for r in tx.all(f"SELECT record_id, -(vec <#> ?) AS s FROM vectors WHERE "
                            f"tenant = ? AND layer = ? AND model = ? AND dims = ? AND "
                            f"record_id IN ({marks(chunk)})",
                            (q, tenant, table, self.model, self.dims, *chunk)):
                out[r["record_id"]] = float(r["s"])
        return out

    def invalidate(self) -> None:
        """Nothing is cached in-process."""

    def sync(self, tenant: str | None = None) -> None:
        """Nothing to do: pgvector's index lives in the database."""


def delete_vectors(tx: Tx, tenant: str, record_ids: Sequence[str]) -> int:
    """Delete these records' vectors (any model) in the caller's transaction."""
    gone = 0
    for chunk in chunks(list(record_ids)):
        gone += int(_pg(tx).raw_execute("DELETE FROM vectors WHERE tenant = %s AND "
                                        "record_id = ANY(%s)", (tenant, list(chunk))) or 0)
    return gone


def _pg(tx: Tx) -> PgTx:
    if not isinstance(tx, PgTx):
        raise ConfigError("the pgvector index needs a transaction of its PostgreSQL database")
    return tx


def _episode_filter(scope: Scope, principal: str | None, now: datetime,
                    since: datetime | None, until: datetime | None) -> tuple[str, list[Any]]:
    """The episode read filter over ``vectors v``, whose rows carry copies of the episode's
    filter columns: the scope rule of :func:`memstrata.scoping.applies_sql`, readers,
    expiry and dates (``?`` placeholders)."""
    where, params = applies_sql(scope, "v")
    where += f" AND {_READERS} AND (v.expires_at IS NULL OR v.expires_at > ?)"
    params += [principal, now]
    window, dates = observed_between("v", since, until)
    return where + window, [*params, *dates]


def _best(rows: list[dict[str, Any]], k: int) -> list[tuple[str, float]]:
    # relaxed_order may return neighbours slightly out of order: sort by exact score
    scored = sorted(((r["id"], -float(r["d"])) for r in rows), key=lambda x: (-x[1], x[0]))
    return scored[:k]


__all__ = ["PgVectorIndex", "delete_vectors"]
