"""Fault injection at the driver boundary, and exact snapshots of a store.

:class:`Faults` makes the Nth database call (counted from when it is armed, in the arming
thread only) raise the driver's own error, below memstrata's transaction code, so the
translation to memstrata's errors and the rollback paths are what is tested:

- SQLite: the ``sqlite3.Connection`` the :class:`~memstrata.store.sqlite.SQLiteDatabase`
  holds is wrapped while armed; ``execute``, ``executemany``, ``commit`` and ``rollback``
  count (``BEGIN``, ``SAVEPOINT``, ``COMMIT``, ``ROLLBACK`` are statements there too). A
  connection the database opens again after a failed ROLLBACK is not wrapped.
- PostgreSQL: ``psycopg.Cursor.execute`` / ``executemany`` and the connection's internal
  commands (``COMMIT``, ``ROLLBACK``, ``SAVEPOINT``, ``RELEASE``: what ``conn.commit()``,
  ``conn.rollback()`` and ``conn.transaction()`` send) are patched for the armed thread.
  The pool's own threads are never counted.

With ``rollback_fails=True`` every ROLLBACK (and ROLLBACK TO) after the injected fault
fails as well, as on a dying disk or a dropped server connection.

:func:`snapshot` reads every table outside the library (SQLite: a separate raw
connection; PostgreSQL: the owner role, no row security; Redis: every key), as sorted
rows; :func:`normalised` replaces ULIDs by their rank and drops wall-clock columns, so two
stores built by the same calls compare equal.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import _connection_base
from psycopg import sql as pg_sql

from memstrata import Memory
from memstrata.store.sqlite_driver import sqlite3

Snapshot = dict[str, list[str]]

SQLITE_ERROR = "disk I/O error"
PG_ERROR = "consuming input failed: server closed the connection unexpectedly"
_ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")


class Faults:
    """Counts the database calls of one thread and makes the Nth one fail."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.at: int | None = None
        self.calls = 0
        self.fired = False
        self.rollback_fails = False
        self.rollbacks_failed = 0
        #: The statements counted since arming (their first words).
        self.log: list[str] = []
        self._thread: int | None = None

    def error(self, what: str) -> Exception:
        if self.backend == "sqlite":
            return sqlite3.OperationalError(f"{SQLITE_ERROR} (injected at {what})")
        return psycopg.OperationalError(f"{PG_ERROR} (injected at {what})")

    def tick(self, statement: str) -> None:
        """Called before every driver call; raises when this is the armed call."""
        if self.at is None or threading.get_ident() != self._thread:
            return
        head = statement.lstrip()[:12].upper()
        if self.fired and self.rollback_fails and head.startswith("ROLLBACK"):
            self.rollbacks_failed += 1
            raise self.error(head)
        self.calls += 1
        self.log.append(head)
        if self.calls == self.at and not self.fired:
            self.fired = True
            raise self.error(f"call {self.calls}: {head}")

    @contextmanager
    def armed(self, mem: Memory, at: int, *, rollback_fails: bool = False) -> Iterator[Faults]:
        """Make call number ``at`` of ``mem``'s database fail while the block runs."""
        self.at, self.calls, self.fired, self.log = at, 0, False, []
        self.rollback_fails, self.rollbacks_failed = rollback_fails, 0
        self._thread = threading.get_ident()
        db: Any = mem.db
        if self.backend == "sqlite":
            db._conn = _FaultySQLite(db._conn, self)
        try:
            yield self
        finally:
            self.at = None
            if self.backend == "sqlite" and isinstance(db._conn, _FaultySQLite):
                db._conn = db._conn.real

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Patch psycopg for the lifetime of the block (a no-op on SQLite)."""
        if self.backend == "sqlite":
            yield
            return
        faults = self
        cur_execute = psycopg.Cursor.execute
        cur_executemany = psycopg.Cursor.executemany
        exec_command = _connection_base.BaseConnection._exec_command

        def execute(cur: Any, query: Any, params: Any = None, **kw: Any) -> Any:
            faults.tick(_text(query))
            return cur_execute(cur, query, params, **kw)

        def executemany(cur: Any, query: Any, params_seq: Any, **kw: Any) -> Any:
            faults.tick(_text(query))
            return cur_executemany(cur, query, params_seq, **kw)

        def command(conn: Any, cmd: Any, *args: Any, **kw: Any) -> Any:
            faults.tick(_text(cmd))  # raising here fails the generator that sends it
            return exec_command(conn, cmd, *args, **kw)

        psycopg.Cursor.execute = execute  # type: ignore[assignment,method-assign]
        psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]
        _connection_base.BaseConnection._exec_command = command  # type: ignore[method-assign]
        try:
            yield
        finally:
            psycopg.Cursor.execute = cur_execute  # type: ignore[method-assign]
            psycopg.Cursor.executemany = cur_executemany  # type: ignore[method-assign]
            _connection_base.BaseConnection._exec_command = exec_command  # type: ignore[method-assign]


def _text(query: Any) -> str:
    if isinstance(query, bytes):
        return query.decode(errors="replace")
    if isinstance(query, str):
        return query
    if isinstance(query, pg_sql.Composable):
        return repr(query)[:200]
    return str(query)


class _FaultySQLite:
    """The database's sqlite3 connection, with a fault at the armed call."""

    def __init__(self, real: sqlite3.Connection, faults: Faults) -> None:
        self.real = real
        self._faults = faults

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        self._faults.tick(sql)
        return self.real.execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        self._faults.tick(sql)
        return self.real.executemany(sql, rows)

    def commit(self) -> None:
        self._faults.tick("COMMIT")
        self.real.commit()

    def rollback(self) -> None:
        self._faults.tick("ROLLBACK")
        self.real.rollback()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


# -- snapshots ---------------------------------------------------------------------------
def sqlite_snapshot(path: str) -> Snapshot:
    """Every row of every table of the file (FTS shadow tables left out: their virtual
    tables are read instead), through a separate raw connection."""
    conn = sqlite3.connect(path, timeout=5)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE '%_fts_%' AND name != 'migrations' ORDER BY name")]
        out: Snapshot = {}
        for t in tables:
            cols = "rowid, *" if t.endswith("_fts") else "*"
            out[t] = sorted(repr(tuple(r)) for r in conn.execute(f'SELECT {cols} FROM "{t}"'))
        return out
    finally:
        conn.close()


def pg_snapshot(conn: psycopg.Connection[Any], tables: Sequence[str]) -> Snapshot:
    """Every row of every memstrata table, read in one statement on a superuser's
    connection (no row security)."""
    query = pg_sql.SQL(" UNION ALL ").join(
        pg_sql.SQL("SELECT {}, x::text FROM {} x").format(pg_sql.Literal(t), pg_sql.Identifier(t))
        for t in tables)
    out: Snapshot = {t: [] for t in tables}
    for table, row in conn.execute(query):
        out[table].append(row)
    return {t: sorted(rows) for t, rows in out.items()}


def redis_snapshot(url: str) -> Snapshot:
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = sorted(client.scan_iter(count=1000))
        return {"redis": [f"{k!r}={client.get(k)!r}" for k in keys]}
    finally:
        client.close()


def normalised(snap: Snapshot) -> Snapshot:
    """The snapshot with every ULID replaced by its rank among the snapshot's ULIDs, and
    the tenants registry reduced to names (its times are the wall clock's)."""
    ids = sorted({m for rows in snap.values() for row in rows for m in _ULID.findall(row)})
    rank = {u: f"<id{n}>" for n, u in enumerate(ids)}
    out: Snapshot = {}
    for table, rows in snap.items():
        if table == "tenants":
            rows = [re.sub(r"(20\d\d-\d\d-\d\d[ T][0-9:.+]+)", "<time>", r) for r in rows]
        out[table] = sorted(_ULID.sub(lambda m: rank[m.group(0)], r) for r in rows)
    return out


def difference(a: Snapshot, b: Snapshot, limit: int = 3) -> str:
    """What differs between two snapshots, briefly (for failure messages)."""
    parts = []
    for table in sorted(set(a) | set(b)):
        ra, rb = set(a.get(table, [])), set(b.get(table, []))
        if ra != rb:
            gone = [r[:160] for r in sorted(ra - rb)[:limit]]
            new = [r[:160] for r in sorted(rb - ra)[:limit]]
            parts.append(f"{table}: -{len(ra - rb)} {gone} +{len(rb - ra)} {new}")
    return "; ".join(parts) or "equal"


def write_lock_free(path: str, timeout: float = 0.5) -> bool:
    """Can another connection take the file's write lock now (``BEGIN IMMEDIATE``)?"""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


__all__ = ["Faults", "Snapshot", "difference", "normalised", "pg_snapshot", "redis_snapshot",
           "sqlite_snapshot", "write_lock_free"]
