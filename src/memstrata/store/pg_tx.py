"""One transaction on PostgreSQL: placeholders, the tenant lock, batched full-text rows.

Contract (used by :mod:`memstrata.store.postgres` and :mod:`memstrata.store.pg_vectors`):
- SQL arrives with ``?`` placeholders and is translated to psycopg's ``%s``
  (:func:`translate`; a literal ``%`` doubles).
- The first statement of a write transaction that reads or changes existing rows takes a
  transaction-scoped advisory lock on the tenant (:func:`needs_tenant_lock`); inserts and
  reads of immutable episodes never do (see the engine's docstring for why this admits no
  lock cycle).
- Full-text entries are queued (:meth:`PgTx.defer_fts`) and written in one statement per
  table before the next statement or the commit.
- ``raw_*`` methods run the engine's own statements (``%s`` placeholders, no lock).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import psycopg

from ..errors import BackendError
from .base import Row
from .lexical import plain_words

Conn = psycopg.Connection[Row]

#: Full-text configuration: English stemming, like SQLite's porter tokenizer.
TS_CONFIG = "english"
#: The record's text at weight A, its context (neighbouring records) at weight B ...
_TSV = (f"setweight(to_tsvector('{TS_CONFIG}', x.b), 'A') || "
        f"setweight(to_tsvector('{TS_CONFIG}', x.c), 'B')")
#: Columns of the record copied into its full-text row (immutable episodes only), so a
#: search whose filter names only these runs on the full-text table alone.
_FTS_COPIED = {"episodes": ("s_user", "s_project", "s_agent", "expires_at", "observed_at",
                            "readers"), "facts": ()}
_TABLES_RE = re.compile(r"\b(?:FROM|JOIN)\s+([A-Za-z_][A-Za-z0-9_]*)", re.I)
#: A write transaction may read these without the tenant lock: their rows never change.
_IMMUTABLE_READS = frozenset({"episodes", "episodes_fts"})

@lru_cache(maxsize=2048)
def translate(sql: str) -> str:
    """``?`` placeholders to psycopg's ``%s`` (a literal ``%`` doubles)."""
    return sql.replace("%", "%%").replace("?", "%s")


def tenant_lock_key(tenant: str) -> str:
    """The text whose ``hashtextextended(key, 0)`` is the tenant's advisory lock."""
    return "memstrata:" + tenant


def thread_lock_key(tenant: str, scope_key: str, thread: str) -> str:
    """The text whose ``hashtextextended(key, 1)`` is one episode thread's advisory lock
    (:meth:`memstrata.store.postgres.PostgresDatabase.lock_threads`)."""
    return f"memstrata:{tenant}:thread:{scope_key}\x1f{thread}"


@lru_cache(maxsize=2048)
def needs_tenant_lock(sql: str) -> bool:
    """Does this statement read or change existing rows (see the module contract)?"""
    head = sql.lstrip()[:6].upper()
    if head.startswith("INSERT"):
        return False
    if head.startswith(("SELECT", "WITH")):
        tables = {t.lower() for t in _TABLES_RE.findall(sql)}
        return not tables <= _IMMUTABLE_READS
    return True


class PgTx:
    """One open transaction (or savepoint) on one pooled connection."""

    def __init__(self, conn: Conn, tenant: str, *, writable: bool, maintenance: bool) -> None:
        self.conn = conn
        self.tenant = tenant
        self.writable = writable
        self.maintenance = maintenance
        self.locked = False
        self._fts: dict[str, dict[tuple[str, str], tuple[str, str]]] = {}

    def _lock_for(self, sql: str) -> None:
        self.flush()
        if self.writable and not self.locked and needs_tenant_lock(sql):
            self.lock()

    def defer_fts(self, table: str, tenant: str, record_id: str, text: str,
                  context: str = "") -> None:
        """Queue a full-text entry; written before the next statement or the commit, in
        one statement per table (a batch append indexes hundreds of rows at once). The
        parser would keep a path, a URL or a version as one lexeme: it is given the words
        (:func:`~memstrata.store.lexical.plain_words`), as a query is split into them."""
        self._fts.setdefault(table, {})[(tenant, record_id)] = (plain_words(text),
                                                                plain_words(context))

    def discard_pending(self) -> None:
        """Forget queued full-text entries (their rows were rolled back)."""
        self._fts.clear()

    def flush(self) -> None:
        """Write queued full-text entries now."""
        if not self._fts:
            return
        pending, self._fts = self._fts, {}
        for table, entries in pending.items():
            keys = list(entries)
            cols = "".join(f", {c}" for c in _FTS_COPIED[table])
            copied = "".join(f", r.{c}" for c in _FTS_COPIED[table])
            written = self.conn.execute(
                f"INSERT INTO {table}_fts (tenant, id, tsv{cols}) SELECT r.tenant, r.id, "
                f"{_TSV}{copied} FROM unnest(%s::text[], %s::text[], %s::text[], "
                f"%s::text[]) AS x(t, i, b, c) JOIN {table} r ON r.tenant = x.t AND "
                f"r.id = x.i ON CONFLICT (tenant, id) DO UPDATE SET tsv = excluded.tsv",
                ([k[0] for k in keys], [k[1] for k in keys], [entries[k][0] for k in keys],
                 [entries[k][1] for k in keys])).rowcount
            if written != len(keys):
                raise BackendError(f"cannot index {len(keys) - written} missing {table} rows")

    def lock(self) -> None:
        """Take the tenant's transaction lock now (idempotent)."""
        if not self.locked:
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                              (tenant_lock_key(self.tenant),))
            self.locked = True

    def _run(self, sql: str, params: Sequence[Any]) -> psycopg.Cursor[Row]:
        if params:
            return self.conn.execute(translate(sql), params)
        return self.conn.execute(sql)  # no parameters: psycopg sends the text as it is

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        self._lock_for(sql)
        return self._run(sql, params).rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._lock_for(sql)
        if len(rows) == 1:  # one round trip instead of a pipeline's enter/sync/exit
            self.conn.execute(translate(sql), rows[0])
            return
        with self.conn.cursor() as cur:
            cur.executemany(translate(sql), rows)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        self._lock_for(sql)
        return self._run(sql, params).fetchone()

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        self._lock_for(sql)
        return self._run(sql, params).fetchall()

    # The backend's own statements: psycopg placeholders (%s), no tenant lock (each caller
    # is safe without it).
    def raw_execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        self.flush()
        return self.conn.execute(sql, params or None).rowcount

    def raw_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        self.flush()
        return self.conn.execute(sql, params or None).fetchone()

    def raw_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        self.flush()
        return self.conn.execute(sql, params or None).fetchall()


__all__ = ["TS_CONFIG", "PgTx", "needs_tenant_lock", "translate"]
