"""The SQLite vector index: vectors stored beside their rows, searched after filtering.

Contract (:class:`memstrata.store.base.VectorIndex`):
- A record's vector is written in the transaction of its record (the layer embeds
  *before* the transaction opens) and deleted with it (schema trigger), so forget removes
  vectors too. This index never embeds text.
- The store records the model name and dims (``meta``); an index for another model
  refuses search and writes (:class:`ConfigError`, hint ``memstrata reindex``) instead of
  mixing vector spaces.
- Search applies the episode read filter — tenant, scope, readers, expiry, dates — as a
  mask over the cached rows *before* ranking, so a foreign record never takes a slot.
- An in-process matrix per (tenant, layer), loaded once and refreshed incrementally (new
  rowids); deleting or replacing a vector bumps a generation counter (trigger), which
  forces a reload. Exact dot products with numpy; above ``PROJECT_ABOVE`` rows, a
  low-dimensional projection scan then an exact re-rank of ``RERANK`` candidates.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..clock import from_text
from ..errors import ConfigError
from ..scoping import load_json_list
from .base import Tx
from .sql import chunks, marks

if TYPE_CHECKING:
    from ..models import Scope

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


class SQLiteVectorIndex:
    """Finds nearest neighbours within a filter, from vectors stored in the SQLite file."""

    def __init__(self, model: str, dims: int) -> None:
        self.model = model
        self.dims = int(dims)
        self._blocks: dict[tuple[str, str], _Block] = {}
        self._lock = threading.Lock()
        self._checked = False

    @property
    def _label(self) -> str:
        return f"{self.model}:{self.dims}"

    # -- model identity -------------------------------------------------
    def check_model(self, tx: Tx) -> None:
        """Record the model on first use; refuse a different one afterwards."""
        if self._checked:
            return
        row = tx.one("SELECT value FROM meta WHERE key = 'embedding_model'")
        if row is None:
            if tx.one("SELECT 1 AS x FROM vectors LIMIT 1") is None:
                tx.execute("INSERT INTO meta (key, value) VALUES ('embedding_model', ?) "
                           "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                           (self._label,))
                self._checked = True
                return
            raise ConfigError("the store has vectors of an unrecorded model",
                              hint="run `memstrata reindex` to re-embed with " + self.model)
        if row["value"] != self._label:
            raise ConfigError(
                f"the store's vectors were made by {row['value']}, not {self._label}",
                hint="run `memstrata reindex` to re-embed, or open with the original embedder",
            )
        self._checked = True

    # -- writes -----------------------------------------------------------
    def add(self, tx: Tx, table: str, tenant: str, ids: Sequence[str], vectors: Any) -> None:
        if table not in ("facts", "episodes"):
            raise ValueError(table)
        self.check_model(tx)
        mat = np.asarray(vectors, dtype=np.float32)
        if mat.ndim != 2 or mat.shape[0] != len(ids) or mat.shape[1] != self.dims:
            raise ConfigError(f"expected {len(ids)} vectors of {self.dims} dims, "
                              f"got shape {mat.shape}")
        # A replaced vector is deleted first: the delete trigger bumps the generation, so
        # every process reloads instead of serving the cached old vector.
        for chunk in chunks(ids):
            tx.execute(f"DELETE FROM vectors WHERE tenant = ? AND record_id IN ({marks(chunk)})",
                       (tenant, *chunk))
        tx.executemany(
            "INSERT INTO vectors (tenant, record_id, layer, model, dims, vec) VALUES "
            "(?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, record_id) DO UPDATE SET "
            "vec = excluded.vec",
            [(tenant, rid, table, self.model, self.dims, mat[i].tobytes())
             for i, rid in enumerate(ids)],
        )

    def clear(self, tx: Tx, tenant: str) -> int:
        removed = tx.execute("DELETE FROM vectors WHERE tenant = ?", (tenant,))
        if tx.one("SELECT 1 AS x FROM vectors LIMIT 1") is None:
            tx.execute("DELETE FROM meta WHERE key = 'embedding_model'")
        self.invalidate()
        return removed

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
                block = _Block(dims=self.dims, generation=gen)
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

    def search(self, tx: Tx, scope: Scope, principal: str | None, qvec: np.ndarray, k: int, *,
               now: datetime, since: datetime | None = None,
               until: datetime | None = None) -> list[tuple[str, float]]:
        """(id, cosine) of the k nearest episodes that pass the filter."""
        self.check_model(tx)
        block = self._block(tx, scope.tenant, "episodes")
        if block.n == 0:
            return []
        qvec = np.asarray(qvec, dtype=np.float32)
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
                      f"v.tenant = r.tenant AND v.record_id = r.id WHERE {where} "
                      "AND v.model = ? AND v.dims = ? LIMIT 5000",
                      (*params, self.model, self.dims))
        if not rows:
            return []
        mat = np.frombuffer(b"".join(r["vec"] for r in rows), np.float32).reshape(len(rows), -1)
        scores = mat @ np.asarray(qvec, dtype=np.float32)
        order = np.argsort(-scores)[:limit]
        return [(rows[int(i)]["id"], float(scores[int(i)])) for i in order]

    def invalidate(self) -> None:
        with self._lock:
            self._blocks.clear()
            self._checked = False


def bump_generation(tx: Tx) -> None:
    """Make every process reload its cached vectors on its next search."""
    tx.execute("INSERT INTO meta (key, value) VALUES ('vector_generation', '1') "
               "ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)")


__all__ = ["SQLiteVectorIndex", "bump_generation"]
