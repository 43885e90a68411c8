"""Vectors on PostgreSQL: pgvector rows beside their records, HNSW for episodes.

Contract (the API of :class:`memstrata.vectors.VectorIndex`):
- A vector is written in the transaction of its record and deleted with it (schema
  trigger), so forget removes vectors too. Episode vectors carry copies of the episode's
  filter columns (scope, readers, expiry, ``observed_at``; episodes are immutable).
- The embedder's ``model:dims`` is recorded per tenant (``meta``); a store opened with
  another embedder refuses vector search and writes with :class:`ConfigError` (hint:
  ``memstrata reindex``) rather than mixing vector spaces.
- ``search`` filters by tenant, scope, readers, expiry and dates *in SQL* before the
  top k, so a foreign record never takes a slot. Episodes of an indexed dimension go
  through the partial HNSW index with ``hnsw.iterative_scan = relaxed_order`` (pgvector
  0.8): the scan keeps walking the graph until k rows pass the filter (or
  ``hnsw.max_scan_tuples`` is reached); rows are re-sorted by exact score. If fewer than
  k come back while more rows pass the filter, the query runs again as an exact scan,
  so a selective filter costs a scan of the rows it selects but never loses results.
- Facts are few per scope: ``fact_scores`` and ``similar_facts`` are exact.
- Scores are dot products of unit vectors (cosine), as in the SQLite backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..models import Scope
from .pg_schema import INDEXED_DIMS

if TYPE_CHECKING:
    from ..embeddings import Embedder
    from .postgres import PgTx, PostgresDatabase

_EF_SEARCH_MIN = 40
_UPSERT = ("ON CONFLICT (tenant, record_id) DO UPDATE SET vec = excluded.vec, "
           "model = excluded.model, dims = excluded.dims")
_MAX_SCAN_TUPLES = 40_000


class PgVectorIndex:
    """Embeds records and finds nearest neighbours within a filter, in PostgreSQL."""

    def __init__(self, db: PostgresDatabase, embedder: Embedder) -> None:
        self.db = db
        self.embedder = embedder
        self._checked: set[str] = set()

    @property
    def _model(self) -> str:
        return f"{self.embedder.model_name}:{self.embedder.dims}"

    # -- model identity -------------------------------------------------
    def check_model(self, tx: PgTx) -> None:
        """Record the model for the tenant on first write; refuse a different one."""
        tenant = tx.tenant
        if tenant in self._checked:
            return
        row = tx.raw_one("SELECT value FROM meta WHERE tenant = %s AND key = 'embedding_model'",
                         (tenant,))
        if row is None:
            other = tx.raw_one("SELECT model, dims FROM vectors WHERE tenant = %s AND "
                               "(model <> %s OR dims <> %s) LIMIT 1",
                               (tenant, self.embedder.model_name, self.embedder.dims))
            if other is not None:
                raise ConfigError("the store has vectors of an unrecorded model",
                                  hint="run `memstrata reindex` to re-embed with "
                                       + self.embedder.model_name)
            if not tx.writable:
                return  # recorded by the first write
            tx.raw_execute("INSERT INTO meta (tenant, key, value) VALUES "
                           "(%s, 'embedding_model', %s) ON CONFLICT (tenant, key) DO NOTHING",
                           (tenant, self._model))
            row = tx.raw_one("SELECT value FROM meta WHERE tenant = %s AND "
                             "key = 'embedding_model'", (tenant,))
        if row is not None and row["value"] != self._model:
            raise ConfigError(
                f"the store's vectors were made by {row['value']}, not {self._model}",
                hint="run `memstrata reindex` to re-embed, or open with the original embedder",
            )
        self._checked.add(tenant)

    # -- writes -----------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)

    def add(self, tx: PgTx, table: str, tenant: str, ids: Sequence[str], vectors: Any) -> None:
        self.check_model(tx)
        mat = np.asarray(vectors, dtype=np.float32)
        if mat.ndim != 2 or mat.shape[0] != len(ids) or mat.shape[1] != self.embedder.dims:
            raise ConfigError(f"expected {len(ids)} vectors of {self.embedder.dims} dims, "
                              f"got shape {mat.shape}")
        name, dims = self.embedder.model_name, self.embedder.dims
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
                "r.id = x.id " + _UPSERT, (name, dims, keys, vecs, tenant))
        elif table == "facts":
            tx.raw_execute(
                "INSERT INTO vectors (tenant, record_id, layer, model, dims, vec) SELECT %s, "
                "x.id, 'facts', %s, %s, x.vec FROM unnest(%s::text[], %s::vector[]) "
                "AS x(id, vec) " + _UPSERT, (tenant, name, dims, keys, vecs))
        else:
            raise ValueError(table)

    # -- search -----------------------------------------------------------
    def search(self, tx: PgTx, table: str, scope: Scope, principal: str | None, query: str,
               k: int, *, now: datetime, since: datetime | None = None,
               until: datetime | None = None, qvec: np.ndarray | None = None,
               extra_mask: Callable[[list[str]], set[str]] | None = None,
               ) -> list[tuple[str, float]]:
        """(id, cosine) of the k nearest records that pass the filter, best first."""
        del extra_mask  # accepted for API parity; the filter runs in SQL
        if table != "episodes":
            raise ValueError("vector search covers episodes; facts use fact_scores")
        self.check_model(tx)
        if qvec is None:
            qvec = self.embedder.embed_query(query)
        q = np.asarray(qvec, dtype=np.float32)
        hnsw, exact = self._queries(scope, principal, q, k, now, since, until)
        if hnsw is not None:
            self._tune(tx, k)
            rows = tx.raw_all(*hnsw)
            if len(rows) >= k:
                return _best(rows, k)
        return _best(tx.raw_all(*exact), k)

    def explain(self, tx: PgTx, scope: Scope, principal: str | None, k: int, *,
                now: datetime, exact: bool = False) -> str:
        """PostgreSQL's plan for an episode vector search (for operators and tests)."""
        q = np.zeros(self.embedder.dims, dtype=np.float32)
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
        model = self.embedder.model_name
        dims = int(self.embedder.dims)
        exact = ("SELECT v.record_id AS id, (v.vec <#> %s) AS d FROM vectors v WHERE "
                 f"v.dims = %s AND v.layer = 'episodes' AND {where} AND v.model = %s "
                 "ORDER BY d LIMIT %s", (q, dims, *params, model, k))
        if dims not in INDEXED_DIMS:
            return None, exact
        # Only the index expression vec::vector(D), with the partial-index predicate as
        # literals, lets the planner walk the HNSW graph.
        dist = f"(v.vec::vector({dims}) <#> %s::vector({dims}))"
        hnsw = (f"SELECT v.record_id AS id, {dist} AS d FROM vectors v WHERE "
                f"v.dims = {dims} AND v.layer = 'episodes' AND {where} AND v.model = %s "
                f"ORDER BY {dist} LIMIT %s", (q, *params, model, q, k))
        return hnsw, exact

    def fact_scores(self, tx: PgTx, where: str, params: Sequence[Any], qvec: np.ndarray,
                    limit: int) -> list[tuple[str, float]]:
        """(id, cosine) of facts passing ``where`` (alias ``r``), best first; exact."""
        self.check_model(tx)
        rows = tx.all(
            "SELECT r.id AS id, -(v.vec <#> ?) AS s FROM facts r JOIN vectors v ON "
            "v.tenant = r.tenant AND v.record_id = r.id WHERE v.model = ? AND v.dims = ? "
            f"AND {where} ORDER BY s DESC, r.id LIMIT ?",
            (np.asarray(qvec, dtype=np.float32), self.embedder.model_name,
             self.embedder.dims, *params, min(limit, 5000)))
        return [(r["id"], float(r["s"])) for r in rows]

    def similar_facts(self, scope: Scope, kind: str, claim: str,
                      threshold: float) -> list[tuple[str, float]]:
        """Active/pending facts of exactly this scope and kind with cosine >= threshold."""
        qvec = np.asarray(self.embedder.embed_query(claim), dtype=np.float32)
        with self.db.transaction(scope.tenant, write=False) as tx:
            self.check_model(tx)
            rows = tx.raw_all(
                "SELECT f.id AS id, -(v.vec <#> %s) AS s FROM facts f JOIN vectors v ON "
                "v.tenant = f.tenant AND v.record_id = f.id WHERE f.tenant = %s AND "
                "f.scope_key = %s AND f.kind = %s AND f.status IN ('active', "
                "'pending_review') AND v.model = %s AND v.dims = %s",
                (qvec, scope.tenant, scope.key, kind, self.embedder.model_name,
                 self.embedder.dims))
        out = [(r["id"], float(r["s"])) for r in rows if float(r["s"]) >= threshold]
        return sorted(out, key=lambda x: -x[1])

    def invalidate(self) -> None:
        """Nothing is cached in-process beyond the model check."""
        self._checked.clear()

    def reindex(self, progress: Callable[[int, int], None] | None = None,
                batch: int = 256) -> int:
        """Re-embed every fact and episode of every tenant with the current embedder."""
        from ..episodes import Episodes

        work: list[tuple[str, str, str, str]] = []
        for tenant in self.db.tenants():
            # the texts an append embeds (mirrors memstrata.vectors.VectorIndex.reindex):
            # a fact's claim; an episode's line after the previous line of its thread
            with self.db.transaction(tenant, write=False) as tx:
                for f in tx.raw_all("SELECT id, claim FROM facts"):
                    work.append(("facts", tenant, f["id"], f["claim"]))
                prev: tuple[Any, ...] | None = None
                prev_line = ""
                for e in tx.raw_all("SELECT id, event, text, outcome, subject, scope_key, "
                                    "source FROM episodes "
                                    "ORDER BY scope_key, source, observed_at, id"):
                    thread = (e["scope_key"], e["source"])
                    line = Episodes.line(e)
                    text = f"{prev_line}\n{line}" if thread == prev and prev_line else line
                    work.append(("episodes", tenant, e["id"], text))
                    prev, prev_line = thread, line
            with self.db.transaction(tenant) as tx:
                tx.execute("DELETE FROM vectors WHERE tenant = ?", (tenant,))
                tx.execute("DELETE FROM meta WHERE tenant = ? AND key = 'embedding_model'",
                           (tenant,))
        self._checked.clear()
        total = len(work)
        done = 0
        for start in range(0, total, batch):
            chunk = work[start:start + batch]
            vecs = self.embed([c[3] for c in chunk])
            by_target: dict[tuple[str, str], list[int]] = {}
            for i, (table, tenant, _, _) in enumerate(chunk):
                by_target.setdefault((tenant, table), []).append(i)
            for (tenant, table), idx in by_target.items():
                with self.db.transaction(tenant) as tx:
                    self.add(tx, table, tenant, [chunk[i][2] for i in idx], vecs[idx])
            done += len(chunk)
            if progress:
                progress(done, total)
        return total


def _episode_filter(scope: Scope, principal: str | None, now: datetime,
                    since: datetime | None, until: datetime | None) -> tuple[str, list[Any]]:
    """The episode read filter (scope applies, readers, expiry, dates) over ``vectors v``."""
    parts = ["v.tenant = %s"]
    params: list[Any] = [scope.tenant]
    for col, value in (("s_user", scope.user), ("s_project", scope.project),
                       ("s_agent", scope.agent)):
        if value is None:
            parts.append(f"v.{col} IS NULL")
        else:
            parts.append(f"(v.{col} IS NULL OR v.{col} = %s)")
            params.append(value)
    parts.append("(v.readers IS NULL OR jsonb_exists(v.readers::jsonb, %s))")
    params.append(principal)
    parts.append("(v.expires_at IS NULL OR v.expires_at > %s)")
    params.append(now)
    if since is not None:
        parts.append("v.observed_at >= %s")
        params.append(since)
    if until is not None:
        parts.append("v.observed_at <= %s")
        params.append(until)
    return " AND ".join(parts), params


def _best(rows: list[dict[str, Any]], k: int) -> list[tuple[str, float]]:
    # relaxed_order may return neighbours slightly out of order: sort by exact score
    scored = sorted(((r["id"], -float(r["d"])) for r in rows), key=lambda x: (-x[1], x[0]))
    return scored[:k]


__all__ = ["PgVectorIndex"]
