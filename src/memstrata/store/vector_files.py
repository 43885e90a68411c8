"""The vector files of a SQLite store as a whole (``<store>-vectors/``), beside the index
that searches them (:mod:`memstrata.store.sqlite_vectors`).

Contract:
- :func:`sync_files` scrubs deleted vectors from the files whatever model made them, for
  a process without an embedder (a forget, a sweep through the CLI): the files of the model
  the store records are brought up to date; left-over files of another model are removed.
  BackendError when files could not be written.
- :func:`verify_files` (``memstrata doctor``) only reads: every vector in the table is of
  the recorded model, and each segment's files agree with the table up to the highest
  rowid they hold: the same live rows, the same ids, the same vectors and scopes and
  readers (a sample: vectors byte for byte, scopes decoded to their names), and no user,
  project, agent or reader named that no live row uses (what a forget or sweep left on
  disk). Files behind the table's deletes are looked at again for up to two seconds (a
  forget in another process scrubs them right after its commit), so a check beside a busy
  store does not report that gap. What it finds comes with what to do: the files are a
  cache, rebuilt from the database when the folder is deleted (or by ``memstrata
  reindex``).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..scoping import load_json_list
from .sql import chunks, marks
from .sqlite_vectors import SQLiteVectorIndex
from .vector_segment import Segment, files_on_disk, remove_files, segment_name

if TYPE_CHECKING:
    from .base import Database

#: Vectors a check compares byte for byte with the table, per segment.
SAMPLE = 256
#: How often, and how long apart, a check looks again at files behind the table's deletes
#: (a forget in another process commits, then scrubs the files).
SETTLE_TRIES, SETTLE_WAIT = 10, 0.2


def sync_files(db: Database, directory: Path | None, tenant: str | None = None) -> None:
    """Scrub deleted vectors from the files of ``tenant`` (None: every tenant) whatever
    model made them, for a store opened without an embedder (a forget, a sweep): the
    files of the model the store records are brought up to date; files of another model
    (left over) are removed. BackendError when files could not be written."""
    recorded: str | None = None
    for t, label in sorted(files_on_disk(directory)):
        if tenant is not None and t != tenant:
            continue
        if recorded is None:
            with db.transaction(t, write=False) as tx:
                row = tx.one("SELECT value FROM meta WHERE key = 'embedding_model'")
            recorded = str(row["value"]) if row else ""
        model, _, dims = label.rpartition(":")
        if label != recorded or not dims.isdigit():
            assert directory is not None
            for layer in ("episodes", "facts"):
                remove_files(directory / segment_name(t, layer))
            continue
        SQLiteVectorIndex(model, int(dims), db=db, directory=directory).sync(t)


def verify_files(conn: sqlite3.Connection, directory: Path | None) -> list[str]:
    """What is wrong between the table and the vector files (empty: nothing)."""
    def meta(key: str) -> str:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else ""

    problems: list[str] = []
    recorded = meta("embedding_model")
    for label, n in conn.execute("SELECT model || ':' || dims, count(*) FROM vectors "
                                 "GROUP BY model, dims ORDER BY 1"):
        if label != recorded:
            problems.append(f"{n} vectors were made by {label}, but the store records "
                            f"{recorded or 'no model'}: run `memstrata reindex`")
    store = meta("store_id")
    fix = (f"delete {directory} (a cache: the next search rebuilds it from the database) "
           "or run `memstrata reindex`")
    for tenant, label in sorted(files_on_disk(directory)):
        assert directory is not None
        prefix = directory / segment_name(tenant, "episodes")  # the one layer with files
        if not prefix.with_name(prefix.name + ".json").exists():
            continue
        _, _, dims = label.rpartition(":")
        if label != recorded or not dims.isdigit():
            problems.append(f"vector files {prefix.name} hold vectors of {label}, not of "
                            f"the store's {recorded or 'no model'}: {fix}")
            continue
        found: list[str] = []
        for _ in range(SETTLE_TRIES):
            seg = Segment.open(int(dims), prefix, store=store, model=label)
            if seg is None:
                break  # another store's files or a broken header: never read, rebuilt
            found = _compare(conn, seg, tenant, "episodes")
            if not found or seg.generation >= int(meta("vector_generation") or 0):
                break
            # deletes the files have not reconciled yet: a forget or sweep in another
            # process scrubs them right after its commit; look again once it had the time
            time.sleep(SETTLE_WAIT)
        problems += [f"vector files {prefix.name}: {p}: {fix}" for p in found]
    return problems


def _compare(conn: sqlite3.Connection, seg: Segment, tenant: str, layer: str) -> list[str]:
    rows = seg.rows[: seg.n]
    alive = rows["alive"] == 1
    held = dict(zip(rows["rowid"][alive].tolist(), np.flatnonzero(alive).tolist(), strict=True))
    table = {int(r[0]): str(r[1]) for r in conn.execute(
        "SELECT rowid, record_id FROM vectors WHERE tenant = ? AND layer = ? AND rowid <= ?",
        (tenant, layer, seg.max_rowid))}
    out = []
    missing = len(table.keys() - held.keys())
    if missing:
        out.append(f"{missing} vectors of the table are missing from the files")
    extra = len(held.keys() - table.keys())
    if extra:
        out.append(f"{extra} vectors are alive in the files but gone from the table "
                   "(forgotten or expired records)")
    both = sorted(held.keys() & table.keys())
    ids: list[bytes] = rows["id"].tolist()
    wrong_ids = sum(ids[held[r]].decode(errors="replace") != table[r] for r in both)
    if wrong_ids:
        out.append(f"{wrong_ids} rows of the files name another record than the table")
    sample = both[:: max(1, len(both) // SAMPLE)][:SAMPLE]
    scopes = seg.scopes(np.array([held[r] for r in sample], np.int64))
    stored: dict[int, tuple[Any, ...]] = {}
    for part in chunks(sample):  # the sample's rows in a few reads, not one each
        stored.update((int(r[0]), tuple(r[1:])) for r in conn.execute(
            "SELECT v.rowid, v.vec, r.s_user, r.s_project, r.s_agent, r.readers FROM vectors v "
            f"LEFT JOIN {layer} r ON r.tenant = v.tenant AND r.id = v.record_id "
            f"WHERE v.rowid IN ({marks(part)})", part))
    differ = misnamed = 0
    for rowid, scope in zip(sample, scopes, strict=True):
        got = stored.get(rowid)
        if got is None or seg.vec[held[rowid]].tobytes() != bytes(got[0]):
            differ += 1
        readers = load_json_list(got[4]) if got is not None else None
        if got is not None and scope != (got[1], got[2], got[3], readers):
            misnamed += 1
    if differ:
        out.append(f"{differ} of {len(sample)} vectors sampled differ from the table")
    if misnamed:
        out.append(f"{misnamed} of {len(sample)} rows sampled have another scope or readers "
                   "than the table")
    names, dead = seg.unused()
    if names or dead:
        out.append(f"{len(names)} names of users, projects or agents and the readers of "
                   f"{len(dead)} removed rows are still in the files, though no live row "
                   "uses them (a forget or sweep did not finish)")
    return out


__all__ = ["SAMPLE", "sync_files", "verify_files"]
