"""The scale-out backend: PostgreSQL with pgvector, shared by stateless memstrata processes.

Contract:
- ``PostgresDatabase.from_url("postgresql://...")`` opens a psycopg 3 connection pool
  (autocommit connections, UTC sessions; each transaction is an explicit BEGIN ...
  COMMIT on one pooled connection, nested ones are savepoints). The schema
  (:mod:`memstrata.store.pg_schema`) is migrated on open when the role may run DDL; an
  application role that may not gets a :class:`ConfigError` naming the owner-side step
  (:meth:`PostgresDatabase.migrate`).
- ``transaction(tenant)`` sets ``app.tenant`` for that transaction only
  (``set_config(..., true)``, the parameterised ``SET LOCAL``), so row-level security
  confines every statement to the tenant; maintenance transactions also set
  ``memstrata.maintenance``, which the append-only triggers require before a delete.
  Transactions nest on one thread as savepoints (same tenant only).
- SQL arrives with ``?`` placeholders and is translated to psycopg's ``%s``; rows come
  back as dicts; times as aware datetimes.
- Concurrency (READ COMMITTED, no body re-run needed): statements that only insert new
  rows (appends, ``ON CONFLICT`` upserts, ledger ``begin``) run concurrently; the first
  statement of a write transaction that reads or changes existing rows (SELECT, UPDATE,
  DELETE) first takes a transaction-scoped advisory lock on the tenant. Read-then-write
  sequences of the layers (supersede a slot, next checkpoint version, feedback counts,
  ledger resume) are therefore serialised per tenant exactly as SQLite's ``BEGIN
  IMMEDIATE`` serialises them per file, while appends from many writers do not wait on
  each other unless they write to one episode thread: each thread has an advisory lock
  (:meth:`PostgresDatabase.lock_threads`), taken first by an append and after the tenant
  lock by a forget or a sweep, before it deletes (an append never takes the tenant lock,
  so no two transactions wait on each other in a cycle). A process's first write of a
  tenant records the tenant in ``tenants`` as the transaction's first statement (before
  any lock), so a refused write leaves no trace.
  Reads of ``episodes`` alone never lock: episode rows are immutable. Every
  tenant lock is taken after a transaction's inserts of fresh keys, and locked
  transactions insert no key an unlocked one could hold; the rows an append changes
  (its threads' index entries) are those its thread locks hold; so the scheme admits no
  lock cycle.
- Errors: schema refusals (unique, check, trigger) become :class:`Conflict`; a
  serialization failure or deadlock becomes :class:`BackendError` with
  ``details["retryable"] = True``. A ``with`` body cannot be re-run, so
  :meth:`PostgresDatabase.run` re-runs a callable transaction body (bounded attempts,
  jittered backoff) for callers that want it; the layers do not need it under the
  locking above.
- ``text_search`` (:mod:`memstrata.store.pg_search`) ranks ``*_fts`` tsvector rows (GIN)
  matching any content word of the query (``plainto_tsquery`` per word, OR-ed) by
  ``ts_rank`` with length normalisation (a record's own words weigh twice its thread
  context's) times the inverse document
  frequency of the words each row holds among the caller's rows (``ts_rank`` has none:
  a word in every row weighed like a rare one), inside the caller's filter.
  Matching goes through the schema's SECURITY DEFINER match functions, the only way the
  GIN index serves the application role under row-level security (see pg_schema). An
  episode search whose filter names only episode columns runs on ``episodes_fts`` alone
  (it carries copies of them). As in the SQLite backend, a large index leaves out query
  words that occur in ``COMMON_TERM_DOCS`` or more of the rows the caller's filter
  admits (never counted across users or tenants; all stay when all are).
- ``compact`` runs VACUUM on the tables that hold text when the role may (owner, or
  ``MAINTAIN`` on PostgreSQL 17+), so dead tuples with forgotten text are pruned; rows
  are invisible to SQL from the moment the forget commits either way. Bytes of pruned
  tuples may linger in a page's free space and in WAL until overwritten (PostgreSQL has
  no secure delete): a deployment that needs more encrypts its storage.
- ``tenants()`` lists every tenant with data (the ``tenants`` registry), so retention,
  doctor and reindex can visit each tenant under row-level security.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import BackendError, ConfigError, Conflict
from .base import Capabilities, Row
from .lexical import AllCommon
from .pg_schema import (
    DEFINER_READ_TABLES,
    INDEXED_DIMS,
    MAINTENANCE_SETTING,
    MIGRATIONS,
    TENANT_SETTING,
    TENANT_TABLES,
)
from .pg_search import PgTextSearch
from .pg_tx import PgTx, needs_tenant_lock, thread_lock_key, translate
from .sql import chunks

if TYPE_CHECKING:
    from .pg_vectors import PgVectorIndex

T = TypeVar("T")
Conn = psycopg.Connection[Row]

#: Tables whose rows carry user text (compacted after a forget).
_TEXT_TABLES = ("facts", "facts_fts", "episodes", "episodes_fts", "checkpoints", "operations",
                "scratch", "feedback", "procedures")
_MIGRATION_LOCK = 0x6D656D73  # "mems": one migrator at a time
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_PASSWORD_PARAM = re.compile(r"((?:^|&)password=)[^&]*", re.I)


def mask_url(url: str) -> str:
    """The URL with its password replaced, for messages and ``Memory.__repr__``."""
    parts = urlsplit(url)
    if parts.password is not None:
        parts = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1))
    return urlunsplit(parts._replace(query=_PASSWORD_PARAM.sub(r"\1***", parts.query)))


@dataclass
class _Open:
    tx: PgTx


class PostgresDatabase:
    """Memstrata's store on PostgreSQL + pgvector, safe for many processes and threads."""

    engine = "postgresql"
    capabilities = Capabilities(tenant_isolation=True, shared=True, secure_delete=False)

    def __init__(self, conninfo: str, *, min_size: int = 1, max_size: int = 10,
                 migrate: bool | str = "auto", app_role: str | None = None,
                 timeout: float = 30.0, application_name: str = "memstrata") -> None:
        self._conninfo = conninfo
        self.url = mask_url(conninfo)
        self._local = threading.local()
        self._registered: set[str] = set()
        self._registered_lock = threading.Lock()
        self._vector_ready = False
        self._search = PgTextSearch()
        self._pool_options: dict[str, Any] = {
            "min_size": min_size, "max_size": max(max_size, 2), "timeout": timeout,
            "kwargs": {"autocommit": True, "row_factory": dict_row,
                       "application_name": application_name}}
        self._pool = self._open_pool()
        try:
            self._prepare_schema(migrate, app_role)
        except BaseException:
            self._pool.close()
            raise

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresDatabase:
        """Open ``postgresql://user:password@host/db`` (libpq query parameters allowed).

        Options: ``min_size``/``max_size`` (pool), ``migrate`` (``"auto"``: migrate when
        needed and permitted; ``True``; ``False``), ``app_role`` (granted row access by the
        first migration), ``migrate_only`` (migrate, then close; returns the closed
        database)."""
        if url.startswith("postgres://"):
            url = "postgresql://" + url.removeprefix("postgres://")
        migrate_only = bool(options.pop("migrate_only", False))
        if migrate_only:
            options["migrate"] = True
            options.setdefault("max_size", 2)
        db = cls(url, **options)
        if migrate_only:
            db.close()
        return db

    @classmethod
    def migrate(cls, owner_url: str, *, app_role: str | None = None) -> list[str]:
        """Apply pending migrations as the owner role; returns every applied name."""
        db = cls.from_url(owner_url, migrate=True, app_role=app_role, max_size=2)
        try:
            return db.applied_migrations()
        finally:
            db.close()

    # -- connections ----------------------------------------------------
    def _open_pool(self) -> ConnectionPool[Conn]:
        try:
            # One direct connection first: a bad password or host fails now, with the
            # server's reason, instead of as a pool timeout.
            psycopg.connect(self._conninfo, connect_timeout=max(1, int(self._pool_options[
                "timeout"]))).close()
            pool: ConnectionPool[Conn] = ConnectionPool(
                self._conninfo, configure=self._configure, open=False, name="memstrata",
                **self._pool_options)
            pool.open(wait=True, timeout=self._pool_options["timeout"])
        except (PoolTimeout, psycopg.Error) as exc:
            raise BackendError(f"cannot connect to {self.url}: {exc}",
                               hint="check the URL, the password and that the server "
                                    "is running") from exc
        return pool

    def _configure(self, conn: Conn) -> None:
        conn.execute("SET TIME ZONE 'UTC'")
        self._register_vector(conn)

    def _register_vector(self, conn: Conn) -> None:
        from pgvector.psycopg import register_vector

        try:
            register_vector(conn)
        except psycopg.ProgrammingError:
            return  # no vector type yet: the first migration creates it
        self._vector_ready = True

    def close(self) -> None:
        self._pool.close()

    def __repr__(self) -> str:
        return f"PostgresDatabase({self.url!r})"

    # -- migrations -----------------------------------------------------
    def _prepare_schema(self, migrate: bool | str, app_role: str | None) -> None:
        pending = self._pending_migrations()
        if not pending:
            return
        if migrate is False:
            raise ConfigError(f"{self.url} lacks migrations {', '.join(pending)}",
                              hint="run PostgresDatabase.migrate(OWNER_URL) as the owner")
        try:
            with self._pool.connection() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                conn.execute("CREATE TABLE IF NOT EXISTS migrations "
                             "(name text PRIMARY KEY, applied_at timestamptz NOT NULL)")
                done = {r["name"] for r in conn.execute("SELECT name FROM migrations")}
                for name, fn in MIGRATIONS.pending(done):
                    fn(conn, app_role)
                    conn.execute("INSERT INTO migrations (name, applied_at) VALUES (%s, %s)",
                                 (name, datetime.now(UTC)))
        except pg_errors.InsufficientPrivilege as exc:
            raise ConfigError(
                f"{self.url} lacks migrations {', '.join(pending)} and this role may not "
                f"apply them: {exc}",
                hint="run PostgresDatabase.migrate(OWNER_URL, app_role=...) as the owner",
            ) from exc
        except psycopg.Error as exc:
            raise BackendError(f"migrating {self.url} failed: {exc}") from exc
        if not self._vector_ready:
            # Connections opened before the extension existed: start fresh ones.
            self._pool.close()
            self._pool = self._open_pool()

    def _pending_migrations(self) -> list[str]:
        try:
            with self._pool.connection() as conn:
                done = {r["name"] for r in conn.execute("SELECT name FROM migrations")}
        except pg_errors.UndefinedTable:
            done = set()
        except psycopg.Error as exc:
            raise BackendError(f"cannot read migrations of {self.url}: {exc}") from exc
        return [name for name, _ in MIGRATIONS.pending(done)]

    def applied_migrations(self) -> list[str]:
        with self._pool.connection() as conn:
            return [r["name"] for r in conn.execute("SELECT name FROM migrations ORDER BY name")]

    # -- transactions ---------------------------------------------------
    @contextmanager
    def transaction(self, tenant: str, *, write: bool = True,
                    maintenance: bool = False) -> Iterator[PgTx]:
        outer: _Open | None = getattr(self._local, "open", None)
        if outer is not None:
            if outer.tx.tenant != tenant:
                raise BackendError(f"a transaction for tenant {outer.tx.tenant!r} is open; "
                                   f"cannot nest one for {tenant!r}")
            saved = (outer.tx.writable, outer.tx.maintenance, outer.tx.locked)
            outer.tx.flush()  # queued entries belong to the outer transaction
            try:
                with _translated(), outer.tx.conn.transaction():
                    if maintenance and not outer.tx.maintenance:
                        outer.tx.conn.execute("SELECT set_config(%s, 'on', true)",
                                              (MAINTENANCE_SETTING,))
                        outer.tx.maintenance = True
                    outer.tx.writable = outer.tx.writable or write or maintenance
                    yield outer.tx
                    outer.tx.flush()  # inside the savepoint its rows belong to
            except BaseException:
                # a rolled-back savepoint also released its locks, settings and rows
                outer.tx.writable, outer.tx.maintenance, outer.tx.locked = saved
                outer.tx.discard_pending()
                raise
            return
        register = (write or maintenance) and tenant not in self._registered
        with _translated(), self._pool.connection() as conn:
            tx = PgTx(conn, tenant, writable=write or maintenance, maintenance=maintenance)
            self._local.open = _Open(tx)
            try:
                # BEGIN and the tenant in one round trip (a simple query may hold two
                # statements; the values are quoted by psycopg, never interpolated raw).
                conn.execute(pg_sql.SQL(
                    "BEGIN; SELECT set_config({}, {}, true), set_config({}, {}, true)"
                ).format(pg_sql.Literal(TENANT_SETTING), pg_sql.Literal(tenant),
                         pg_sql.Literal(MAINTENANCE_SETTING),
                         pg_sql.Literal("on" if maintenance else "off")))
                if register:
                    # the tenant's first write in this process records it, in the same
                    # transaction (a refused write leaves no trace), before any lock
                    conn.execute("INSERT INTO tenants (tenant) VALUES (%s) "
                                 "ON CONFLICT DO NOTHING", (tenant,))
                try:
                    yield tx
                    tx.flush()
                except BaseException:
                    with suppress(psycopg.Error):  # a broken connection: the pool drops it
                        conn.rollback()
                    raise
                conn.commit()
                if register:
                    with self._registered_lock:
                        self._registered.add(tenant)
            finally:
                self._local.open = None

    def run(self, tenant: str, body: Callable[[PgTx], T], *, write: bool = True,
            maintenance: bool = False, attempts: int = 5) -> T:
        """Run ``body(tx)`` in a transaction, re-running it (up to ``attempts`` times, with
        jittered backoff) when PostgreSQL reports a serialization failure or deadlock."""
        return self.retrying(lambda: self._once(tenant, body, write, maintenance),
                             attempts=attempts)

    def _once(self, tenant: str, body: Callable[[PgTx], T], write: bool,
              maintenance: bool) -> T:
        with self.transaction(tenant, write=write, maintenance=maintenance) as tx:
            return body(tx)

    @staticmethod
    def retrying(fn: Callable[[], T], *, attempts: int = 5) -> T:
        """Call ``fn`` again while it raises a retryable :class:`BackendError`."""
        for attempt in range(1, attempts + 1):
            try:
                return fn()
            except BackendError as exc:
                if not exc.details.get("retryable") or attempt == attempts:
                    raise
                time.sleep(min(0.5, 0.01 * 2 ** attempt) * random.uniform(0.5, 1.5))
        raise AssertionError("unreachable")

    def tenants(self) -> list[str]:
        """Every tenant that has (or had) rows, sorted. The registry is private to each
        tenant; only a maintenance transaction (this one) lists them all."""
        with _translated(), self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT set_config(%s, 'on', true)", (MAINTENANCE_SETTING,))
            return [r["tenant"] for r in conn.execute("SELECT tenant FROM tenants ORDER BY 1")]

    # -- search ---------------------------------------------------------
    def readers_clause(self, column: str) -> str:
        return f"({column} IS NULL OR jsonb_exists({column}::jsonb, ?))"

    def text_search(self, tx: Any, table: str, query: str, where: str,
                    params: Sequence[Any], limit: int, drop: Sequence[str] = (),
                    all_common: AllCommon = "keep",
                    among: tuple[str, Sequence[Any]] | None = None,
                    weight: tuple[str, Sequence[Any]] | None = None
                    ) -> list[tuple[str, float]]:
        return self._search.search(tx, table, query, where, params, limit, drop=drop,
                                   all_common=all_common, among=among, weight=weight)

    def index_text(self, tx: Any, table: str, record_id: str, tenant: str, text: str,
                   context: str = "") -> None:
        if table not in ("episodes", "facts"):
            raise ValueError(table)
        if not isinstance(tx, PgTx):
            raise BackendError("index_text needs a transaction of this database")
        tx.defer_fts(table, tenant, record_id, text, context)

    def vector_index(self, model: str, dims: int) -> PgVectorIndex:
        """The pgvector-backed index (:class:`memstrata.store.base.VectorIndex`)."""
        from .pg_vectors import PgVectorIndex

        return PgVectorIndex(model, dims)

    def sync_vectors(self, tenant: str | None = None) -> None:
        """Nothing to do: the database is the index."""

    def delete_vectors(self, tx: Any, tenant: str, record_ids: Sequence[str]) -> int:
        from .pg_vectors import delete_vectors

        return delete_vectors(tx, tenant, record_ids)

    def lock_threads(self, tx: Any, tenant: str, threads: Sequence[tuple[str, str]]) -> None:
        """A transaction-scoped advisory lock per thread, all taken in one statement in the
        order of their keys' hashes (so two transactions never wait on each other in a
        cycle). Appends take them first and never the tenant lock; a forget or a sweep
        takes them after the tenant lock, before it deletes (see the module docstring)."""
        keys = sorted({thread_lock_key(tenant, scope_key, thread)
                       for scope_key, thread in threads})
        if keys and isinstance(tx, PgTx) and tx.maintenance:
            # a forget or a sweep holds the tenant lock first, whatever it read before (a
            # forget by episode ids alone reads no mutable table first): one order, no cycle
            tx.lock()
        if keys:
            tx.raw_execute("SELECT pg_advisory_xact_lock(h) FROM (SELECT hashtextextended(k, 1) "
                           "AS h FROM unnest(%s::text[]) AS k ORDER BY 1) AS s", (keys,))

    def vector_count(self, tx: Any, tenant: str, record_ids: Sequence[str]) -> int:
        total = 0
        for chunk in chunks(list(record_ids)):
            row = tx.raw_one("SELECT count(*) AS n FROM vectors WHERE tenant = %s AND "
                             "record_id = ANY(%s)", (tenant, list(chunk)))
            total += int(row["n"]) if row else 0
        return total

    # -- maintenance ----------------------------------------------------
    def compact(self) -> list[str]:
        """VACUUM the tables that hold text (prunes the dead tuples of forgotten rows) where
        permitted; autovacuum does it otherwise, and always for ``vectors`` (vacuuming an
        HNSW index repairs the graph: too slow to wait for). The rows themselves are gone
        from SQL the moment the forget commits. Returns a note naming the text tables this
        role may not VACUUM (none: every one was)."""
        with _translated(), self._pool.connection() as conn:
            allowed = conn.execute(
                "SELECT c.relname AS t FROM pg_class c JOIN pg_namespace n ON "
                "n.oid = c.relnamespace WHERE n.nspname = current_schema() AND "
                "c.relname = ANY(%s) AND (pg_has_role(current_user, c.relowner, 'USAGE') OR "
                "(current_setting('server_version_num')::int >= 170000 AND "
                "has_table_privilege(c.oid, 'MAINTAIN')))",
                (list(_TEXT_TABLES),)).fetchall()
            for row in allowed:
                conn.execute(pg_sql.SQL("VACUUM {}").format(pg_sql.Identifier(row["t"])))
        refused = [t for t in _TEXT_TABLES if t not in {row["t"] for row in allowed}]
        if not refused:
            return []
        return [f"this role may not VACUUM {', '.join(refused)}: their forgotten rows' dead "
                "tuples stay until autovacuum prunes them (grant the role MAINTAIN on them, "
                "PostgreSQL 17+, or compact as their owner)"]

    def stats(self) -> dict[str, Any]:
        counts = dict.fromkeys(("facts", "episodes", "checkpoints", "operations", "scratch",
                                "vectors", "procedures"), 0)
        tenants = self.tenants()
        for tenant in tenants:
            with self.transaction(tenant, write=False) as tx:
                for table in counts:
                    row = tx.raw_one(f"SELECT count(*) AS n FROM {table}")
                    counts[table] += int(row["n"]) if row else 0
        with _translated(), self._pool.connection() as conn:
            size = conn.execute("SELECT pg_database_size(current_database()) AS b").fetchone()
            dead = conn.execute(
                "SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE relname = ANY(%s)",
                (list(TENANT_TABLES),)).fetchall()
        return {"backend": "postgresql", "url": self.url, "bytes": size["b"] if size else None,
                "rows": counts, "tenants": len(tenants),
                "dead_tuples": {r["relname"]: r["n_dead_tup"] for r in dead},
                "migrations": self.applied_migrations()}

    def verify(self) -> list[str]:
        """Schema guards in place, row-level security not bypassed, full-text rows in step
        with their records (per tenant)."""
        problems = [f"migration {name} not applied" for name in self._pending_migrations()]
        with _translated(), self._pool.connection() as conn:
            role = conn.execute("SELECT rolname, rolsuper, rolbypassrls FROM pg_roles "
                                "WHERE rolname = current_user").fetchone()
            if role and (role["rolsuper"] or role["rolbypassrls"]):
                problems.append(f"connected as {role['rolname']}, which bypasses row-level "
                                "security: connect as the application role")
            for row in conn.execute(
                "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
                "n.nspname = current_schema() AND c.relname = ANY(%s)",
                (list(TENANT_TABLES),),
            ).fetchall():
                forced = row["relforcerowsecurity"] or row["relname"] in DEFINER_READ_TABLES
                if not (row["relrowsecurity"] and forced):
                    problems.append(f"row-level security is not forced on {row['relname']}")
        for tenant in self.tenants():
            with self.transaction(tenant, write=False) as tx:
                for t in ("facts", "episodes"):
                    missing = tx.raw_one(
                        f"SELECT count(*) AS n FROM {t} r WHERE NOT EXISTS "
                        f"(SELECT 1 FROM {t}_fts f WHERE f.tenant = r.tenant AND f.id = r.id)")
                    if missing and missing["n"]:
                        problems.append(f"{missing['n']} {t} rows are missing from {t}_fts "
                                        f"(tenant {tenant})")
        return problems


@contextmanager
def _translated() -> Iterator[None]:
    """psycopg errors to memstrata's tree (Conflict for schema refusals)."""
    try:
        yield
    except pg_errors.IntegrityError as exc:
        raise Conflict(f"refused by the schema: {_first_line(exc)}") from exc
    except _RETRYABLE as exc:
        raise BackendError(f"PostgreSQL asks to retry: {_first_line(exc)}",
                           hint="run the operation again", retryable=True) from exc
    except PoolTimeout as exc:
        raise BackendError(f"no database connection available: {exc}",
                           hint="raise max_size or check the server") from exc
    except psycopg.Error as exc:
        raise BackendError(f"PostgreSQL error: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def vector_dims_indexed(dims: int) -> bool:
    """Whether episode vectors of this dimension are searched through HNSW."""
    return dims in INDEXED_DIMS


__all__ = ["PgTx", "PostgresDatabase", "mask_url", "needs_tenant_lock", "translate",
           "vector_dims_indexed"]
