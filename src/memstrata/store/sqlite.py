"""The embedded default backend: one SQLite file.

Contract (the schema and its invariants are in :mod:`memstrata.store.sqlite_schema`):

- WAL journal, ``busy_timeout`` and ``BEGIN IMMEDIATE`` for every write, so several
  processes can share one file without losing acknowledged writes. Transactions nest as
  savepoints on one connection guarded by a lock.
- A failed ``ROLLBACK`` never leaves the handle inside a transaction holding the write
  lock: the connection is closed and reopened, and the error is a
  :class:`~memstrata.errors.BackendError`. A failed ``ROLLBACK TO`` of a savepoint ends
  the enclosing transaction the same way (none of its later statements can autocommit,
  and no new transaction starts until its frames have exited: nothing the caller meant as
  part of it can commit on its own).
  Driver errors never escape raw.
- ``secure_delete`` is on (freed pages are zeroed), the full-text tables delete in place
  (FTS5 ``secure-delete``, migration m006), and :meth:`SQLiteDatabase.compact` truncates
  the WAL, so forgotten text leaves the file at a cost proportional to what was forgotten,
  not to the store. The checkpoint that truncates it waits for other connections' reads
  (up to ``busy_timeout``); when one still reads, or not every page was copied back, the
  deleted text stays in ``<file>-wal``: ``compact`` says so (its note) and records the
  compaction as due in the file itself (``meta.compaction_due``), so whichever process
  next writes to the store (after its write transaction), opens it or closes it
  checkpoints again, without waiting, and clears the record once the WAL was truncated:
  the retry outlives the process that forgot (a CLI command that exits). The driver is
  :mod:`memstrata.store.sqlite_driver` (a current SQLite).
- Full-text search is FTS5 (porter stemming); a record's thread context sits in a second
  column at half the weight of its own text. The ranking is BM25 over the caller's rows
  alone, and in a large index very common query words are left out
  (:mod:`memstrata.store.sqlite_search`).
- Vectors live in the same file (:mod:`memstrata.store.sqlite_vectors`).
- ``lower()`` in SQL is :func:`memstrata.store.sql.sql_lower` (registered on every
  connection in place of SQLite's, which folds ASCII only), so a forget's match is
  case-insensitive beyond ASCII, as on PostgreSQL under a UTF-8 locale. No index or
  trigger may use ``lower()``: another connection would compute it differently.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BackendError, ConfigError, Conflict
from .base import Capabilities, Row
from .lexical import COMMON_TERM_DOCS, LARGE_INDEX_ROWS, AllCommon, index_form
from .sql import chunks, marks, sql_lower
from .sqlite_driver import sqlite3
from .sqlite_meta import clear_meta, write_meta
from .sqlite_schema import apply_pending
from .sqlite_search import TextSearch, doc_len

if TYPE_CHECKING:
    from .sqlite_vectors import SQLiteVectorIndex

_TEXT_TABLES = ("episodes", "facts")
#: The ``meta`` key of a compaction that another connection kept from finishing: its value
#: is a token, new at each blocked compaction, so a process that truncated the WAL before a
#: later one was recorded clears only its own.
_COMPACTION_DUE = "compaction_due"


class _SQLiteTx:
    def __init__(self, conn: sqlite3.Connection, writable: bool) -> None:
        self._conn = conn
        #: Whether the outermost transaction may write (what it reads may be rolled back,
        #: so caches beside the database keep nothing of it).
        self.writable = writable

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(sql, _adapt(params)).rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, [_adapt(r) for r in rows])

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row = self._conn.execute(sql, _adapt(params)).fetchone()
        return dict(row) if row is not None else None

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return [dict(r) for r in self._conn.execute(sql, _adapt(params)).fetchall()]

    def tuples(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of a query as a plain tuple, in the columns' order: for the long
        reads of a search (1,000 word matches read as dicts cost 0.25 ms more at 20k
        episodes)."""
        cur = self._conn.cursor()
        cur.row_factory = None
        return cur.execute(sql, _adapt(params)).fetchall()

    def changes(self) -> tuple[int, int]:
        """What changes with every write to the file: this connection's changed rows and
        the file's data version (moved by other connections' commits)."""
        version = self._conn.execute("PRAGMA data_version").fetchone()
        return self._conn.total_changes, int(version[0])


def _adapt(params: Sequence[Any]) -> tuple[Any, ...]:
    out: list[Any] = []
    for p in params:
        if isinstance(p, datetime):
            out.append(p.astimezone(UTC).isoformat(timespec="microseconds"))
        elif isinstance(p, bool):
            out.append(int(p))
        else:
            out.append(p)
    return tuple(out)


def url_file(url: str) -> tuple[Path | str, str]:
    """The file a ``sqlite:`` URL names (``":memory:"`` for none) and its query string:
    ``sqlite:///abs/path``, ``sqlite:////abs/path``, ``sqlite:///~/path``,
    ``sqlite://relative/path``, ``sqlite:///:memory:``."""
    path = url.split("://", 1)[1] if "://" in url else url.removeprefix("sqlite:")
    path, _, query = path.partition("?")
    if path in ("/:memory:", ":memory:"):
        return ":memory:", query
    if path.startswith(("//", "/~")):
        # sqlite:////abs/path (SQLAlchemy style); sqlite:///~/path (home, not "/~")
        path = path[1:]
    if not path:
        raise ConfigError(f"no file path in {url!r}", hint="sqlite:///path/memory.db")
    return Path(path).expanduser(), query


class SQLiteDatabase:
    """One SQLite file shared safely by threads and processes."""

    engine = "sqlite"
    capabilities = Capabilities(tenant_isolation=False, shared=True, secure_delete=True)

    def __init__(self, path: str | Path, *, synchronous: str = "NORMAL",
                 busy_timeout_ms: int = 30_000) -> None:
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ConfigError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = int(busy_timeout_ms)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._depth = 0
        self._orphaned = 0
        self._search = TextSearch()
        self._writes = False
        self._conn = self._connect()
        self._migrate()
        with self._lock:
            self._finish_compaction()

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(str(self.path), isolation_level=None,
                                   check_same_thread=False,
                                   timeout=self._busy_timeout_ms / 1000)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.create_function("memstrata_doc_len", 1, doc_len, deterministic=True)
            # SQLite's own lower() folds ASCII only: the contains rule folds beyond it
            conn.create_function("lower", 1, sql_lower, deterministic=True)
        except sqlite3.Error as exc:
            raise BackendError(f"cannot open SQLite file {self.path}: {exc}",
                               hint="check the path and its permissions") from exc
        return conn

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLiteDatabase:
        path, query = url_file(url)
        for part in filter(None, query.split("&")):
            k, _, v = part.partition("=")
            if k == "synchronous":
                options.setdefault("synchronous", v)
        return cls(path, **options)

    # -- migrations -----------------------------------------------------
    def _migrate(self) -> None:
        with self._lock:
            c = self._conn
            try:
                c.execute("BEGIN IMMEDIATE")
                apply_pending(c, datetime.now(UTC).isoformat())
                c.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback_or_reopen()
                raise BackendError(f"migrating {self.path} failed: {exc}") from exc

    def applied_migrations(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._conn.execute(
                "SELECT name FROM migrations ORDER BY name")]

    # -- transactions ---------------------------------------------------
    def _rollback_or_reopen(self) -> None:
        """Roll the open transaction back; if even that fails, the connection may still
        hold the write lock, so close it and open a fresh one."""
        c = self._conn
        try:
            if c.in_transaction:
                c.execute("ROLLBACK")
            return
        except sqlite3.Error:
            pass
        self._reopen()

    def _reopen(self, orphaned: int = 0) -> None:
        """Close the connection (SQLite rolls back what it held) and open a fresh one; the
        transactions open on the old one fail from now on (their statements and COMMIT
        meet a closed connection). ``orphaned`` enclosing transactions are still open on
        the old one: until they have all exited, no new transaction may start (it would
        commit on its own what the caller meant as part of the ended one)."""
        with suppress(sqlite3.Error):
            self._conn.close()
        self._depth = 0
        self._orphaned = orphaned
        self._conn = self._connect()

    def _left(self, c: sqlite3.Connection) -> None:
        """A transaction frame on connection ``c`` exits: one fewer orphaned frame when
        ``c`` was replaced."""
        if c is not self._conn and self._orphaned:
            self._orphaned -= 1

    @contextmanager
    def transaction(self, tenant: str, *, write: bool = True,
                    maintenance: bool = False) -> Iterator[_SQLiteTx]:
        del tenant  # every statement names its tenant; SQLite has no session variable
        with self._lock:
            if self._orphaned:
                raise BackendError("the enclosing transaction was ended by a failed rollback",
                                   hint="let the error reach the outermost transaction; "
                                        "nothing of it was committed")
            c = self._conn
            depth = self._depth
            nested = depth > 0
            sp = f"sp{depth}"
            try:
                c.execute(f"SAVEPOINT {sp}" if nested else
                          ("BEGIN IMMEDIATE" if write or maintenance else "BEGIN"))
            except sqlite3.Error as exc:
                raise BackendError(f"cannot start a transaction: {exc}",
                                   hint="another process may hold the lock too long") from exc
            if not nested:
                self._writes = write or maintenance
            self._depth += 1
            try:
                if maintenance:
                    c.execute("INSERT INTO write_guard (token) VALUES (1)")
                yield _SQLiteTx(c, self._writes)
                if maintenance:
                    c.execute("DELETE FROM write_guard")
            except BaseException as exc:
                self._depth = depth
                if c is not self._conn:
                    self._left(c)  # a failed rollback inside already closed and replaced it
                elif nested:
                    try:
                        c.execute(f"ROLLBACK TO {sp}")
                        c.execute(f"RELEASE {sp}")
                    except sqlite3.Error:
                        # the enclosing transaction is in an unknown state: end it with the
                        # connection, so none of its later statements can autocommit, and
                        # refuse new ones until its frames have exited
                        self._reopen(orphaned=depth)
                else:
                    self._rollback_or_reopen()
                if isinstance(exc, sqlite3.IntegrityError):
                    raise Conflict(f"refused by the schema: {exc}") from exc
                if isinstance(exc, sqlite3.Error):
                    raise BackendError(f"SQLite error: {exc}") from exc
                raise
            self._depth = depth
            try:
                c.execute(f"RELEASE {sp}" if nested else "COMMIT")
            except sqlite3.Error as exc:
                self._left(c)
                if not nested and c is self._conn:
                    self._rollback_or_reopen()
                raise BackendError(f"commit failed: {exc}") from exc
            if not nested and self._writes:
                self._finish_compaction()  # the commit stands whatever happens there

    def tenants(self) -> list[str]:
        with self._lock:
            try:
                return [r[0] for r in self._conn.execute(
                    "SELECT tenant FROM tenants ORDER BY tenant")]
            except sqlite3.Error as exc:
                raise BackendError(f"cannot list tenants: {exc}") from exc

    # -- search ---------------------------------------------------------
    def readers_clause(self, column: str) -> str:
        return f"({column} IS NULL OR EXISTS (SELECT 1 FROM json_each({column}) WHERE value = ?))"

    def text_search(self, tx: Any, table: str, query: str, where: str,
                    params: Sequence[Any], limit: int, drop: Sequence[str] = (),
                    all_common: AllCommon = "keep",
                    among: tuple[str, Sequence[Any]] | None = None,
                    weight: tuple[str, Sequence[Any]] | None = None
                    ) -> list[tuple[str, float]]:
        """BM25 over the rows the caller's filter admits alone
        (:meth:`memstrata.store.sqlite_search.TextSearch.search`)."""
        if table not in _TEXT_TABLES:
            raise ValueError(table)
        return self._search.search(tx, table, query, where, params, limit, drop, all_common,
                                   among, weight)

    def index_text(self, tx: Any, table: str, record_id: str, tenant: str, text: str,
                   context: str = "") -> None:
        if table not in _TEXT_TABLES:
            raise ValueError(table)
        row = tx.one(f"SELECT rowid AS rid FROM {table} WHERE tenant = ? AND id = ?",
                     (tenant, record_id))
        if row is None:
            raise BackendError(f"cannot index missing {table} row {record_id}")
        if tx.execute(f"DELETE FROM {table}_fts WHERE rowid = ?", (row["rid"],)):
            # an entry written again in place (a thread's new turn rewrites its neighbours'
            # context): counts topped up by rowid cannot see it (TextSearch._watch)
            tx.execute("INSERT INTO fts_rewrites (tbl, n) VALUES (?, 1) ON CONFLICT (tbl) DO "
                       "UPDATE SET n = n + 1", (table,))
        tx.execute(f"INSERT INTO {table}_fts (rowid, body, context) VALUES (?, ?, ?)",
                   (row["rid"], index_form(text), index_form(context)))

    # -- vectors --------------------------------------------------------
    @property
    def _vector_dir(self) -> Path | None:
        return None if str(self.path) == ":memory:" else \
            self.path.with_name(self.path.name + "-vectors")

    def vector_index(self, model: str, dims: int) -> SQLiteVectorIndex:
        from .sqlite_vectors import SQLiteVectorIndex  # numpy loads with the first vector

        return SQLiteVectorIndex(model, dims, db=self, directory=self._vector_dir)

    def sync_vectors(self, tenant: str | None = None) -> None:
        directory = self._vector_dir
        if directory is None or not directory.is_dir():
            return
        from .vector_files import sync_files

        sync_files(self, directory, tenant)

    def delete_vectors(self, tx: Any, tenant: str, record_ids: Sequence[str]) -> int:
        from .sqlite_vectors import delete_vectors

        return delete_vectors(tx, tenant, record_ids)

    def lock_threads(self, tx: Any, tenant: str, threads: Sequence[tuple[str, str]]) -> None:
        """Nothing to take: ``BEGIN IMMEDIATE`` already gives each write transaction the
        whole file."""

    def vector_count(self, tx: Any, tenant: str, record_ids: Sequence[str]) -> int:
        total = 0
        for chunk in chunks(record_ids):
            row = tx.one(f"SELECT count(*) AS n FROM vectors WHERE tenant = ? AND record_id IN "
                         f"({marks(chunk)})", (tenant, *chunk))
            total += int(row["n"]) if row else 0
        return total

    # -- maintenance ----------------------------------------------------
    def compact(self) -> list[str]:
        """Checkpoint the WAL into the file and truncate it (waiting up to ``busy_timeout``
        for other connections' reads); a note when it could not, and the compaction is
        then recorded as due (see the module contract)."""
        with self._lock:
            try:
                # deleted rows' pages are zeroed (secure_delete) and their index terms
                # removed in place (FTS5 secure-delete, m006); what is left is the WAL
                due = self._due()
                done, log, copied = self._checkpoint(wait=True)
            except sqlite3.Error as exc:
                self._rollback_or_reopen()
                raise BackendError(f"compaction failed: {exc}") from exc
            if done:
                if due is not None:
                    self._clear_due(due)
                return []
            with suppress(sqlite3.Error):  # the note stands; this process retries on close
                write_meta(self._conn, _COMPACTION_DUE, secrets.token_hex(8))
            return [f"another connection was still using {self.path.name} after "
                    f"{self._busy_timeout_ms / 1000:g} s (busy_timeout), so its write-ahead "
                    f"log {self.path.name}-wal still holds the deleted text ({copied} of {log} "
                    "pages copied back); the store records the compaction as due, and "
                    "the next process to write to it, open it or close it checkpoints it "
                    "again: end the long read or write (a server's or a shell's open "
                    "transaction), then write to or close the store"]

    def _due(self) -> str | None:
        """The token of a compaction recorded as due (by any process), if one is."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?",
                                 (_COMPACTION_DUE,)).fetchone()
        return None if row is None else str(row[0])

    def _finish_compaction(self) -> None:
        """After a write transaction, on open and on close, outside any transaction: if a
        compaction is due, checkpoint without waiting and clear it when the WAL was
        truncated. Errors are left for the next try (what called it stands)."""
        if self._depth or str(self.path) == ":memory:":
            return
        with suppress(sqlite3.Error):
            due = self._due()
            if due is not None and self._checkpoint(wait=False)[0]:
                self._clear_due(due)

    def _clear_due(self, token: str) -> None:
        """The WAL was truncated: clear the record (unless a later compaction recorded a
        new token meanwhile), then truncate what that write left (one page of ``meta``)."""
        with suppress(sqlite3.Error):
            clear_meta(self._conn, _COMPACTION_DUE, token)
            self._checkpoint(wait=False)

    def _checkpoint(self, *, wait: bool) -> tuple[bool, int, int]:
        """``wal_checkpoint(TRUNCATE)``, judged by its result row (busy, WAL pages, pages
        copied back): the statement succeeds even when a reader kept it from finishing.
        Returns whether the WAL was truncated, its pages and the pages copied back.
        Without ``wait``, it gives up at once on a busy lock (a retry)."""
        c = self._conn
        if not wait:
            c.execute("PRAGMA busy_timeout = 0")
        try:
            busy, log, copied = c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            if not wait:
                c.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        return not busy and log == copied, int(log), int(copied)

    def verify(self) -> list[str]:
        problems: list[str] = []
        with self._lock:
            c = self._conn
            res = [r[0] for r in c.execute("PRAGMA integrity_check")]
            if res != ["ok"]:
                problems += [f"integrity_check: {r}" for r in res]
            for t in _TEXT_TABLES:
                try:
                    c.execute(f"INSERT INTO {t}_fts ({t}_fts) VALUES ('integrity-check')")
                except sqlite3.Error as exc:
                    problems.append(f"{t}_fts integrity-check failed: {exc}")
                orphans = c.execute(
                    f"SELECT count(*) FROM {t}_fts WHERE rowid NOT IN (SELECT rowid FROM {t})"
                ).fetchone()[0]
                missing = c.execute(
                    f"SELECT count(*) FROM {t} WHERE rowid NOT IN (SELECT rowid FROM {t}_fts)"
                ).fetchone()[0]
                if orphans:
                    problems.append(f"{orphans} {t}_fts rows have no {t} row")
                if missing:
                    problems.append(f"{missing} {t} rows are missing from {t}_fts")
            from .vector_files import verify_files  # numpy loads only for a check

            problems += verify_files(c, self._vector_dir)
        return problems

    def stats(self) -> dict[str, Any]:
        with self._lock:
            c = self._conn
            counts = {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                      for t in ("facts", "episodes", "checkpoints", "operations", "scratch",
                                "vectors", "procedures")}
        size = 0
        if str(self.path) != ":memory:":
            for suffix in ("", "-wal", "-shm"):
                p = Path(str(self.path) + suffix)
                if p.exists():
                    size += p.stat().st_size
            vector_dir = Path(str(self.path) + "-vectors")
            if vector_dir.is_dir():
                size += sum(p.stat().st_size for p in vector_dir.iterdir() if p.is_file())
        return {"backend": "sqlite", "path": str(self.path), "bytes": size, "rows": counts,
                "tenants": len(self.tenants()), "migrations": self.applied_migrations()}

    def close(self) -> None:
        with self._lock:
            self._finish_compaction()
            try:
                self._conn.execute("PRAGMA optimize")
                self._conn.close()
            except sqlite3.Error:
                pass


__all__ = ["COMMON_TERM_DOCS", "LARGE_INDEX_ROWS", "SQLiteDatabase", "url_file"]
