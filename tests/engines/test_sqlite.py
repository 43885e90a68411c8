"""The SQLite engine itself, read with a raw connection: pragmas and recorded migrations.

The schema's invariants are checked on every backend in ``conformance/test_invariants.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memstrata import Memory


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_pragmas_and_migrations(mem: Memory, db_path: Path) -> None:
    c = raw(db_path)
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = [r[0] for r in c.execute("SELECT name FROM migrations ORDER BY name")]
    assert names == ["m001_initial", "m002_tenants"]
    mem.close()
    Memory.open(f"sqlite:///{db_path}", embedder=None).close()  # reopen: no re-run
    assert [r[0] for r in c.execute("SELECT name FROM migrations ORDER BY name")] == names
