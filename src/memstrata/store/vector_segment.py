"""The vectors of one (tenant, layer) as arrays a search masks and scans: in memory, or in
memory-mapped files beside the SQLite store so that a new process opens them instead of
loading them.

Contract:
- A :class:`Segment` holds rows in the order of their ``vectors`` rowid: the vector, its
  low-dimensional projection (past ``PROJECT_ABOVE`` rows), the record id, scope codes,
  expiry and observed time (epoch seconds), readers (for the few restricted rows) and an
  ``alive`` flag. Rows are appended, never rewritten, except by :meth:`Segment.scrub`, which
  overwrites a row's vector, projection and id with zeros and marks it dead: a forgotten
  record's vector is removed from the files as well as from the database.
- Nothing in the files names a user, project, agent or reader that no live row uses (an
  erasure leaves no name on disk): before a scrub touches the rows, it overwrites in place
  each line of ``P.codes`` whose name no row that stays alive uses, with its code as a JSON
  number padded with spaces (codes are never renumbered: a surviving row decodes to the
  same names; an earlier version reads the line as a name no row has), and each line of
  ``P.readers`` of a row that dies, with ``[slot, []]`` padded. The files keep their length
  and line breaks, so the header's byte counts hold at every step of a crash, and a crash
  before the rows die leaves them alive for the next scrub to find again. The header's
  ``erased`` count, raised as soon as the lines are written, tells other processes to read
  both files anew before they write. What a crashed writer left past the header's counts
  is cut off by the scrub too. A name shorter than its code's digits (``"x"`` at code
  1000) cannot be overwritten so: the files are removed (:class:`SegmentGone`) and rebuilt
  from the database, which no longer holds the name.
- The database stays the truth; these files are a cache of it. :meth:`Segment.open`
  returns ``None`` for files that do not match the store (another store's id, another
  model or dims, a broken header, a file shorter than its header says) and the caller
  rebuilds them from the database; files found broken later raise :class:`SegmentBroken`,
  which the caller treats as removed ones. Growing a file reserves its space on disk, so
  a full disk is an ``OSError`` (the caller searches from memory), not a SIGBUS.
- File layout, for the path prefix ``P``: ``P.vec`` (float32, capacity x dims), ``P.rows``
  (the structured :data:`ROW` array), ``P.low`` (float32, capacity x ``PROJECT_DIMS``),
  ``P.proj.npy`` (the projection), ``P.codes`` and ``P.readers`` (JSON lines, appended,
  overwritten only as above) and ``P.json``, the header: how many rows, up to which rowid,
  the generation reconciled, how many bytes of the two line files are valid and how often
  their lines were overwritten (``erased``; missing from earlier versions' files: never).
  The header is replaced atomically after the data it describes is flushed, so a reader
  or a crash never trusts a row it does not cover. Writers hold an exclusive ``flock`` on
  ``P.lock`` and catch up on what another process wrote before they write.
- Ids that are not ASCII of at most 32 bytes cannot be stored in ``P.rows``; a segment
  that meets one stays in memory (:class:`SegmentUnfit`).
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap
import os
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .vector_io import (
    allocate,
    append_lines,
    cut,
    files_on_disk,
    overwrite_lines,
    read_header,
    remove_files,
    segment_name,
)

#: Above this many rows, search runs in two stages: a scan of a low-dimensional projection
#: (the top principal directions of the vectors), then an exact re-rank of the best
#: candidates with the full vectors. At 1M x 384 float32 an exact scan reads 1.5 GB per
#: query; the projection reads a sixth of that (at 20k rows, quiet machine: 6 ms a query
#: exact).
PROJECT_ABOVE = 10_000
PROJECT_DIMS = 64
NONE_CODE = 0  # code of "field not set" in the scope-code columns
FORMAT = 1
ROW = np.dtype([("rowid", "<i8"), ("id", "S32"), ("user", "<i4"), ("project", "<i4"),
                ("agent", "<i4"), ("expires", "<f8"), ("observed", "<f8"), ("alive", "u1")])


class SegmentUnfit(Exception):
    """A row that the files cannot hold (an id longer than 32 bytes or not ASCII)."""


class SegmentGone(Exception):
    """The segment's files were removed (a reindex in another process): rebuild them."""


class SegmentBroken(SegmentGone):
    """The files disagree with their header (a truncated or garbled file, a header missing
    a field): rebuild them from the database, like removed ones."""


@dataclass(frozen=True)
class NewRow:
    """One vector row read from the database, ready to append."""

    rowid: int
    record_id: str
    vec: bytes
    user: str | None
    project: str | None
    agent: str | None
    expires: float
    observed: float
    readers: list[str] | None


class Segment:
    """The rows of one (tenant, layer); file-backed when ``prefix`` is given."""

    def __init__(self, dims: int, prefix: Path | None = None, *, store: str = "",
                 model: str = "", tenant: str = "", layer: str = "") -> None:
        self.dims = dims
        self.prefix = prefix
        self.store = store
        self.model = model
        self.tenant = tenant
        self.layer = layer
        self.epoch = secrets.token_hex(8)
        self.n = 0
        self.cap = 0
        self.max_rowid = 0
        self.generation = -1
        self.low_n = 0
        self.vec = np.zeros((0, dims), np.float32)
        self.rows = np.zeros(0, ROW)
        self.low = np.zeros((0, PROJECT_DIMS), np.float32)
        #: The file mappings behind vec, rows and low (none in memory).
        self._maps: tuple[np.memmap[Any, Any], ...] = ()
        self.proj: np.ndarray | None = None
        self.codes: dict[str, int] = {}
        self.restricted: dict[int, list[str]] = {}
        #: Lines of the scope-code file (each a code, overwritten ones included).
        self._ncodes = 0
        self._codes_bytes = 0
        self._readers_bytes = 0
        #: The header's count of line overwrites this segment has read the files after.
        self._erased = 0
        self._masks: dict[tuple[Any, ...], np.ndarray] = {}
        self._min_expiry: tuple[int, float] = (-1, math.inf)
        #: :meth:`residual_norms`, for the projection it was computed with.
        self._residuals: tuple[Any, np.ndarray] = (None, np.zeros(0, np.float32))

    # -- files ------------------------------------------------------------
    def _path(self, suffix: str) -> Path:
        assert self.prefix is not None
        return self.prefix.with_name(self.prefix.name + suffix)

    @classmethod
    def create(cls, dims: int, prefix: Path, *, store: str, model: str, tenant: str,
               layer: str) -> Segment:
        """New empty files (replacing whatever does not belong to this store and model at
        ``prefix``; files another process made meanwhile are used instead)."""
        seg = cls(dims, prefix, store=store, model=model, tenant=tenant, layer=layer)
        prefix.parent.mkdir(parents=True, exist_ok=True)
        with seg.locked(catch_up=False):
            head = seg._read_header()
            if seg._belongs(head):
                assert head is not None
                try:
                    seg._adopt(head)  # another process made them first: use its files
                    return seg
                except (SegmentBroken, FileNotFoundError):
                    seg = cls(dims, prefix, store=store, model=model, tenant=tenant,
                              layer=layer)  # broken: made anew below
            for suffix in (".vec", ".rows", ".low", ".codes", ".readers", ".proj.npy"):
                with contextlib.suppress(FileNotFoundError):
                    seg._path(suffix).unlink()
            for suffix in (".vec", ".rows", ".low", ".codes", ".readers"):
                seg._path(suffix).touch()
            seg._write_header()
        return seg

    @classmethod
    def open(cls, dims: int, prefix: Path, *, store: str, model: str) -> Segment | None:
        """The segment in the files at ``prefix``, or None when they are missing or do not
        belong to this store, model and dims."""
        seg = cls(dims, prefix, store=store, model=model)
        head = seg._read_header()
        if not seg._belongs(head):
            return None
        assert head is not None
        try:
            seg._adopt(head)
        except (OSError, SegmentBroken):
            return None
        return seg

    def _belongs(self, head: dict[str, Any] | None) -> bool:
        """Whether a header describes files of this store, model and dims."""
        return head is not None and head.get("format") == FORMAT and \
            head.get("store") == self.store and head.get("model") == self.model and \
            head.get("dims") == self.dims

    def _read_header(self) -> dict[str, Any] | None:
        return read_header(self._path(".json"))

    def _write_header(self) -> None:
        head = {"format": FORMAT, "store": self.store, "model": self.model, "dims": self.dims,
                "tenant": self.tenant, "layer": self.layer,
                "epoch": self.epoch, "n": self.n, "cap": self.cap, "max_rowid": self.max_rowid,
                "generation": self.generation, "low_n": self.low_n,
                "codes_bytes": self._codes_bytes, "readers_bytes": self._readers_bytes,
                "erased": self._erased}
        tmp = self._path(f".json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(head))
        os.replace(tmp, self._path(".json"))

    def _map(self, cap: int, *, grow: bool = True) -> None:
        """Map the data files at capacity ``cap``: grown on disk if smaller when ``grow``
        (the space is allocated, so a full disk is an OSError here, never a SIGBUS at a
        write through the mapping), else SegmentBroken (a header's files are never short)."""
        for suffix, width in ((".vec", self.dims * 4), (".rows", ROW.itemsize),
                              (".low", PROJECT_DIMS * 4)):
            path = self._path(suffix)
            size = path.stat().st_size
            if size < cap * width:
                if not grow:
                    raise SegmentBroken(f"{path.name} holds {size} bytes, its header "
                                        f"{cap * width}")
                allocate(path, size, cap * width)
        self.cap = cap
        if cap == 0:
            self._maps = ()
            return
        self._maps = (np.memmap(self._path(".vec"), np.float32, "r+", shape=(cap, self.dims)),
                      np.memmap(self._path(".rows"), ROW, "r+", shape=(cap,)),
                      np.memmap(self._path(".low"), np.float32, "r+",
                                shape=(cap, PROJECT_DIMS)))
        # plain views of the mappings: indexing a np.memmap runs Python code per access (at
        # 20k episodes 163 such calls a recall, 0.9 ms of it under cProfile); the maps are
        # kept for flushing
        self.vec, self.rows, self.low = (m.view(np.ndarray) for m in self._maps)

    def _adopt(self, head: dict[str, Any]) -> None:
        """Take what another writer (or an earlier process) put in the files (SegmentBroken
        when they disagree with the header)."""
        try:
            self._take(head)
        except (KeyError, TypeError, ValueError) as exc:  # a garbled header or line file
            raise SegmentBroken(f"{self.prefix}: {exc}") from exc

    def _take(self, head: dict[str, Any]) -> None:
        for suffix, key in ((".codes", "codes_bytes"), (".readers", "readers_bytes")):
            if self._path(suffix).stat().st_size < int(head[key]):
                raise SegmentBroken(f"{self._path(suffix).name} is shorter than its header")
        if head.get("epoch") != self.epoch:  # new files: start from their beginning
            self.epoch = str(head["epoch"])
            self.tenant, self.layer = str(head.get("tenant", "")), str(head.get("layer", ""))
            self.generation = int(head["generation"])
            self.n = self.max_rowid = self.low_n = 0
            self.cap = 0
            self._erased = -1  # the line files are read from their beginning below
            self.proj = None
            # the caches are keyed by row count and generation, which new files may repeat
            self._masks.clear()
            self._min_expiry = (-1, math.inf)
        erased = int(head["erased"])
        if erased != self._erased:
            # new files, or lines overwritten by another writer's scrub: read them anew
            self.codes, self.restricted, self._ncodes = {}, {}, 0
            self._codes_bytes = self._readers_bytes = 0
            self._masks.clear()
        if int(head["cap"]) != self.cap:
            self._map(int(head["cap"]), grow=False)
        with self._path(".codes").open("rb") as f:
            f.seek(self._codes_bytes)
            for line in f.read(int(head["codes_bytes"]) - self._codes_bytes).splitlines():
                name = json.loads(line)
                self._ncodes += 1
                if isinstance(name, str):  # else an overwritten line: a code nothing uses
                    if name in self.codes:
                        raise SegmentBroken(f"{self._path('.codes').name} names {name!r} "
                                            "twice")
                    self.codes[name] = self._ncodes
        with self._path(".readers").open("rb") as f:
            f.seek(self._readers_bytes)
            for line in f.read(int(head["readers_bytes"]) - self._readers_bytes).splitlines():
                slot, readers = json.loads(line)
                self.restricted[int(slot)] = [str(r) for r in readers]
        if int(head["low_n"]) and self.proj is None:
            self.proj = np.load(self._path(".proj.npy"))
        self._codes_bytes = int(head["codes_bytes"])
        self._readers_bytes = int(head["readers_bytes"])
        self.n, self.max_rowid = int(head["n"]), int(head["max_rowid"])
        self.low_n = int(head["low_n"])
        self.generation = max(self.generation, int(head["generation"]))
        self._erased = erased

    @contextlib.contextmanager
    def locked(self, *, catch_up: bool = True) -> Iterator[None]:
        """Exclusive use of the files (a no-op in memory); catches up with the files first
        (SegmentGone when they were removed)."""
        if self.prefix is None:
            yield
            return
        import fcntl

        with self._path(".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                head = self._read_header() if catch_up else None
                if head is None and catch_up:
                    raise SegmentGone(str(self.prefix))
                if head is not None and (head.get("epoch") != self.epoch
                                         or int(head["n"]) != self.n
                                         or int(head["generation"]) > self.generation
                                         or head["erased"] != self._erased):
                    self._adopt(head)
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def refresh(self) -> None:
        """Catch up with rows another process appended to the files (no lock: the header
        is replaced atomically after its data)."""
        if self.prefix is None:
            return
        head = self._read_header()
        if head is not None and (head.get("epoch") != self.epoch or int(head["n"]) > self.n
                                 or head["erased"] != self._erased):
            self._adopt(head)

    # -- writes (inside locked()) -------------------------------------------
    def code(self, value: str | None, new: list[str]) -> int:
        if value is None:
            return NONE_CODE
        code = self.codes.get(value)
        if code is None:
            self._ncodes += 1
            code = self.codes[value] = self._ncodes
            new.append(value)
        return code

    def append(self, batch: Sequence[NewRow]) -> None:
        """Append rows newer than ``max_rowid`` (older ones are already here)."""
        batch = [r for r in batch if r.rowid > self.max_rowid]
        if not batch:
            return
        for r in batch:
            if len(r.record_id) > 32 or not r.record_id.isascii():
                raise SegmentUnfit(r.record_id)
        need = self.n + len(batch)
        if need > self.cap:
            cap = max(need, int(self.cap * 1.5) + 4096)
            if self.prefix is None:
                self._grow_in_memory(cap)
            else:
                self._map(cap)
        start = self.n
        end = start + len(batch)
        self.vec[start:end] = np.frombuffer(b"".join(r.vec for r in batch),
                                            np.float32).reshape(len(batch), self.dims)
        new_codes: list[str] = []
        readers: list[tuple[int, list[str]]] = []
        block = np.zeros(len(batch), ROW)
        for i, r in enumerate(batch):
            block[i] = (r.rowid, r.record_id.encode(), self.code(r.user, new_codes),
                        self.code(r.project, new_codes), self.code(r.agent, new_codes),
                        r.expires, r.observed, 1)
            if r.readers is not None:
                readers.append((start + i, r.readers))
                self.restricted[start + i] = r.readers
        self.rows[start:end] = block
        self.n = end
        self.max_rowid = batch[-1].rowid
        had_projection, projected = self.proj is not None, self.low_n
        self._project()
        # only the new rows changed, unless the projection was (re)built over older ones
        whole = self.proj is not None and (not had_projection or projected < start)
        if self.prefix is not None:
            self._codes_bytes += append_lines(self._path(".codes"), self._codes_bytes,
                                               [json.dumps(c) for c in new_codes])
            self._readers_bytes += append_lines(self._path(".readers"), self._readers_bytes,
                                                 [json.dumps([s, rd]) for s, rd in readers])
            self._flush_and_commit(None if whole else (start, end))

    def skip_to(self, rowid: int) -> None:
        """Count rowids up to ``rowid`` as read although no row came of them."""
        self.max_rowid = max(self.max_rowid, rowid)
        if self.prefix is not None:
            self._flush_and_commit()

    def scrub(self, slots: np.ndarray, generation: int) -> None:
        """Remove these rows for real (zeros over vector, projection and id; dead), with
        the names and readers no row left alive uses, and record that the files agree with
        the database up to ``generation`` (SegmentGone when a name could not be overwritten
        in place: the files were removed, to be rebuilt)."""
        if self.prefix is not None:
            cut(self._path(".codes"), self._codes_bytes)
            cut(self._path(".readers"), self._readers_bytes)
        if slots.size:
            self._erase(slots)  # first: a crash before the rows die leaves them to find
            self.rows["alive"][slots] = 0
            self.rows["id"][slots] = b""
            self.vec[slots] = 0.0
            if self.low_n:
                self.low[slots] = 0.0
        self.generation = max(self.generation, generation)
        if self.prefix is not None:
            self._flush_and_commit()

    def _erase(self, dying: np.ndarray) -> None:
        """Overwrite the names that no row but ``dying`` ones uses, and the readers of those
        rows, in the line files (flushed) and in memory."""
        names, slots = self.unused(dying)
        if not names and not slots:
            return
        gone = set(slots)
        if self.prefix is not None:
            dead = {code - 1: str(code).encode() for code in names}  # by line

            def blank(_: int, line: bytes) -> bytes | None:
                slot = int(line[1:line.index(b",")]) if line else -1  # [slot, readers]
                return json.dumps([slot, []]).encode() if slot in gone else None

            try:
                fits = not dead or overwrite_lines(self._path(".codes"), self._codes_bytes,
                                                    lambda i, _: dead.get(i))
                if fits and gone:
                    overwrite_lines(self._path(".readers"), self._readers_bytes, blank)
            except ValueError:  # a garbled line: rebuilt
                fits = False
            if not fits:  # or a name shorter than its code's digits
                remove_files(self.prefix)
                raise SegmentGone(f"{self.prefix}: names could not be overwritten in place")
        # new dicts, not edits: a search in another thread may be reading the old ones
        self.codes = {name: code for name, code in self.codes.items() if code not in names}
        self.restricted = {j: rd for j, rd in self.restricted.items() if j not in gone}
        self._masks.clear()
        self._erased += 1
        if self.prefix is not None:
            # at once, not after the rows' flush: a writer that read the names before must
            # read the files anew before it writes (else it would reuse an erased name's
            # code, which then names nothing)
            self._write_header()

    def _flush_and_commit(self, rows: tuple[int, int] | None = None) -> None:
        """Flush the data (only the pages of ``rows``, a (start, end) range, when given:
        the kernel need not walk a whole 1M-row mapping), then replace the header."""
        for arr in self._maps:
            mapped = getattr(arr, "_mmap", None)
            if rows is None or mapped is None:
                arr.flush()
                continue
            width = arr.itemsize * (arr.shape[1] if arr.ndim == 2 else 1)
            first = rows[0] * width // mmap.ALLOCATIONGRANULARITY * mmap.ALLOCATIONGRANULARITY
            mapped.flush(first, rows[1] * width - first)
        self._write_header()

    def _grow_in_memory(self, cap: int) -> None:
        vec = np.zeros((cap, self.dims), np.float32)
        vec[: self.n] = self.vec[: self.n]
        rows = np.zeros(cap, ROW)
        rows[: self.n] = self.rows[: self.n]
        low = np.zeros((cap, PROJECT_DIMS), np.float32)
        low[: self.low_n] = self.low[: self.low_n]
        self.vec, self.rows, self.low, self.cap = vec, rows, low, cap

    @property
    def unprojected(self) -> bool:
        """Whether rows wait for their projection (files made below the threshold)."""
        return self.n >= PROJECT_ABOVE and self.dims > PROJECT_DIMS and self.low_n < self.n

    def project(self) -> None:
        """Project the rows that lack it now (inside :meth:`locked`)."""
        self._project()
        if self.prefix is not None:
            self._flush_and_commit()

    def _project(self) -> None:
        """Keep the low-dimensional copy in step (built once past the threshold from a
        sample; new rows are projected as they arrive)."""
        if self.n < PROJECT_ABOVE or self.dims <= PROJECT_DIMS:
            return
        if self.proj is None:
            sample = self.vec[: self.n : max(1, self.n // 20_000)]
            # uncentred SVD: the directions that carry most of the inner products
            _, _, vt = np.linalg.svd(np.asarray(sample), full_matrices=False)
            self.proj = np.ascontiguousarray(vt[:PROJECT_DIMS].T, dtype=np.float32)
            if self.prefix is not None:
                tmp = self._path(f".proj.{os.getpid()}.tmp.npy")
                np.save(tmp, self.proj)
                os.replace(tmp, self._path(".proj.npy"))
            self.low_n = 0
        for start in range(self.low_n, self.n, 65_536):
            end = min(self.n, start + 65_536)
            self.low[start:end] = self.vec[start:end] @ self.proj
        self.low_n = self.n

    # -- reads ---------------------------------------------------------------
    def residual_norms(self, n: int) -> np.ndarray:
        """The length of each of the first ``n`` rows' part outside the projection
        (``sqrt(1 - |low|^2)`` of a unit vector): how much of its inner product with a query
        the projection cannot see. Kept in memory for the current projection and extended
        as rows are projected."""
        assert self.proj is not None and n <= self.low_n
        proj, done = self._residuals
        if proj is not self.proj:
            done = np.zeros(0, np.float32)
        if done.size < n:
            low = self.low[done.size:n]
            tail = np.sqrt(np.maximum(0.0, 1.0 - np.einsum("ij,ij->i", low, low)))
            done = np.concatenate([done, tail.astype(np.float32)])
            self._residuals = (self.proj, done)
        return done[:n]

    def scope_mask(self, user: str | None, project: str | None, agent: str | None,
                   principal: str | None) -> np.ndarray:
        """Live rows whose scope applies and that ``principal`` may read; cached until the
        segment grows or a row dies (scope and readers of a stored row never change)."""
        key = (user, project, agent, principal, self.n, self.generation)
        cached = self._masks.get(key)
        if cached is not None:
            return cached
        n = self.n
        rows = self.rows[:n]
        mask: np.ndarray = np.asarray(rows["alive"] == 1)
        for col, value in (("user", user), ("project", project), ("agent", agent)):
            code = self.codes.get(value) if value is not None else None
            arr = rows[col]
            mask &= (arr == NONE_CODE) | (arr == code) if code is not None else \
                (arr == NONE_CODE)
        for j, readers in self.restricted.items():
            if j < n and principal not in readers:
                mask[j] = False
        if len(self._masks) > 64:
            self._masks.clear()
        self._masks[key] = mask
        return mask

    def unused(self, dying: np.ndarray | None = None) -> tuple[dict[int, str], list[int]]:
        """The names (by code) that no live row uses, the ``dying`` rows counted as dead,
        and the dead (or dying) rows whose readers are still held; none once a scrub ran
        (``memstrata doctor`` checks)."""
        alive = self.rows["alive"][: self.n] == 1
        if dying is not None:
            alive[dying] = False
        used = np.zeros(self._ncodes + 1, bool)
        for col in ("user", "project", "agent"):
            codes = self.rows[col][: self.n]
            # a code past the file's (garbled rows) counts as its last: kept, never dropped
            used[np.clip(codes if dying is None and alive.all() else codes[alive], 0,
                         self._ncodes)] = True
        names = {code: name for name, code in self.codes.items() if not used[code]}
        slots = sorted(j for j, readers in self.restricted.items()
                       if readers and j < self.n and not alive[j])
        return names, slots

    def scopes(self, slots: np.ndarray) -> list[tuple[Any, ...]]:
        """(user, project, agent, readers) of these rows as the files decode them (a code
        the scope-code file does not name decodes as ``""``, no name)."""
        names: dict[int, str | None] = {code: name for name, code in self.codes.items()}
        names[NONE_CODE] = None
        rows = self.rows[slots]
        return [(*(names.get(int(r[col]), "") for col in ("user", "project", "agent")),
                 self.restricted.get(int(j))) for j, r in zip(slots.tolist(), rows, strict=True)]

    def min_expiry(self) -> float:
        """The earliest expiry among the rows (inf when nothing expires)."""
        if self._min_expiry[0] != self.n:
            self._min_expiry = (self.n, float(self.rows["expires"][: self.n].min())
                                if self.n else math.inf)
        return self._min_expiry[1]

    def record_ids(self, slots: np.ndarray) -> list[str]:
        """The record ids of these slots, in order (one gather, not one lookup each)."""
        return [b.decode() for b in self.rows["id"][slots].tolist()]


__all__ = ["NONE_CODE", "PROJECT_ABOVE", "PROJECT_DIMS", "ROW", "NewRow", "Segment",
           "SegmentBroken", "SegmentGone", "SegmentUnfit", "files_on_disk", "read_header",
           "remove_files", "segment_name"]
