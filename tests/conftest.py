"""Shared fixtures: a movable clock, real SQLite files in a temp dir, real servers.

The conformance fixtures (``mem``, ``vmem``, ``store``, ``store_url``, the ``--backend``
option) are in ``backends.py``; the servers (PostgreSQL + pgvector, Redis) in
``services.py``. Layout: ``conformance/`` holds the behavioural tests that run on every
backend; ``engines/`` what only one engine has (SQLite files, PostgreSQL roles and plans,
Redis keys, the schema parity of the two); ``harness/`` tests of the test servers
themselves (marker ``harness``); the files here are unit tests of pure modules, the CLI,
the docs and the package's shape. Slow tests (crash loops, many processes) carry the
``slow`` marker: ``pytest -m "not slow"`` leaves them out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memstrata import ManualClock, Scope

pytest_plugins = ["services", "backends"]

START = "2026-08-03T09:00:00+00:00"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """The SQLite file of the ``sqlite`` backend (a test asking for it runs on SQLite only)."""
    return tmp_path / "memory.db"


@pytest.fixture
def alice() -> Scope:
    return Scope(user="alice", project="docs-site")


def row_counts(path: Path) -> dict[str, int]:
    """Rows per table of a SQLite file, read with a separate raw connection."""
    from backends import sqlite_row_counts  # a plugin: pytest imports it first

    return sqlite_row_counts(path)
