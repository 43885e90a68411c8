"""Concurrent writers and SIGKILL loops on SQLite and PostgreSQL, at the suite's sizes.

The worker programs are the engine tests' own (``tests/engines/test_sqlite_concurrency.py``
and ``tests/engines/test_postgres_concurrency.py``), imported, not copied; this module
runs them at the ``ci`` or ``full`` size and counts what matters:

- ``lost``: a write a process acknowledged (or, for writers that ran to the end, any
  write it made) that is not in the store;
- ``duplicated``: a write stored more than once (for the ledger race: a key created by
  more than one process, or stored in more than one row);
- ``integrity``/``doctor``: SQLite's ``PRAGMA integrity_check`` after every kill, and
  ``mem.doctor()`` (the stored invariants, incl. the full-text rows) at the end.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from backends import reset, selected
from engines.test_postgres_concurrency import APPENDER, BEGINNER, _start_at
from engines.test_sqlite_concurrency import WRITER
from memstrata import Memory
from memstrata.store.sqlite_driver import sqlite3
from services import AppDatabase

#: The SQLite writer of the engine tests pointed at any URL (PostgreSQL here): it appends
#: ``TAG event I`` episodes and, with a fourth argument, acknowledges each after its commit.
_SQLITE_URL = '"sqlite:///" + path'
assert _SQLITE_URL in WRITER, "the engine tests' WRITER changed: update test_crashes.py"
URL_WRITER = WRITER.replace(_SQLITE_URL, "path")

#: (processes, writes per process) of the concurrent writers; SIGKILL rounds.
SIZES: dict[str, dict[str, Any]] = {
    "ci": {"sqlite_writers": (3, 150), "pg_writers": (4, 150), "pg_racers": 4,
           "sqlite_kills": 6, "pg_kills": 4},
    "full": {"sqlite_writers": (8, 1000), "pg_writers": (16, 1000), "pg_racers": 8,
             "sqlite_kills": 60, "pg_kills": 60},
}


def _need_postgres(config: pytest.Config) -> None:
    if not {"postgres", "postgres+redis"} & set(selected(config)):
        pytest.skip("PostgreSQL not selected (--backend)")


def _tally(stored: list[str], expected: set[str]) -> tuple[int, int]:
    """(lost, duplicated) of ``expected`` writes among the ``stored`` ones."""
    counts = Counter(stored)
    return len(expected - set(counts)), sum(n - 1 for n in counts.values() if n > 1)


def _kill_loop(url: str, rounds: int, seed: int,
               check: Any = None) -> tuple[set[str], float]:
    """Start the acknowledging writer ``rounds`` times and SIGKILL it mid-stream; returns
    the acknowledged writes and the seconds it took."""
    rng = random.Random(seed)
    acked: set[str] = set()
    t0 = time.monotonic()
    for round_ in range(rounds):
        proc = subprocess.Popen([sys.executable, "-c", URL_WRITER, url, f"r{round_}",
                                 "1000000", "ack"], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()  # it is writing: kill it at a random moment
        if first:
            acked.add(first)
        time.sleep(rng.uniform(0.02, 0.3))
        os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        acked |= {line for line in rest.splitlines() if line}
        if check is not None:
            check()
    return acked, time.monotonic() - t0


def _acks_of(rows: list[tuple[str, str]]) -> list[str]:
    """``TAG-I`` of stored ``(source, text)`` rows (the writer's acknowledgement form)."""
    return [f"{src}-{text.rsplit(' ', 1)[1]}" for src, text in rows]


# -- SQLite ------------------------------------------------------------------------------


def test_sqlite_concurrent_writers(tmp_path: Path, size: str, figures: Any) -> None:
    procs_n, writes = SIZES[size]["sqlite_writers"]
    db = tmp_path / "shared.db"
    Memory.open(f"sqlite:///{db}", embedder=None).close()
    t0 = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", URL_WRITER, f"sqlite:///{db}",
                               f"W{i:02d}", str(writes)]) for i in range(procs_n)]
    assert [p.wait(timeout=3000) for p in procs] == [0] * procs_n
    seconds = time.monotonic() - t0
    with sqlite3.connect(db) as c:
        texts = [r[0] for r in c.execute("SELECT text FROM episodes")]
        fts = c.execute("SELECT count(*) FROM episodes_fts").fetchone()[0]
    expected = {f"W{i:02d} event {n}" for i in range(procs_n) for n in range(writes)}
    lost, duplicated = _tally(texts, expected)
    with Memory.open(f"sqlite:///{db}", embedder=None) as mem:
        problems = mem.doctor()
    figures.update(engine="sqlite", processes=procs_n, writes_each=writes,
                   written=len(expected), stored=len(texts), fts_rows=fts, lost=lost,
                   duplicated=duplicated, foreign=len(set(texts) - expected),
                   doctor_problems=len(problems), seconds=round(seconds, 1))
    assert (lost, duplicated, len(texts), fts) == (0, 0, len(expected), len(expected))
    assert problems == []


def test_sqlite_sigkill_loop(tmp_path: Path, size: str, figures: Any) -> None:
    rounds = SIZES[size]["sqlite_kills"]
    db = tmp_path / "crash.db"
    Memory.open(f"sqlite:///{db}", embedder=None).close()
    bad_integrity = 0

    def integrity() -> None:
        nonlocal bad_integrity
        c = sqlite3.connect(db)
        try:
            bad_integrity += c.execute("PRAGMA integrity_check").fetchone()[0] != "ok"
        finally:
            c.close()

    acked, seconds = _kill_loop(f"sqlite:///{db}", rounds, seed=7, check=integrity)
    with sqlite3.connect(db) as c:
        stored = _acks_of(list(c.execute("SELECT source, text FROM episodes")))
    lost, duplicated = _tally(stored, acked)
    with Memory.open(f"sqlite:///{db}", embedder=None) as mem:
        problems = mem.doctor()
    figures.update(engine="sqlite", sigkills=rounds, acknowledged=len(acked),
                   stored=len(stored), lost=lost, duplicated=duplicated,
                   integrity_failures=bad_integrity, doctor_problems=len(problems),
                   seconds=round(seconds, 1))
    assert acked, "the writers never acknowledged anything"
    assert (lost, duplicated, bad_integrity) == (0, 0, 0)
    assert problems == []


# -- PostgreSQL --------------------------------------------------------------------------


@pytest.fixture
def pg(request: pytest.FixtureRequest) -> tuple[str, AppDatabase]:
    """The application role's URL to an emptied conformance database, and the database."""
    _need_postgres(request.config)
    db: AppDatabase = request.getfixturevalue("pg_conformance_db")
    reset(db)
    return db.app_url, db


@pytest.mark.postgres
def test_postgres_concurrent_writers(pg: tuple[str, AppDatabase], size: str,
                                     figures: Any) -> None:
    url, db = pg
    procs_n, writes = SIZES[size]["pg_writers"]
    start = _start_at()
    t0 = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, url, f"P{i:02d}", str(writes),
                               start]) for i in range(procs_n)]
    assert [p.wait(timeout=3000) for p in procs] == [0] * procs_n
    seconds = time.monotonic() - t0
    with psycopg.connect(db.admin_url) as conn:
        texts = [r[0] for r in conn.execute("SELECT text FROM episodes")]
        fts = conn.execute("SELECT count(*) FROM episodes_fts").fetchone()
    expected = {f"P{i:02d} event {n}" for i in range(procs_n) for n in range(writes)}
    lost, duplicated = _tally(texts, expected)
    with Memory.open(url, embedder=None) as mem:
        problems = mem.doctor()
    figures.update(engine="postgres", processes=procs_n, writes_each=writes,
                   written=len(expected), stored=len(texts), lost=lost, duplicated=duplicated,
                   foreign=len(set(texts) - expected), doctor_problems=len(problems),
                   seconds=round(seconds, 1))
    assert (lost, duplicated, len(texts)) == (0, 0, len(expected))
    assert fts == (len(expected),)
    assert problems == []


@pytest.mark.postgres
def test_postgres_ledger_race(pg: tuple[str, AppDatabase], size: str, figures: Any) -> None:
    """Every process begins the same 100 keys at the same moment: one creator per key."""
    url, db = pg
    racers = SIZES[size]["pg_racers"]
    start = _start_at()
    procs = [subprocess.Popen([sys.executable, "-c", BEGINNER, url, f"run{i}", start],
                              stdout=subprocess.PIPE, text=True) for i in range(racers)]
    outputs = [p.communicate(timeout=3000)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * racers
    lines = [line.split() for out in outputs for line in out.splitlines()]
    created = Counter(key for key, resumed in lines if resumed == "False")
    keys = {f"publish:{k}" for k in range(100)}
    with psycopg.connect(db.admin_url) as conn:
        rows = [r[0] for r in conn.execute("SELECT key FROM operations")]
    missing_rows, duplicated_rows = _tally(rows, keys)
    lost = missing_rows + len(keys - set(created))  # no row, or no process created it
    duplicated = duplicated_rows + sum(n - 1 for n in created.values() if n > 1)
    figures.update(engine="postgres", processes=racers, keys=len(keys), begins=len(lines),
                   lost=lost, duplicated=duplicated)
    assert len(lines) == racers * len(keys)
    assert (lost, duplicated) == (0, 0)


@pytest.mark.postgres
def test_postgres_sigkill_loop(pg: tuple[str, AppDatabase], size: str, figures: Any) -> None:
    url, db = pg
    rounds = SIZES[size]["pg_kills"]
    acked, seconds = _kill_loop(url, rounds, seed=11)
    with psycopg.connect(db.admin_url) as conn:
        stored = _acks_of(conn.execute("SELECT source, text FROM episodes").fetchall())
        fts = conn.execute("SELECT count(*) FROM episodes_fts").fetchone()
    lost, duplicated = _tally(stored, acked)
    with Memory.open(url, embedder=None) as mem:
        problems = mem.doctor()
    figures.update(engine="postgres", sigkills=rounds, acknowledged=len(acked),
                   stored=len(stored), lost=lost, duplicated=duplicated,
                   doctor_problems=len(problems), seconds=round(seconds, 1))
    assert acked, "the writers never acknowledged anything"
    assert (lost, duplicated) == (0, 0)
    assert fts == (len(stored),)
    assert problems == []
