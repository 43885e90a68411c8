"""Shared fixtures: real SQLite files in a temp dir, a movable clock, real servers."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import ManualClock, Memory, Scope

pytest_plugins = ["services", "backends"]

START = "2026-08-03T09:00:00+00:00"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # The conformance suite: every test on `mem` runs on each backend (see backends.py),
    # except those that read the SQLite file itself (`db_path`).
    if "backend" in metafunc.fixturenames:
        from backends import backend_params  # a plugin: imported by pytest first

        metafunc.parametrize("backend", backend_params(
            raw_sqlite="db_path" in metafunc.fixturenames))


@pytest.fixture
def mem(request: pytest.FixtureRequest, backend: str, tmp_path: Path,
        clock: ManualClock) -> Iterator[Memory]:
    """A store on ``backend``; on SQLite it is the file at ``db_path``."""
    from backends import open_memory

    m = open_memory(request, backend, tmp_path, clock)
    yield m
    m.close()


@pytest.fixture
def alice() -> Scope:
    return Scope(user="alice", project="docs-site")


def row_counts(path: Path) -> dict[str, int]:
    """Rows per table, read with a separate raw connection."""
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE '%_fts_%'")]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()
