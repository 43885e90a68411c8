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
- A forget by episode ids holds the tenant lock before it waits for a thread lock: one
  order for every forget and sweep, so a forget by ids and a forget by match (which takes
  the tenant lock with its first read) never wait on each other in a cycle.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter

import psycopg
import pytest

from memstrata import ForgetReport, Memory, Scope
from memstrata.store.pg_tx import tenant_lock_key, thread_lock_key
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
        op = mem.ledger.begin(scope, key, intent=f"publish {key}", run_id=tag)
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
    # every other process found its creator's run alive: in progress, nothing stored
    assert {(r[1], r[2]) for r in rows} == {("pending", 1)}
    assert all(r[3] == f"publish {r[0]}" for r in rows)


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


def _waiting_advisory(conn: psycopg.Connection[tuple[object, ...]], other_than: int) -> bool:
    row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                       "NOT granted AND pid <> %s", (other_than,)).fetchone()
    return bool(row and row[0])


def test_a_forget_by_ids_takes_the_tenant_lock_before_a_thread_lock(
        pg_app_url: str, pg_conformance_db: AppDatabase) -> None:
    # The cycle this prevents: a forget by ids held a thread's lock and waited for the
    # tenant's, while a forget by match held the tenant's and waited for that thread's.
    scope = Scope(user="w", project="lock-order")
    with Memory.open(pg_app_url, embedder=None) as mem:
        turn = mem.episodes.append(scope, text="The locker code is quartzlock7",
                                   actor="user", source="chat:9/1", thread="chat:9")
        with psycopg.connect(pg_conformance_db.admin_url) as probe:
            scope_key, tenant = probe.execute(
                "SELECT scope_key, tenant FROM episodes WHERE id = %s", (turn.id,)).fetchone()
        reports: list[ForgetReport] = []
        errors: list[BaseException] = []

        def forget() -> None:
            try:
                reports.append(mem.forget(scope, record_ids=[turn.ref]))
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        # the other forget, half way: it holds the tenant lock
        with psycopg.connect(pg_conformance_db.admin_url) as other, \
                psycopg.connect(pg_conformance_db.admin_url) as probe:
            other.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                          (tenant_lock_key(tenant),))
            worker = threading.Thread(target=forget)
            worker.start()
            deadline = time.monotonic() + 20
            while not _waiting_advisory(probe, other.info.backend_pid):
                assert time.monotonic() < deadline, "the forget never waited for a lock"
                assert worker.is_alive(), (reports, errors)
                time.sleep(0.02)
            # ... and now wants the thread's lock: free, since the waiting forget holds none
            other.execute("SET LOCAL lock_timeout = '5s'")
            other.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))",
                          (thread_lock_key(tenant, scope_key, "chat:9"),))
            other.commit()
            worker.join(timeout=30)
        assert not worker.is_alive() and errors == []
        assert reports[0].counts["episodes"] == 1
        assert mem.episodes.search(scope, "quartzlock7", k=5) == []
        assert mem.doctor() == []
