"""The embedded default backend: one SQLite file.

Contract and invariants (enforced by the schema, not only by Python):
- WAL journal, ``busy_timeout`` and ``BEGIN IMMEDIATE`` for every write, so
  several processes can share one file without losing acknowledged writes.
- ``secure_delete`` is on and :meth:`SQLiteDatabase.compact` rewrites the
  full-text indexes and truncates the WAL, so forgotten text leaves the file.
- Episodes and checkpoint versions are append-only: triggers refuse UPDATE,
  and refuse DELETE unless the transaction holds the maintenance guard
  (forget and retention only).
- At most one active fact per (tenant, scope, subject, attribute): a partial
  unique index. A fact's content is frozen once it left review.
- Operation keys are unique per (tenant, scope).
- Deleting a row deletes its full-text entry and its vector (triggers), so no
  index can keep what the base table forgot.
- Migrations are named functions applied in order and recorded in
  ``migrations``.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import BackendError, ConfigError, Conflict
from .base import Row
from .lexical import terms

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[tuple[str, Migration]] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append((fn.__name__, fn))
    return fn


_SCOPE_COLS = """
    tenant TEXT NOT NULL,
    s_user TEXT, s_project TEXT, s_agent TEXT,
    scope_key TEXT NOT NULL"""


@migration
def m001_initial(conn: sqlite3.Connection) -> None:
    _run_script(conn, f"""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE write_guard (token INTEGER);

        CREATE TABLE facts ({_SCOPE_COLS},
            id TEXT NOT NULL,
            kind TEXT NOT NULL, subject TEXT NOT NULL, attribute TEXT NOT NULL,
            claim TEXT NOT NULL, confidence REAL NOT NULL,
            tier TEXT NOT NULL, sensitivity TEXT NOT NULL, status TEXT NOT NULL,
            actor TEXT NOT NULL, source TEXT NOT NULL, evidence TEXT,
            created_at TEXT NOT NULL, valid_from TEXT, valid_to TEXT,
            recheck_after TEXT, expires_at TEXT,
            supersedes TEXT, superseded_by TEXT, reason TEXT,
            readers TEXT, last_confirmed_at TEXT, reviewer TEXT, flags TEXT NOT NULL DEFAULT '[]',
            feedback_score INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, id),
            CHECK (status IN ('active', 'pending_review', 'superseded', 'retired', 'expired',
                              'rejected')),
            CHECK (confidence >= 0 AND confidence <= 1)
        );
        CREATE UNIQUE INDEX facts_one_active_per_slot
            ON facts (tenant, scope_key, subject, attribute) WHERE status = 'active';
        CREATE INDEX facts_scope ON facts (tenant, s_user, s_project, status);
        CREATE TRIGGER facts_content_frozen
            BEFORE UPDATE OF claim, kind, subject, attribute, tenant, scope_key, actor, source,
                             created_at ON facts
            WHEN old.status != 'pending_review'
            BEGIN SELECT RAISE(ABORT, 'fact content is immutable: propose a new fact'); END;
        CREATE TRIGGER facts_no_delete BEFORE DELETE ON facts
            WHEN NOT EXISTS (SELECT 1 FROM write_guard)
            BEGIN SELECT RAISE(ABORT, 'facts are never deleted: retire or supersede them'); END;

        CREATE TABLE episodes ({_SCOPE_COLS},
            id TEXT NOT NULL,
            event TEXT NOT NULL, text TEXT NOT NULL,
            actor TEXT NOT NULL, source TEXT NOT NULL, evidence TEXT,
            created_at TEXT NOT NULL, observed_at TEXT NOT NULL,
            outcome TEXT, confidence REAL NOT NULL, expires_at TEXT,
            supersedes TEXT, readers TEXT, flags TEXT NOT NULL DEFAULT '[]',
            subject TEXT,
            PRIMARY KEY (tenant, id)
        );
        CREATE INDEX episodes_subject ON episodes (tenant, subject);
        CREATE INDEX episodes_thread ON episodes (tenant, scope_key, source, observed_at);
        CREATE INDEX episodes_scope ON episodes (tenant, s_user, s_project, observed_at);
        CREATE INDEX episodes_supersedes ON episodes (tenant, supersedes);
        CREATE TRIGGER episodes_append_only BEFORE UPDATE ON episodes
            WHEN NOT EXISTS (SELECT 1 FROM write_guard)
            BEGIN SELECT RAISE(ABORT,
                'episodes are append-only: append a correction that supersedes it'); END;
        CREATE TRIGGER episodes_no_delete BEFORE DELETE ON episodes
            WHEN NOT EXISTS (SELECT 1 FROM write_guard)
            BEGIN SELECT RAISE(ABORT, 'episodes are append-only'); END;

        CREATE VIRTUAL TABLE facts_fts USING fts5 (body, context,
                                                   tokenize = 'porter unicode61');
        CREATE VIRTUAL TABLE episodes_fts USING fts5 (body, context,
                                                      tokenize = 'porter unicode61');

        CREATE TABLE vectors (
            tenant TEXT NOT NULL, record_id TEXT NOT NULL, layer TEXT NOT NULL,
            model TEXT NOT NULL, dims INTEGER NOT NULL, vec BLOB NOT NULL,
            PRIMARY KEY (tenant, record_id)
        );

        INSERT INTO meta (key, value) VALUES ('vector_generation', '0');
        CREATE TRIGGER vectors_generation AFTER DELETE ON vectors BEGIN
            UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)
            WHERE key = 'vector_generation';
        END;

        CREATE TRIGGER facts_deindex AFTER DELETE ON facts BEGIN
            DELETE FROM facts_fts WHERE rowid = old.rowid;
            DELETE FROM vectors WHERE tenant = old.tenant AND record_id = old.id;
        END;
        CREATE TRIGGER episodes_deindex AFTER DELETE ON episodes BEGIN
            DELETE FROM episodes_fts WHERE rowid = old.rowid;
            DELETE FROM vectors WHERE tenant = old.tenant AND record_id = old.id;
        END;

        CREATE TABLE checkpoints ({_SCOPE_COLS},
            task TEXT NOT NULL, version INTEGER NOT NULL,
            data TEXT NOT NULL, updated_at TEXT NOT NULL, updated_by TEXT,
            PRIMARY KEY (tenant, scope_key, task, version)
        );
        CREATE TRIGGER checkpoints_versioned BEFORE UPDATE ON checkpoints
            BEGIN SELECT RAISE(ABORT, 'checkpoint versions are immutable: save a new one'); END;
        CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
            WHEN NOT EXISTS (SELECT 1 FROM write_guard)
            BEGIN SELECT RAISE(ABORT, 'checkpoint history is kept'); END;

        CREATE TABLE operations ({_SCOPE_COLS},
            key TEXT NOT NULL, intent TEXT NOT NULL, status TEXT NOT NULL,
            external_ref TEXT, error TEXT, attempts INTEGER NOT NULL DEFAULT 1,
            run_id TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
            PRIMARY KEY (tenant, scope_key, key),
            CHECK (status IN ('pending','succeeded','failed','unknown'))
        );

        CREATE TABLE runs ({_SCOPE_COLS},
            run_id TEXT NOT NULL, task TEXT, started_at TEXT NOT NULL, ended_at TEXT,
            PRIMARY KEY (tenant, run_id)
        );

        CREATE TABLE scratch ({_SCOPE_COLS},
            run_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            written_at TEXT NOT NULL, expires_at TEXT NOT NULL,
            PRIMARY KEY (tenant, run_id, key)
        );
        CREATE INDEX scratch_expiry ON scratch (expires_at);

        CREATE TABLE feedback (
            tenant TEXT NOT NULL, ref TEXT NOT NULL, signal TEXT NOT NULL,
            note TEXT, created_at TEXT NOT NULL
        );
        CREATE INDEX feedback_ref ON feedback (tenant, ref);

        CREATE TABLE procedures ({_SCOPE_COLS},
            name TEXT NOT NULL, version INTEGER NOT NULL, status TEXT NOT NULL,
            data TEXT NOT NULL, owner TEXT, created_at TEXT NOT NULL,
            activated_at TEXT, activated_by TEXT,
            PRIMARY KEY (tenant, scope_key, name, version)
        );
        CREATE UNIQUE INDEX procedures_one_active
            ON procedures (tenant, scope_key, name) WHERE status = 'active';
        """)


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run statements one by one inside the caller's transaction (executescript would
    commit it)."""
    stmt = ""
    for line in script.splitlines(keepends=True):
        stmt += line
        if sqlite3.complete_statement(stmt):
            conn.execute(stmt)
            stmt = ""
    if stmt.strip():
        raise BackendError(f"incomplete statement in migration: {stmt[:80]!r}")


class _SQLiteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(sql, _adapt(params)).rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, [_adapt(r) for r in rows])

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row = self._conn.execute(sql, _adapt(params)).fetchone()
        return dict(row) if row is not None else None

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return [dict(r) for r in self._conn.execute(sql, _adapt(params)).fetchall()]


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


_BUSY_RE = re.compile(r"locked|busy", re.I)
#: Past this many index rows, very common query terms are dropped (see _selective_query).
LARGE_INDEX_ROWS = 50_000
COMMON_TERM_DOCS = 5_000


def _quote(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'



class SQLiteDatabase:
    """One SQLite file shared safely by threads and processes."""

    dialect = "sqlite"

    def __init__(self, path: str | Path, *, synchronous: str = "NORMAL",
                 busy_timeout_ms: int = 30_000) -> None:
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(
                str(path), isolation_level=None, check_same_thread=False,
                timeout=busy_timeout_ms / 1000,
            )
        except sqlite3.Error as exc:
            raise BackendError(f"cannot open SQLite file {path}: {exc}",
                               hint="check the path and its permissions") from exc
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._depth = 0
        c = self._conn
        c.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        c.execute("PRAGMA journal_mode = WAL")
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ConfigError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        c.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        c.execute("PRAGMA secure_delete = ON")
        c.execute("PRAGMA foreign_keys = ON")
        self._migrate()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLiteDatabase:
        # sqlite:///abs/path, sqlite:///:memory:, sqlite://relative/path
        path = url.split("://", 1)[1] if "://" in url else url.removeprefix("sqlite:")
        path, _, query = path.partition("?")
        if path == "/:memory:":
            path = ":memory:"
        elif path.startswith("//"):  # sqlite:////abs/path (SQLAlchemy style)
            path = path[1:]
        for part in filter(None, query.split("&")):
            k, _, v = part.partition("=")
            if k == "synchronous":
                options.setdefault("synchronous", v)
        if not path:
            raise ConfigError(f"no file path in {url!r}", hint="sqlite:///path/memory.db")
        return cls(Path(path).expanduser() if path != ":memory:" else path, **options)

    # -- migrations -----------------------------------------------------
    def _migrate(self) -> None:
        with self._lock:
            c = self._conn
            try:
                c.execute("BEGIN IMMEDIATE")
                c.execute("CREATE TABLE IF NOT EXISTS migrations "
                          "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
                done = {r[0] for r in c.execute("SELECT name FROM migrations")}
                for name, fn in MIGRATIONS:
                    if name in done:
                        continue
                    fn(c)
                    c.execute("INSERT INTO migrations VALUES (?, ?)",
                              (name, datetime.now(UTC).isoformat()))
                c.execute("COMMIT")
            except sqlite3.Error as exc:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise BackendError(f"migrating {self.path} failed: {exc}") from exc

    def applied_migrations(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT name FROM migrations ORDER BY name")]

    # -- transactions ---------------------------------------------------
    @contextmanager
    def transaction(self, tenant: str, *, write: bool = True,
                    maintenance: bool = False) -> Iterator[_SQLiteTx]:
        del tenant  # SQLite holds one tenant per query filter; no session variable needed
        with self._lock:
            c = self._conn
            nested = self._depth > 0
            sp = f"sp{self._depth}"
            try:
                c.execute(f"SAVEPOINT {sp}" if nested else
                          ("BEGIN IMMEDIATE" if write or maintenance else "BEGIN"))
            except sqlite3.Error as exc:
                raise BackendError(f"cannot start a transaction: {exc}",
                                   hint="another process may hold the lock too long") from exc
            self._depth += 1
            try:
                if maintenance:
                    c.execute("INSERT INTO write_guard (token) VALUES (1)")
                yield _SQLiteTx(c)
                if maintenance:
                    c.execute("DELETE FROM write_guard")
            except BaseException as exc:
                self._depth -= 1
                try:
                    if nested:
                        c.execute(f"ROLLBACK TO {sp}")
                        c.execute(f"RELEASE {sp}")
                    elif c.in_transaction:
                        c.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                if isinstance(exc, sqlite3.IntegrityError):
                    raise Conflict(f"refused by the schema: {exc}") from exc
                if isinstance(exc, sqlite3.Error):
                    raise BackendError(f"SQLite error: {exc}") from exc
                raise
            self._depth -= 1
            try:
                c.execute(f"RELEASE {sp}" if nested else "COMMIT")
            except sqlite3.Error as exc:
                if not nested and c.in_transaction:
                    c.execute("ROLLBACK")
                raise BackendError(f"commit failed: {exc}") from exc

    # -- search ---------------------------------------------------------
    def readers_clause(self, column: str) -> str:
        return f"({column} IS NULL OR EXISTS (SELECT 1 FROM json_each({column}) WHERE value = ?))"

    def text_search(self, tx: Any, table: str, query: str, where: str,
                    params: Sequence[Any], limit: int,
                    drop: Sequence[str] = ()) -> list[tuple[str, float]]:
        if table not in ("episodes", "facts"):
            raise ValueError(table)
        match = self._selective_query(tx, table, query, drop)
        if not match:
            return []
        # the context column (neighbouring records) counts half as much as the body
        rows = tx.all(
            f"SELECT r.id AS id, bm25({table}_fts, 1.0, 0.5) AS s FROM {table}_fts "
            f"JOIN {table} r ON r.rowid = {table}_fts.rowid "
            f"WHERE {table}_fts MATCH ? AND {where} ORDER BY s LIMIT ?",
            (match, *params, limit),
        )
        return [(r["id"], -float(r["s"])) for r in rows]

    def _selective_query(self, tx: Any, table: str, query: str, drop: Sequence[str]) -> str:
        """The MATCH expression; in a large index, terms that occur in more than
        ``COMMON_TERM_DOCS`` rows are left out (BM25 gives them almost no weight, yet scoring
        their postings dominates the query time), like stopwords learnt from the data."""
        words = [w for w in terms(query) if w not in set(drop)][:64]
        top = tx.one(f"SELECT max(rowid) AS n FROM {table}_fts")
        if words and top and (top["n"] or 0) >= LARGE_INDEX_ROWS:
            rare = [w for w in words if tx.one(
                f"SELECT count(*) AS n FROM (SELECT 1 FROM {table}_fts WHERE {table}_fts "
                "MATCH ? LIMIT ?)", (_quote(w), COMMON_TERM_DOCS))["n"] < COMMON_TERM_DOCS]
            words = rare
        return " OR ".join(_quote(w) for w in words)

    def index_text(self, tx: Any, table: str, record_id: str, tenant: str, text: str,
                   context: str = "") -> None:
        row = tx.one(f"SELECT rowid AS rid FROM {table} WHERE tenant = ? AND id = ?",
                     (tenant, record_id))
        if row is None:
            raise BackendError(f"cannot index missing {table} row {record_id}")
        tx.execute(f"DELETE FROM {table}_fts WHERE rowid = ?", (row["rid"],))
        tx.execute(f"INSERT INTO {table}_fts (rowid, body, context) VALUES (?, ?, ?)",
                   (row["rid"], text, context))

    # -- maintenance ----------------------------------------------------
    def compact(self) -> None:
        with self._lock:
            c = self._conn
            try:
                c.execute("BEGIN IMMEDIATE")
                for t in ("facts_fts", "episodes_fts"):
                    c.execute(f"INSERT INTO {t} ({t}) VALUES ('optimize')")
                c.execute("COMMIT")
                c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise BackendError(f"compaction failed: {exc}") from exc

    def verify(self) -> list[str]:
        problems: list[str] = []
        with self._lock:
            c = self._conn
            res = [r[0] for r in c.execute("PRAGMA integrity_check")]
            if res != ["ok"]:
                problems += [f"integrity_check: {r}" for r in res]
            for t in ("facts", "episodes"):
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
        return {"backend": "sqlite", "path": str(self.path), "bytes": size, "rows": counts,
                "migrations": self.applied_migrations()}

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.execute("PRAGMA optimize")
                self._conn.close()
            except sqlite3.Error:
                pass


__all__ = ["MIGRATIONS", "SQLiteDatabase", "migration"]
