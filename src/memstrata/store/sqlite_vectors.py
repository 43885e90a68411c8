"""The SQLite vector index: vectors stored beside their rows, searched after filtering.

Contract (:class:`memstrata.store.base.VectorIndex`):
- A record's vector is written in the transaction of its record (the layer embeds
  *before* the transaction opens) and deleted with it (schema trigger), so forget removes
  vectors too. This index never embeds text.
- The store records the model name and dims (``meta``); an index for another model
  refuses search and writes (:class:`ConfigError`, hint ``memstrata reindex``) instead of
  mixing vector spaces, also when another process re-embedded the store after this one
  began (the record is read once in each transaction).
- Search applies the episode read filter — tenant, scope, readers, expiry, dates — as a
  mask over the segment's rows *before* ranking, so a foreign record never takes a slot.
- The episodes of each tenant are searched from a :class:`~.vector_segment.Segment`:
  memory-mapped files in ``<store>-vectors/`` beside a file store once it holds
  ``FILES_ABOVE`` vectors (in memory below that, and for ``:memory:``), so a new process
  opens them instead of loading every vector. The
  ``vectors`` table stays the truth: each search first appends the rows the files lack
  (new rowids; rowids never repeat, ``meta.vector_rowid``), and when the delete counter
  ``vector_generation`` moved (a trigger counts deleted episode vectors), scrubs from the
  files every row the table no longer has (a count first: nothing is scanned when the
  table holds exactly the live rows).
  :meth:`SQLiteVectorIndex.sync` does the same on demand: after a forget or a sweep (so a
  forgotten vector leaves the files at once) and on close (so the next process finds
  the files complete). Exact dot products with numpy; above ``PROJECT_ABOVE`` rows, a
  low-dimensional projection scan then an exact re-rank of ``RERANK`` candidates.
- Facts are scored in the table: the filter runs in SQL and picks ids and vector rowids
  from the indexes; the vectors themselves are read once per process and kept by rowid.
  Checkpoint versions are scored in the table too (``record_scores``: the few a ranking
  selected, read each time).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Sequence
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..clock import from_text
from ..errors import BackendError, ConfigError
from ..scoping import load_json_list
from .base import Nearest, Row, Tx
from .sql import chunks, marks
from .sqlite_meta import clear_meta, write_meta
from .vector_segment import (
    NewRow,
    Segment,
    SegmentGone,
    SegmentUnfit,
    files_on_disk,
    read_header,
    remove_files,
    segment_name,
)

if TYPE_CHECKING:
    from ..models import Scope
    from .base import Database

RERANK = 1_000
#: The share of the bound on what the projection cannot see (``|q_r| |x_r|``) added to a
#: row's coarse score. Agreement of the top 50 with an exact search, 400 LoCoMo questions
#: over 9,598 LoCoMo and docstring sentences (re-ranking 500): 0.9981 at 0, 0.9995 at 0.3;
#: over 12,010 near-identical log lines and 10 rare texts (re-ranking 1,000; 3 of those
#: texts fell out of the candidates, so their paraphrase queries found nothing): top 10
#: 0.8425 at 0, 1.0000 at 0.3 (benchmarks/research/README.md).
RESIDUAL_SHARE = 0.3
#: Rows read from the table per step when the files catch up (bounds the memory of a build).
FETCH = 20_000
#: Segments of fewer vectors stay in memory (read from the table on a process's first
#: search); larger ones get files, so a new process opens them instead of loading.
FILES_ABOVE = 5_000
#: Fact vectors kept in memory by rowid (about 1.5 KB each at 384 dims).
FACT_CACHE = 100_000
#: Scans over at least this many numbers (64 MB of float32) use every BLAS thread.
PARALLEL_SCAN = 1 << 24
_blas: Any = None


def blas_threads(elements: int) -> Any:
    """A context for one query's matrix-vector product over ``elements`` numbers. Such a
    product is memory-bound: below :data:`PARALLEL_SCAN` it runs on one BLAS thread, since
    waking a second costs more than it saves and on a busy machine it costs milliseconds
    (measured: 100k x 64 scan 0.8 ms on one thread, 8 ms on two under load); a larger scan
    keeps every thread (measured, 1M x 64, quiet machine: 38 ms on one, 21-24 ms on two)."""
    global _blas
    if elements >= PARALLEL_SCAN:
        return nullcontext()
    if _blas is None:
        from threadpoolctl import ThreadpoolController

        _blas = ThreadpoolController()
    return _blas.limit(limits=1, user_api="blas")


def largest(values: np.ndarray, count: int) -> np.ndarray:
    """Indices of the ``count`` largest of ``values``, in no order. Past ``64 * count``
    values, a threshold read off a strided sample selects about twice ``count`` of them in
    one comparison pass, and only those are partitioned; the whole array is, as before,
    when the sample's guess falls short. The same set as a full partition (ties at the
    boundary aside), for a fraction of its cost (measured: 1M values, 10 ms partitioned)."""
    n = values.size
    if count >= n:
        return np.arange(n)
    if n >= 64 * count:
        sample = values[:: n // (32 * count)]
        rank = sample.size - 1 - 2 * count * sample.size // n  # twice count, scaled down
        threshold = np.partition(sample, rank)[rank]
        picked = np.flatnonzero(values >= threshold)
        if picked.size >= count:
            return picked[np.argpartition(values[picked], picked.size - count)
                          [picked.size - count:]]
    return np.argpartition(values, n - count)[n - count:]


def _nothing(qvec: np.ndarray) -> list[tuple[str, float]]:
    """The search of a view that holds no row the caller may read."""
    return []


def delete_vectors(tx: Tx, tenant: str, record_ids: Sequence[str]) -> int:
    """Delete these records' vectors (any model) in the caller's transaction; the files
    lose them at the next sync (the delete counter moves)."""
    gone = 0
    for chunk in chunks(list(record_ids)):
        gone += tx.execute(f"DELETE FROM vectors WHERE tenant = ? AND record_id IN "
                           f"({marks(chunk)})", (tenant, *chunk))
    return gone


def _epoch(value: Any, default: float) -> float:
    dt = from_text(value)
    return dt.timestamp() if dt is not None else default


class SQLiteVectorIndex:
    """Finds nearest neighbours within a filter, from vectors stored in the SQLite file."""

    def __init__(self, model: str, dims: int, *, db: Database | None = None,
                 directory: Path | None = None) -> None:
        self.model = model
        self.dims = int(dims)
        #: Where the memory-mapped segments live (None: in memory only).
        self.directory = directory
        self._db = db
        self._segments: dict[tuple[str, str], Segment] = {}
        self._fact_vectors: dict[int, np.ndarray] = {}
        self._written: set[str] = set()
        self._store_id: str | None = None
        self._lock = threading.RLock()
        #: The transactions whose model check passed (each checks once, however many
        #: searches it runs: a recall reads facts and episodes in one).
        self._checked_in: weakref.WeakSet[Tx] = weakref.WeakSet()

    @property
    def _label(self) -> str:
        return f"{self.model}:{self.dims}"

    # -- model identity -------------------------------------------------
    def check_model(self, tx: Tx) -> None:
        """Record the model on first use; refuse a different one afterwards. Read once in every
        transaction that searches or writes (one row by its key): another process may have
        re-embedded the store with another model since."""
        if tx in self._checked_in:
            return
        recorded = self._meta(tx, "embedding_model")
        if recorded is None:
            if tx.one("SELECT 1 AS x FROM vectors LIMIT 1") is None:
                write_meta(tx, "embedding_model", self._label)
                return
            raise ConfigError("the store has vectors of an unrecorded model",
                              hint="run `memstrata reindex` to re-embed with " + self.model)
        if recorded != self._label:
            raise ConfigError(
                f"the store's vectors were made by {recorded}, not {self._label}",
                hint="run `memstrata reindex` to re-embed, or open with the original embedder",
            )
        self._checked_in.add(tx)

    # -- writes -----------------------------------------------------------
    def add(self, tx: Tx, table: str, tenant: str, ids: Sequence[str], vectors: Any) -> None:
        if table not in ("facts", "episodes", "checkpoints"):
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
        # rowids never repeat (a reused rowid would pass for a row the files already hold)
        top = tx.one("SELECT max(rowid) AS m FROM vectors")
        first = max(int(self._meta(tx, "vector_rowid") or 0),
                    int(top["m"] or 0) if top else 0) + 1
        write_meta(tx, "vector_rowid", str(first + len(ids) - 1))
        tx.executemany(
            "INSERT INTO vectors (rowid, tenant, record_id, layer, model, dims, vec) VALUES "
            "(?, ?, ?, ?, ?, ?, ?)",
            [(first + i, tenant, rid, table, self.model, self.dims, mat[i].tobytes())
             for i, rid in enumerate(ids)],
        )
        self._written.add(tenant)

    def clear(self, tx: Tx, tenant: str) -> int:
        removed = tx.execute("DELETE FROM vectors WHERE tenant = ?", (tenant,))
        if tx.one("SELECT 1 AS x FROM vectors LIMIT 1") is None:
            clear_meta(tx, "embedding_model")
        with self._lock:
            for layer in ("episodes", "facts"):
                self._segments.pop((tenant, layer), None)
                if self.directory is not None:
                    remove_files(self.directory / segment_name(tenant, layer))
        self.invalidate()
        return removed

    # -- segments ---------------------------------------------------------
    @staticmethod
    def _meta(tx: Tx, key: str) -> str | None:
        row = tx.one("SELECT value FROM meta WHERE key = ?", (key,))
        return str(row["value"]) if row else None

    def _generation(self, tx: Tx) -> int:
        return int(self._meta(tx, "vector_generation") or 0)

    def _store(self, tx: Tx) -> str:
        """The store's identity (``meta.store_id``): files of another store are not read."""
        if self._store_id is None:
            self._store_id = self._meta(tx, "store_id") or ""
        return self._store_id

    def _segment(self, tx: Tx, tenant: str, layer: str, *, build: bool) -> Segment | None:
        key = (tenant, layer)
        seg = self._segments.get(key)
        if seg is not None:
            return seg
        store = self._store(tx)
        if self.directory is not None and store:
            prefix = self.directory / segment_name(tenant, layer)
            try:
                seg = Segment.open(self.dims, prefix, store=store, model=self._label)
                if seg is not None and (
                        seg.max_rowid > int(self._meta(tx, "vector_rowid") or 0)
                        or seg.generation > self._generation(tx)):
                    # files ahead of the store (files or the database restored from a
                    # backup): what they hold and what they scrubbed may both be wrong
                    remove_files(prefix)
                    seg = None
                if seg is None and build and self._count(tx, tenant, layer) >= FILES_ABOVE:
                    seg = Segment.create(self.dims, prefix, store=store, model=self._label,
                                         tenant=tenant, layer=layer)
                    seg.generation = self._generation(tx)
            except OSError:
                seg = None  # an unwritable directory: this process keeps it in memory
        if seg is None:
            if not build:
                return None
            seg = Segment(self.dims)
            seg.generation = self._generation(tx)
        self._segments[key] = seg
        return seg

    @staticmethod
    def _count(tx: Tx, tenant: str, layer: str) -> int:
        row = tx.one("SELECT count(*) AS n FROM vectors WHERE tenant = ? AND layer = ?",
                     (tenant, layer))
        return int(row["n"]) if row else 0

    def _current(self, tx: Tx, tenant: str, layer: str, *,
                 build: bool = True) -> tuple[Segment | None, int]:
        """The segment, brought up to this transaction's view of the table, and the highest
        rowid that view holds (rows past it, from a newer writer, are masked by search).
        Inside a transaction that may write, what it sees may yet be rolled back (and its
        rowids given out again): the segment is searched as it stands, never extended."""
        gen = self._generation(tx)
        row = tx.one("SELECT max(rowid) AS m FROM vectors WHERE tenant = ? AND layer = ?",
                     (tenant, layer))
        top = int(row["m"] or 0) if row else 0
        if tx.writable:
            with self._lock:
                seg = self._segments.get((tenant, layer))
            return seg, min(top, seg.max_rowid) if seg is not None else top
        with self._lock:
            for _ in range(3):
                seg = self._segment(tx, tenant, layer, build=build)
                if seg is None:
                    return None, top
                try:
                    self._catch_up(tx, seg, tenant, layer, top, gen)
                    return seg, top
                except SegmentGone:
                    self._segments.pop((tenant, layer), None)
                except (SegmentUnfit, OSError):
                    # ids the files cannot hold, or a full disk: keep this one in memory
                    mem = Segment(self.dims)
                    mem.generation = gen
                    self._segments[(tenant, layer)] = mem
            raise ConfigError(f"the vector files in {self.directory} keep changing",
                              hint="another process is rebuilding them; retry")

    def _catch_up(self, tx: Tx, seg: Segment, tenant: str, layer: str, top: int,
                  gen: int) -> None:
        if top > seg.max_rowid:
            seg.refresh()
        if top > seg.max_rowid:
            with seg.locked():
                while top > seg.max_rowid:
                    batch = self._fetch(tx, tenant, layer, seg.max_rowid, top)
                    if not batch:  # only vectors without a record row are left: never found
                        seg.skip_to(top)
                    seg.append(batch)
        if seg.unprojected:
            with seg.locked():
                seg.project()
        if gen > seg.generation:
            # every rowid up to the highest given out was committed before this view began
            # (it is recorded with the rows), so one of them the table lacks is gone, the
            # newest included; rows past it were written after this view, by another process
            given = max(top, int(self._meta(tx, "vector_rowid") or 0))
            with seg.locked():
                rows = seg.rows[: seg.n]
                held = (rows["alive"] == 1) & (rows["rowid"] <= given)
                if gen > seg.generation and self._count(tx, tenant, layer) == int(held.sum()):
                    # every row of the table is held alive (rowids never repeat): none gone
                    seg.scrub(np.zeros(0, np.int64), gen)
                elif gen > seg.generation:
                    live = np.fromiter((r["rid"] for r in tx.all(
                        "SELECT rowid AS rid FROM vectors WHERE tenant = ? AND layer = ?",
                        (tenant, layer))), np.int64)
                    gone = held & ~np.isin(rows["rowid"], live)
                    seg.scrub(np.flatnonzero(gone), gen)

    def _fetch(self, tx: Tx, tenant: str, layer: str, after: int, top: int) -> list[NewRow]:
        obs_col = "observed_at" if layer == "episodes" else "created_at"
        rows = tx.all(
            f"SELECT v.rowid AS rid, v.record_id, v.vec, r.s_user, r.s_project, r.s_agent, "
            f"r.expires_at, r.{obs_col} AS observed, r.readers FROM vectors v "
            f"CROSS JOIN {layer} r ON r.tenant = v.tenant AND r.id = v.record_id "
            # rowid range first (the "+" keeps the planner off the tenant index, which
            # would scan every vector of the tenant to find the few new ones)
            "WHERE v.rowid > ? AND v.rowid <= ? AND +v.tenant = ? AND +v.layer = ? "
            "ORDER BY v.rowid LIMIT ?",
            (after, top, tenant, layer, FETCH))
        out = [NewRow(rowid=int(r["rid"]), record_id=r["record_id"], vec=r["vec"],
                      user=r["s_user"], project=r["s_project"], agent=r["s_agent"],
                      expires=_epoch(r["expires_at"], math.inf),
                      observed=_epoch(r["observed"], 0.0),
                      readers=(load_json_list(r["readers"]) or [])
                      if r["readers"] is not None else None) for r in rows]
        return out

    def sync(self, tenant: str | None = None) -> None:
        """Bring the files up to date with the table now: scrub what was deleted (after a
        forget or a sweep) and append what was written (on close), for ``tenant`` or for
        every tenant this process wrote or whose files exist."""
        # fact vectors kept by rowid: a forgotten fact's must not outlive it in memory
        self._fact_vectors.clear()
        if self._db is None:
            return
        tenants = {tenant} if tenant is not None else self._tenants_on_disk() | self._written \
            | {t for t, _ in self._segments}
        for t in sorted(tenants):
            with self._db.transaction(t, write=False) as tx:
                self.check_model(tx)
                seg, _ = self._current(tx, t, "episodes", build=t in self._written)
                if seg is not None and seg.prefix is None and self._has_files(tx, t, "episodes"):
                    # the files could not be written (the search goes on from memory):
                    # what they hold was not brought up to date, a forgotten vector included
                    raise BackendError(
                        f"the vector files in {self.directory} could not be updated",
                        hint="make the folder writable (or free space), or delete it: it is "
                             "a cache the next search rebuilds from the database")
        self._written -= tenants

    def _has_files(self, tx: Tx, tenant: str, layer: str) -> bool:
        """Whether files of this store and model hold the segment (a header says so)."""
        if self.directory is None:
            return False
        head = read_header(self.directory / (segment_name(tenant, layer) + ".json"))
        return head is not None and head["store"] == self._store(tx) and \
            head["model"] == self._label

    def _tenants_on_disk(self) -> set[str]:
        return {t for t, label in files_on_disk(self.directory) if label == self._label}

    def search(self, tx: Tx, scope: Scope, principal: str | None, qvec: np.ndarray, k: int, *,
               now: datetime, since: datetime | None = None,
               until: datetime | None = None) -> list[tuple[str, float]]:
        """(id, cosine) of the k nearest episodes that pass the filter."""
        return self.prepare_search(tx, scope, principal, k, now=now, since=since,
                                   until=until)(qvec)

    def prepare_search(self, tx: Tx, scope: Scope, principal: str | None, k: int, *,
                       now: datetime, since: datetime | None = None,
                       until: datetime | None = None) -> Nearest:
        """:meth:`search` over this transaction's view of the files, as a function of the
        query vector that reads no table (the rows it may return are chosen here)."""
        self.check_model(tx)
        seg, top = self._current(tx, scope.tenant, "episodes")
        if seg is None or seg.n == 0:
            return _nothing
        n = seg.n
        rows = seg.rows[:n]
        mask = seg.scope_mask(scope.user, scope.project, scope.agent, principal).copy()
        if seg.max_rowid > top:
            mask &= rows["rowid"] <= top
        if seg.min_expiry() <= now.timestamp():
            mask &= rows["expires"] > now.timestamp()
        if since is not None:
            mask &= rows["observed"] >= since.timestamp()
        if until is not None:
            mask &= rows["observed"] <= until.timestamp()
        idx = np.arange(n) if mask.all() else np.flatnonzero(mask)
        if idx.size == 0:
            return _nothing

        def nearest(qvec: np.ndarray) -> list[tuple[str, float]]:
            return self._nearest(seg, idx, n, np.asarray(qvec, dtype=np.float32), k)

        return nearest

    @staticmethod
    def _nearest(block: Segment, idx: np.ndarray, n: int, qvec: np.ndarray,
                 k: int) -> list[tuple[str, float]]:
        if block.proj is not None and block.low_n >= n and idx.size > RERANK * 4:
            # two stages: scan the projection, re-rank the best candidates exactly. A row's
            # coarse score is its projected inner product plus a share of what the
            # projection cannot see (the two parts' lengths outside it): a row the
            # projection explains poorly (a rare topic among many alike) is not crowded out
            low_q = qvec @ block.proj
            unseen = RESIDUAL_SHARE * float(np.sqrt(max(0.0, 1.0 - float(low_q @ low_q))))
            resid = block.residual_norms(n)
            with blas_threads(idx.size * low_q.size):
                if idx.size == n:
                    coarse = block.low[:n] @ low_q + unseen * resid
                else:
                    coarse = block.low[idx] @ low_q + unseen * resid[idx]
            keep = largest(coarse, RERANK)
            idx = keep if idx.size == n else idx[keep]
            with blas_threads(0):
                scores = block.vec[idx] @ qvec
            n_all = -1  # idx now indexes rows directly
        else:
            # all rows pass (one big scope): skip the gather copy of the whole matrix
            with blas_threads(idx.size * qvec.size):
                scores = block.vec[:n] @ qvec if idx.size == n else block.vec[idx] @ qvec
            n_all = n
        take = min(k, scores.size)
        top = np.argpartition(-scores, take - 1)[:take]
        top = top[np.argsort(-scores[top])]
        rows = top if idx.size == n_all else idx[top]
        return list(zip(block.record_ids(rows), scores[top].tolist(), strict=True))

    def fact_scores(self, tx: Tx, where: str, params: Sequence[Any], qvec: np.ndarray,
                    limit: int, *, weight: str = "1.0") -> list[tuple[str, float]]:
        """(id, cosine) of facts passing ``where`` (alias ``r``), the ``limit`` best by the
        cosine times ``weight``, best first. Facts are few
        per scope (the current set is scored whole), so this is exact. The filter selects
        ids and vector rowids from the indexes alone; a vector is read from the table once
        per process and kept by its rowid (rowids never repeat, so a replaced vector is a
        new entry, never a stale one)."""
        self.check_model(tx)
        # CROSS JOIN keeps facts the outer loop: driven from vectors, the join would read
        # every vector of the tenant (measured 480 ms against 25 ms at 100k episodes)
        rows = tx.all(f"SELECT r.id AS id, v.rowid AS vr, {weight} AS wt FROM facts r "
                      f"CROSS JOIN vectors v "
                      f"ON v.tenant = r.tenant AND v.record_id = r.id WHERE {where} "
                      "LIMIT 5000", params)
        if not rows:
            return []
        with self._lock:
            # what a transaction that may write reads is not kept: it may be rolled back
            cache = {} if tx.writable else self._fact_vectors
            missing = [int(r["vr"]) for r in rows if int(r["vr"]) not in cache]
            if len(cache) + len(missing) > FACT_CACHE:
                cache.clear()
            for chunk in chunks(missing):
                for r in tx.all(f"SELECT rowid AS vr, vec FROM vectors WHERE rowid IN "
                                f"({marks(chunk)})", chunk):
                    cache[int(r["vr"])] = np.frombuffer(r["vec"], np.float32)
            mat = np.stack([cache[int(r["vr"])] for r in rows])
        scores = mat @ np.asarray(qvec, dtype=np.float32)
        weights = np.fromiter((float(r["wt"]) for r in rows), np.float32, len(rows))
        order = np.argsort(-(scores * weights), kind="stable")[:limit]
        return [(rows[int(i)]["id"], float(scores[int(i)])) for i in order]

    def record_scores(self, tx: Tx, tenant: str, table: str, ids: Sequence[str],
                      qvec: np.ndarray) -> dict[str, float]:
        self.check_model(tx)
        q = np.asarray(qvec, dtype=np.float32)
        found: list[Row] = []
        for chunk in chunks(list(ids)):
            # by the key (tenant, record_id): "+layer" keeps the planner off the segment
            # index (tenant, layer), which before ANALYZE it took, reading every vector of
            # the layer (10 ms for 60 ids at 20k episodes, against 0.3)
            found += tx.all(f"SELECT record_id, vec FROM vectors WHERE tenant = ? AND "
                            f"record_id IN ({marks(chunk)}) AND +layer = ?",
                            (tenant, *chunk, table))
        if not found:
            return {}
        # one product for all of them (a dot product per row costs more than the row)
        mat = np.frombuffer(b"".join(bytes(r["vec"]) for r in found), np.float32)
        scores = mat.reshape(len(found), -1) @ q
        return {r["record_id"]: float(s) for r, s in zip(found, scores.tolist(), strict=True)}

    def invalidate(self) -> None:
        with self._lock:
            self._segments.clear()
            self._fact_vectors.clear()
            self._store_id = None

__all__ = ["SQLiteVectorIndex", "delete_vectors"]
