"""Many memstrata processes on one PostgreSQL database: nothing lost, nothing doubled.

- 16 processes append 1,000 episodes each: exactly 16,000 rows, each text once, each with
  its full-text row.
- 8 processes begin the same 100 ledger keys at the same moment: exactly one operation
  per key, created by exactly one process; every other process resumed it, and the
  first resume marked it ``unknown`` exactly once (attempts == 2), as with one process
  at a time.
- 3 processes append turns to the same 12 threads while a fourth forgets one marked turn
  of each: no append fails or is lost, and no forgotten word is left in any entry (the
  thread locks: ``PostgresDatabase.lock_threads``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections import Counter

import psycopg
import pytest

from memstrata import Memory, Scope
from services import AppDatabase

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

APPENDER = textwrap.dedent("""
    import sys, time
    from memstrata import Memory, Scope
    url, tag, n, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    mem = Memory.open(url, embedder=None, max_size=2)
    scope = Scope(user="w", project="p")
    time.sleep(max(0.0, start - time.time()))
    for i in range(n):
        mem.episodes.append(scope, text=f"{tag} event {i}", event="tick", source=tag,
                            actor="tool")
    mem.close()
""")

BEGINNER = textwrap.dedent("""
    import random, sys, time
    from memstrata import Memory, Scope
    url, tag, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    mem = Memory.open(url, embedder=None, max_size=2)
    scope = Scope(user="w", project="p")
    keys = [f"publish:{k}" for k in range(100)]
    random.Random(tag).shuffle(keys)
    time.sleep(max(0.0, start - time.time()))
    for key in keys:
        op = mem.ledger.begin(scope, key, intent=f"intent of {tag}", run_id=tag)
        print(key, op.resumed, flush=True)
    mem.close()
""")


THREAD_APPENDER = textwrap.dedent("""
    import sys, time
    from memstrata import Memory, Scope
    url, tag, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    mem = Memory.open(url, embedder=None, max_size=2)
    scope = Scope(user="w", project="threads")
    time.sleep(max(0.0, start - time.time()))
    for round in range(6):
        for t in range(12):
            mem.episodes.append(scope, text=f"{tag} note {round} on the venue plan",
                                source=f"chat:{t}/{tag}-{round}", thread=f"chat:{t}",
                                actor="user")
    mem.close()
""")

FORGETTER = textwrap.dedent("""
    import sys, time
    from memstrata import Memory, Scope
    url, start = sys.argv[1], float(sys.argv[2])
    mem = Memory.open(url, embedder=None, max_size=2)
    scope = Scope(user="w", project="threads")
    time.sleep(max(0.0, start - time.time()))
    for t in range(12):
        time.sleep(0.02)
        report = mem.forget(scope, match=f"lockerword{t}z")
        assert report.counts["episodes"] == 1, report
    mem.close()
""")


def _start_at() -> str:
    # every process starts writing at the same moment, after all have imported and connected
    return str(time.time() + 4.0)


def test_16_processes_append_1000_each(pg_app_url: str,
                                       pg_conformance_db: AppDatabase) -> None:
    start = _start_at()
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, pg_app_url, f"P{i:02d}", "1000",
                               start]) for i in range(16)]
    assert [p.wait(timeout=600) for p in procs] == [0] * 16
    with psycopg.connect(pg_conformance_db.admin_url) as conn:
        texts = [r[0] for r in conn.execute("SELECT text FROM episodes")]
        fts = conn.execute("SELECT count(*) FROM episodes_fts").fetchone()
    assert len(texts) == 16_000
    assert len(set(texts)) == 16_000
    assert set(texts) == {f"P{i:02d} event {n}" for i in range(16) for n in range(1000)}
    assert fts == (16_000,)
    with Memory.open(pg_app_url, embedder=None) as mem:
        assert mem.doctor() == []


def test_8_processes_begin_the_same_100_keys(pg_app_url: str,
                                             pg_conformance_db: AppDatabase) -> None:
    start = _start_at()
    procs = [subprocess.Popen([sys.executable, "-c", BEGINNER, pg_app_url, f"run{i}", start],
                              stdout=subprocess.PIPE, text=True) for i in range(8)]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8
    fresh = Counter(line.split()[0] for out in outputs for line in out.splitlines()
                    if line.split()[1] == "False")
    seen = Counter(line.split()[0] for out in outputs for line in out.splitlines())
    keys = {f"publish:{k}" for k in range(100)}
    assert set(seen) == keys and set(seen.values()) == {8}
    assert fresh == Counter(dict.fromkeys(keys, 1))  # one creator per key
    with psycopg.connect(pg_conformance_db.admin_url) as conn:
        rows = conn.execute("SELECT key, status, attempts, intent, run_id FROM operations"
                            ).fetchall()
    assert len(rows) == 100 and {r[0] for r in rows} == keys
    assert {(r[1], r[2]) for r in rows} == {("unknown", 2)}
    creators = {r[0]: r[4] for r in rows}
    assert all(r[3] == f"intent of {creators[r[0]]}" for r in rows)


def test_appends_and_a_forget_on_the_same_threads(pg_app_url: str,
                                                  pg_conformance_db: AppDatabase) -> None:
    scope = Scope(user="w", project="threads")
    with Memory.open(pg_app_url, embedder=None) as mem:
        for t in range(12):
            mem.episodes.append(scope, text=f"The locker code is lockerword{t}z", actor="user",
                                source=f"chat:{t}/x", thread=f"chat:{t}")
    start = _start_at()
    procs = [subprocess.Popen([sys.executable, "-c", THREAD_APPENDER, pg_app_url, f"A{i}",
                               start]) for i in range(3)]
    procs.append(subprocess.Popen([sys.executable, "-c", FORGETTER, pg_app_url, start]))
    assert [p.wait(timeout=600) for p in procs] == [0] * 4
    with Memory.open(pg_app_url, embedder=None) as mem:
        assert len(mem.episodes.log(scope)) == 3 * 6 * 12
        for t in range(12):
            assert mem.episodes.search(scope, f"lockerword{t}z", k=10) == []
        assert mem.doctor() == []
    with psycopg.connect(pg_conformance_db.admin_url) as conn:
        held = conn.execute("SELECT count(*) FROM episodes_fts WHERE tsv @@ "
                            "to_tsquery('english', 'lockerword0z | lockerword5z')").fetchone()
    assert held == (0,)
