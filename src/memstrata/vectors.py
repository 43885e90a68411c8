"""Vectors for facts and episodes: stored with their rows, searched after filtering.

Contract:
- A record's vector is written in the same transaction as the record (the
  caller embeds *before* opening the transaction, in batches) and deleted
  with it (schema trigger), so forget removes vectors too.
- The store records the embedder's model name and dims (``meta`` table). A
  store opened with a different embedder refuses vector search and writes
  (:class:`ConfigError` with the hint to run ``memstrata reindex``) instead of
  mixing vector spaces; :meth:`VectorIndex.reindex` re-embeds everything.
- Search applies the same filter as every read — tenant, scope, readers,
  expiry, dates — as a mask over candidate rows *before* ranking, so a
  foreign record can never take a slot in the top k.
- SQLite: an in-process matrix per (tenant, layer), loaded once and
  refreshed incrementally (new rowids; a generation counter bumped by
  deletes forces a reload), searched by exact dot product with numpy.
  PostgreSQL supplies its own index (pgvector HNSW) through the same API.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from .clock import from_text
from .errors import ConfigError
from .models import Scope
from .scoping import load_json_list
from .store.base import Database, Tx

if TYPE_CHECKING:
    from .embeddings import Embedder

_NONE = 0  # code of "field not set" in the scope-code arrays
#: Above this many vectors in one block, search runs in two stages: a scan of a
#: low-dimensional projection (the top principal directions of the vectors), then an exact
#: re-rank of the best candidates with the full vectors. At 1M x 384 float32 an exact scan
#: reads 1.5 GB per query; the projection reads a third of that.
PROJECT_ABOVE = 50_000
PROJECT_DIMS = 64
RERANK = 1_000
_blas: Any = None


def single_threaded_blas() -> Any:
    """A context in which BLAS runs on one thread. One query's matrix-vector products are
    memory-bound; waking a second BLAS thread costs more than it saves, and on a busy
    machine it costs milliseconds (measured: 100k x 64 scan 0.8 ms on one thread, 8 ms
    on two under load)."""
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController

        _blas = ThreadpoolController()
    return _blas.limit(limits=1, user_api="blas")


@dataclass
class _Block:
    """The cached vectors of one (tenant, layer)."""

    dims: int
    ids: list[str] = field(default_factory=list)
    mat: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    n: int = 0
    user: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    project: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    agent: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    expires: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    observed: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    restricted: dict[int, list[str]] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    max_rowid: int = 0
    generation: str = ""
    proj: np.ndarray | None = None
    low: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    low_n: int = 0
    _masks: dict[tuple[Any, ...], np.ndarray] = field(default_factory=dict)
    _min_expiry: tuple[int, float] = (-1, math.inf)

    def scope_mask(self, scope: Scope, principal: str | None) -> np.ndarray:
        """Rows whose scope applies to ``scope`` and that ``principal`` may read; cached
        until the block grows (scope and readers of a stored row never change)."""
        key = (scope.user, scope.project, scope.agent, principal, self.n)
        cached = self._masks.get(key)
        if cached is not None:
            return cached
        n = self.n
        mask = np.ones(n, bool)
        for arr, value in ((self.user, scope.user), (self.project, scope.project),
                           (self.agent, scope.agent)):
            code = self.codes.get(value) if value is not None else None
            col = arr[:n]
            mask &= (col == _NONE) | (col == code) if code is not None else (col == _NONE)
        for j, readers in self.restricted.items():
            if j < n and principal not in readers:
                mask[j] = False
        if len(self._masks) > 64:
            self._masks.clear()
        self._masks[key] = mask
        return mask

    def min_expiry(self, n: int) -> float:
        """The earliest expiry among the first ``n`` rows (inf when nothing expires)."""
        if self._min_expiry[0] != n:
            self._min_expiry = (n, float(self.expires[:n].min()) if n else math.inf)
        return self._min_expiry[1]

    def refresh_projection(self) -> None:
        """Keep the low-dimensional copy in step with the matrix (built once past the
        threshold from a sample; new rows are projected as they arrive)."""
        if self.n < PROJECT_ABOVE or self.dims <= PROJECT_DIMS:
            return
        if self.proj is None:
            sample = self.mat[: self.n : max(1, self.n // 20_000)]
            # uncentred SVD: the directions that carry most of the inner products
            _, _, vt = np.linalg.svd(sample, full_matrices=False)
            self.proj = np.ascontiguousarray(vt[:PROJECT_DIMS].T, dtype=np.float32)
            self.low = np.zeros((self.mat.shape[0], PROJECT_DIMS), np.float32)
            done = 0
        else:
            done = self.low_n
            if self.low.shape[0] < self.mat.shape[0]:
                low = np.zeros((self.mat.shape[0], PROJECT_DIMS), np.float32)
                low[:done] = self.low[:done]
                self.low = low
        for start in range(done, self.n, 65_536):
            end = min(self.n, start + 65_536)
            self.low[start:end] = self.mat[start:end] @ self.proj
        self.low_n = self.n

    def code(self, value: str | None) -> int:
        if value is None:
            return _NONE
        return self.codes.setdefault(value, len(self.codes) + 1)

    def grow(self, extra: int) -> None:
        need = self.n + extra
        if need <= self.mat.shape[0]:
            return
        cap = max(need, int(self.mat.shape[0] * 1.5) + 1024)
        mat = np.zeros((cap, self.dims), np.float32)
        if self.n:
            mat[: self.n] = self.mat[: self.n]
        self.mat = mat
        for name, dtype, fill in (("user", np.int32, 0), ("project", np.int32, 0),
                                  ("agent", np.int32, 0), ("expires", np.float64, math.inf),
                                  ("observed", np.float64, 0.0)):
            arr = np.full(cap, fill, dtype)
            arr[: self.n] = getattr(self, name)[: self.n]
            setattr(self, name, arr)


def _epoch(value: Any, default: float) -> float:
    dt = from_text(value)
    return dt.timestamp() if dt is not None else default


class VectorIndex:
    """Embeds records and finds nearest neighbours within a filter (SQLite backend)."""

    def __init__(self, db: Database, embedder: Embedder) -> None:
        self.db = db
        self.embedder = embedder
        self._blocks: dict[tuple[str, str], _Block] = {}
        self._lock = threading.Lock()
        self._checked = False

    # -- model identity -------------------------------------------------
    def check_model(self, tx: Tx) -> None:
        """Record the model on first use; refuse a different one afterwards."""
        if self._checked:
            return
        name, dims = self.embedder.model_name, self.embedder.dims
        row = tx.one("SELECT value FROM meta WHERE key = 'embedding_model'")
        if row is None:
            if tx.one("SELECT 1 AS x FROM vectors LIMIT 1") is None:
                tx.execute("INSERT INTO meta (key, value) VALUES ('embedding_model', ?) "
                           "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                           (f"{name}:{dims}",))
                self._checked = True
                return
            raise ConfigError("the store has vectors of an unrecorded model",
                              hint="run `memstrata reindex` to re-embed with " + name)
        if row["value"] != f"{name}:{dims}":
            raise ConfigError(
                f"the store's vectors were made by {row['value']}, not {name}:{dims}",
                hint="run `memstrata reindex` to re-embed, or open with the original embedder",
            )
        self._checked = True

    # -- writes -----------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)

    def add(self, tx: Tx, table: str, tenant: str, ids: Sequence[str], vectors: Any) -> None:
        self.check_model(tx)
        mat = np.asarray(vectors, dtype=np.float32)
        tx.executemany(
            "INSERT INTO vectors (tenant, record_id, layer, model, dims, vec) VALUES "
            "(?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, record_id) DO UPDATE SET vec = excluded.vec",
            [(tenant, rid, table, self.embedder.model_name, mat.shape[1], mat[i].tobytes())
             for i, rid in enumerate(ids)],
        )

    # -- search -----------------------------------------------------------
    def _generation(self, tx: Tx) -> str:
        row = tx.one("SELECT value FROM meta WHERE key = 'vector_generation'")
        return str(row["value"]) if row else "0"

    def _block(self, tx: Tx, tenant: str, table: str) -> _Block:
        key = (tenant, table)
        gen = self._generation(tx)
        with self._lock:
            block = self._blocks.get(key)
            if block is None or block.generation != gen:
                block = _Block(dims=self.embedder.dims, generation=gen)
                self._blocks[key] = block
            obs_col = "observed_at" if table == "episodes" else "created_at"
            rows = tx.all(
                f"SELECT v.rowid AS rid, v.record_id, v.vec, r.s_user, r.s_project, r.s_agent, "
                f"r.expires_at, r.{obs_col} AS observed, r.readers FROM vectors v "
                f"JOIN {table} r ON r.tenant = v.tenant AND r.id = v.record_id "
                # rowid range first (the "+" keeps the planner off the tenant index, which
                # would scan every vector of the tenant to find the few new ones)
                "WHERE v.rowid > ? AND +v.tenant = ? AND +v.layer = ? ORDER BY v.rowid",
                (block.max_rowid, tenant, table),
            )
            if rows:
                block.grow(len(rows))
                vecs = np.frombuffer(b"".join(r["vec"] for r in rows), dtype=np.float32)
                start = block.n
                block.mat[start:start + len(rows)] = vecs.reshape(len(rows), block.dims)
                for i, r in enumerate(rows):
                    j = start + i
                    block.ids.append(r["record_id"])
                    block.user[j] = block.code(r["s_user"])
                    block.project[j] = block.code(r["s_project"])
                    block.agent[j] = block.code(r["s_agent"])
                    block.expires[j] = _epoch(r["expires_at"], math.inf)
                    block.observed[j] = _epoch(r["observed"], 0.0)
                    if r["readers"] is not None:
                        block.restricted[j] = load_json_list(r["readers"]) or []
                block.n += len(rows)
                block.max_rowid = int(rows[-1]["rid"])
            block.refresh_projection()
            return block

    def search(self, tx: Tx, table: str, scope: Scope, principal: str | None, query: str,
               k: int, *, now: datetime, since: datetime | None = None,
               until: datetime | None = None, qvec: np.ndarray | None = None,
               extra_mask: Callable[[list[str]], set[str]] | None = None,
               ) -> list[tuple[str, float]]:
        """(id, cosine) of the k nearest records that pass the filter."""
        self.check_model(tx)
        block = self._block(tx, scope.tenant, table)
        if block.n == 0:
            return []
        if qvec is None:
            qvec = self.embedder.embed_query(query)
        n = block.n
        mask = block.scope_mask(scope, principal).copy()
        if block.min_expiry(n) <= now.timestamp():
            mask &= block.expires[:n] > now.timestamp()
        if since is not None:
            mask &= block.observed[:n] >= since.timestamp()
        if until is not None:
            mask &= block.observed[:n] <= until.timestamp()
        idx = np.arange(n) if mask.all() else np.flatnonzero(mask)
        if idx.size == 0:
            return []
        with single_threaded_blas():
            return self._nearest(block, idx, n, qvec, k)

    def _nearest(self, block: _Block, idx: np.ndarray, n: int, qvec: np.ndarray,
                 k: int) -> list[tuple[str, float]]:
        if block.proj is not None and idx.size > RERANK * 4:
            # two stages: scan the projection, re-rank the best candidates exactly
            low_q = qvec @ block.proj
            coarse = block.low[:n] @ low_q if idx.size == n else block.low[idx] @ low_q
            keep = np.argpartition(-coarse, RERANK - 1)[:RERANK]
            idx = keep if idx.size == n else idx[keep]
            scores = block.mat[idx] @ qvec
            n_all = -1  # idx now indexes rows directly
        else:
            # all rows pass (one big scope): skip the gather copy of the whole matrix
            scores = block.mat[:n] @ qvec if idx.size == n else block.mat[idx] @ qvec
            n_all = n
        take = min(k, scores.size)
        top = np.argpartition(-scores, take - 1)[:take]
        top = top[np.argsort(-scores[top])]
        rows = top if idx.size == n_all else idx[top]
        return [(block.ids[int(j)], float(scores[int(t)])) for j, t in zip(rows, top, strict=True)]

    def fact_scores(self, tx: Tx, where: str, params: Sequence[Any], qvec: np.ndarray,
                    limit: int) -> list[tuple[str, float]]:
        """(id, cosine) of facts passing ``where`` (alias ``r``), best first. Facts are few
        per scope (the current set is loaded whole), so this is exact."""
        self.check_model(tx)
        rows = tx.all(f"SELECT r.id AS id, v.vec AS vec FROM facts r JOIN vectors v ON "
                      f"v.tenant = r.tenant AND v.record_id = r.id WHERE {where} LIMIT 5000",
                      params)
        if not rows:
            return []
        mat = np.frombuffer(b"".join(r["vec"] for r in rows), np.float32).reshape(len(rows), -1)
        scores = mat @ qvec
        order = np.argsort(-scores)[:limit]
        return [(rows[int(i)]["id"], float(scores[int(i)])) for i in order]

    def similar_facts(self, scope: Scope, kind: str, claim: str,
                      threshold: float) -> list[tuple[str, float]]:
        """Active/pending facts of exactly this scope and kind with cosine >= threshold."""
        qvec = self.embedder.embed_query(claim)
        with self.db.transaction(scope.tenant, write=False) as tx:
            self.check_model(tx)
            rows = tx.all(
                "SELECT f.id, v.vec FROM facts f JOIN vectors v ON v.tenant = f.tenant AND "
                "v.record_id = f.id WHERE f.tenant = ? AND f.scope_key = ? AND f.kind = ? "
                "AND f.status IN ('active', 'pending_review')",
                (scope.tenant, scope.key, kind),
            )
        out = []
        for r in rows:
            score = float(np.frombuffer(r["vec"], dtype=np.float32) @ qvec)
            if score >= threshold:
                out.append((r["id"], score))
        return sorted(out, key=lambda x: -x[1])

    def invalidate(self) -> None:
        with self._lock:
            self._blocks.clear()

    def reindex(self, progress: Callable[[int, int], None] | None = None,
                batch: int = 256) -> int:
        """Re-embed every fact and episode with the current embedder."""
        from .episodes import Episodes

        with self.db.transaction("default", write=False) as tx:
            facts = tx.all("SELECT tenant, id, claim, subject, attribute, kind FROM facts")
            eps = tx.all("SELECT tenant, id, event, text, outcome, subject, observed_at, "
                         "scope_key, source FROM episodes "
                         "ORDER BY tenant, scope_key, source, observed_at, id")
        items: list[tuple[str, str, str, str]] = []
        for f in facts:
            items.append(("facts", f["tenant"], f["id"], f["claim"]))
        prev: tuple[Any, ...] | None = None
        prev_line = ""
        for e in eps:
            # the same text an append embeds: the previous line of the thread, then this one
            thread = (e["tenant"], e["scope_key"], e["source"])
            line = Episodes.line(e)
            text = f"{prev_line}\n{line}" if thread == prev and prev_line else line
            items.append(("episodes", e["tenant"], e["id"], text))
            prev, prev_line = thread, line
        total = len(items)
        with self.db.transaction("default") as tx:
            tx.execute("DELETE FROM vectors")
            tx.execute("DELETE FROM meta WHERE key = 'embedding_model'")
            self._checked = False
            self.check_model(tx)
        done = 0
        for start in range(0, total, batch):
            chunk = items[start:start + batch]
            vecs = self.embed([c[3] for c in chunk])
            with self.db.transaction("default") as tx:
                for (table, tenant, rid, _), vec in zip(chunk, vecs, strict=True):
                    self.add(tx, table, tenant, [rid], vec[None, :])
            done += len(chunk)
            if progress:
                progress(done, total)
        with self.db.transaction("default") as tx:
            bump_generation(tx)
        self.invalidate()
        return total


def bump_generation(tx: Tx) -> None:
    tx.execute("INSERT INTO meta (key, value) VALUES ('vector_generation', '1') "
               "ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)")


def make_vector_index(db: Database, embedder: Embedder) -> VectorIndex:
    factory = getattr(db, "vector_index", None)
    if factory is not None:
        index: VectorIndex = factory(embedder)
        return index
    return VectorIndex(db, embedder)


__all__ = ["VectorIndex", "bump_generation", "make_vector_index"]
