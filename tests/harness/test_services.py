"""Smoke tests of the real-server fixtures in ``services``.

They prove what the PostgreSQL and Redis backends will rely on: pgvector HNSW search,
full-text search, row-level security that the application role cannot get around,
pooled connections over the unix-socket URL, Redis expiry and prefix scans, and that
the servers go away (with their directories) when stopped or when the test process dies.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
import redis
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg_pool import ConnectionPool

from services import (
    AppDatabase,
    PostgresService,
    RedisService,
    ServiceUnavailable,
    _unavailable,
    create_app_database,
    drop_app_database,
    start_redis,
)

#: Tests of PostgreSQL, pgvector and Redis themselves and of the test servers, not of
#: memstrata: ``pytest -m "not harness"`` leaves them out.
pytestmark = pytest.mark.harness

# ---------------------------------------------------------------- PostgreSQL


def test_pgvector_hnsw_matches_exact_nearest_neighbours(pg_database: AppDatabase) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    query = rng.normal(size=16).astype(np.float32)
    with psycopg.connect(pg_database.owner_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # as a migration would
        register_vector(conn)
        conn.execute("CREATE TABLE item (id int PRIMARY KEY, embedding vector(16) NOT NULL)")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO item VALUES (%s, %s)", [(i, v) for i, v in enumerate(vectors)]
            )
        conn.execute("CREATE INDEX item_hnsw ON item USING hnsw (embedding vector_cosine_ops)")
        conn.execute("SET enable_seqscan = off")
        search = "SELECT id FROM item ORDER BY embedding <=> %s LIMIT 5"
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + search, (query,)))
        got = [row[0] for row in conn.execute(search, (query,))]

    assert "item_hnsw" in plan
    cosine = vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
    assert got == [int(i) for i in np.argsort(-cosine)[:5]]


def test_full_text_search_ranks_the_matching_document(pg_database: AppDatabase) -> None:
    with psycopg.connect(pg_database.owner_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE doc (id int PRIMARY KEY, body text NOT NULL, tsv tsvector"
            " GENERATED ALWAYS AS (to_tsvector('english', body)) STORED)"
        )
        conn.execute("CREATE INDEX doc_tsv ON doc USING gin (tsv)")
        conn.execute(
            "INSERT INTO doc VALUES (1, 'The deploy runbook: roll back with helm rollback'),"
            " (2, 'Foxes were jumping over the sleeping dogs'),"
            " (3, 'A fox jumped once; the dog slept'),"
            " (4, 'Fox jumps: foxes jump, the fox keeps jumping')"
        )
        rows = conn.execute(
            "SELECT id FROM doc, websearch_to_tsquery('english', 'jumping foxes') q"
            " WHERE tsv @@ q ORDER BY ts_rank(tsv, q) DESC, id"
        ).fetchall()
        # Stemming is what makes 'jumped'/'fox' match 'jumping foxes'.
        assert {r[0] for r in rows} == {2, 3, 4}
        assert rows[0][0] == 4  # the densest match ranks first
        none = conn.execute(
            "SELECT count(*) FROM doc WHERE tsv @@ websearch_to_tsquery('english', 'kubernetes')"
        ).fetchone()
        assert none == (0,)


def _make_tenant_table(db: AppDatabase) -> None:
    with psycopg.connect(db.owner_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE note (tenant text NOT NULL, body text NOT NULL)")
        conn.execute("ALTER TABLE note ENABLE ROW LEVEL SECURITY")
        conn.execute("ALTER TABLE note FORCE ROW LEVEL SECURITY")
        conn.execute(
            "CREATE POLICY tenant_isolation ON note"
            " USING (tenant = current_setting('app.tenant', true))"
            " WITH CHECK (tenant = current_setting('app.tenant', true))"
        )
    # Written through the app role, one tenant per transaction, as the backend will.
    with psycopg.connect(db.app_url, autocommit=True) as conn:
        for tenant, bodies in (("acme", ["a1", "a2"]), ("globex", ["g1", "g2", "g3"])):
            with conn.transaction():
                conn.execute(sql.SQL("SET LOCAL app.tenant = {}").format(sql.Literal(tenant)))
                for body in bodies:
                    conn.execute("INSERT INTO note VALUES (%s, %s)", (tenant, body))


def test_app_role_sees_only_its_tenant_under_forced_rls(pg_database: AppDatabase) -> None:
    _make_tenant_table(pg_database)
    # autocommit: otherwise the first query opens a transaction that never ends, the
    # blocks below become savepoints and SET LOCAL outlives them.
    with psycopg.connect(pg_database.app_url, autocommit=True) as conn:
        role = conn.execute(
            "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert role == (pg_database.app_role, False, False)
        with conn.transaction():
            conn.execute("SET LOCAL app.tenant = 'acme'")
            seen = conn.execute("SELECT tenant, body FROM note ORDER BY body").fetchall()
            # Naming the other tenant explicitly does not help.
            other = conn.execute("SELECT count(*) FROM note WHERE tenant = 'globex'").fetchone()
        assert seen == [("acme", "a1"), ("acme", "a2")]
        assert other == (0,)
        with conn.transaction():
            conn.execute("SELECT set_config('app.tenant', %s, true)", ("globex",))
            assert conn.execute("SELECT count(*) FROM note").fetchone() == (3,)
        # SET LOCAL ended with its transaction: no tenant, no rows.
        with conn.transaction():
            assert conn.execute("SELECT count(*) FROM note").fetchone() == (0,)

    with psycopg.connect(pg_database.admin_url) as conn:
        assert conn.execute("SELECT count(*) FROM note").fetchone() == (5,)


@pytest.mark.parametrize(
    "attempt",
    [
        "INSERT INTO note VALUES ('globex', 'smuggled')",
        "UPDATE note SET tenant = 'globex'",
        "SET LOCAL row_security = off; SELECT count(*) FROM note",
        "ALTER TABLE note DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE note NO FORCE ROW LEVEL SECURITY",
        "DROP POLICY tenant_isolation ON note",
        "TRUNCATE note",
        "SET LOCAL ROLE postgres",
        "CREATE TABLE mine (x int)",
    ],
)
def test_app_role_cannot_get_around_rls(pg_database: AppDatabase, attempt: str) -> None:
    _make_tenant_table(pg_database)
    with (
        psycopg.connect(pg_database.app_url, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
        conn.transaction(),
    ):
        conn.execute("SET LOCAL app.tenant = 'acme'")
        for statement in attempt.split("; "):
            conn.execute(statement)
    with psycopg.connect(pg_database.admin_url) as conn:
        rows = conn.execute("SELECT tenant, count(*) FROM note GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [("acme", 2), ("globex", 3)]


def test_pool_over_socket_url_runs_queries_from_threads(pg_database: AppDatabase) -> None:
    with psycopg.connect(pg_database.owner_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE hit (worker int NOT NULL, n int NOT NULL)")
    with ConnectionPool(pg_database.app_url, min_size=2, max_size=4, open=True) as pool:

        def work(worker: int) -> None:
            for n in range(10):
                with pool.connection() as conn:
                    conn.execute("INSERT INTO hit VALUES (%s, %s)", (worker, n))

        threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with pool.connection() as conn:
            user = conn.execute("SELECT current_user").fetchone()
            counts = conn.execute("SELECT count(*), count(DISTINCT worker) FROM hit").fetchone()
    assert user == (pg_database.app_role,)
    assert counts == (80, 8)


def test_role_urls_need_their_password(
    pg_service: PostgresService, pg_database: AppDatabase
) -> None:
    no_password = pg_service.url(pg_database.app_role, None, pg_database.name)
    wrong_password = pg_service.url(pg_database.app_role, "wrong", pg_database.name)
    for url in (no_password, wrong_password):
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(url, connect_timeout=5).close()


def test_server_allows_many_concurrent_clients(pg_service: PostgresService) -> None:
    with psycopg.connect(pg_service.admin_url) as conn:
        setting = conn.execute("SHOW max_connections").fetchone()
    # 16 writer processes with small pools, a test pool and admin sessions.
    assert setting is not None and int(setting[0]) >= 150


def test_databases_are_separate_and_dropped(pg_service: PostgresService) -> None:
    first, second = create_app_database(pg_service), create_app_database(pg_service)
    try:
        with psycopg.connect(first.owner_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE only_here (x int)")
        with psycopg.connect(second.owner_url) as conn:
            found = conn.execute("SELECT to_regclass('only_here')").fetchone()
        assert found == (None,)
        # The first database's roles cannot even connect to the second.
        wrong = second.app_url.replace(second.app_role, first.app_role, 1)
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(wrong, connect_timeout=5).close()
    finally:
        drop_app_database(pg_service, first)
        drop_app_database(pg_service, second)
    with psycopg.connect(pg_service.admin_url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname = ANY(%s)", ([first.name, second.name],)
        ).fetchone()
        roles = conn.execute(
            "SELECT count(*) FROM pg_roles WHERE rolname = ANY(%s)", ([first.owner_role],)
        ).fetchone()
    assert left == (0,) and roles == (0,)


def test_module_database_has_vector_and_owner_can_rerun_migration_ddl(
    pg_module_database: AppDatabase,
) -> None:
    with psycopg.connect(pg_module_database.owner_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        version = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        # Why the template installs it: only a superuser may create an untrusted extension.
        trusted = conn.execute(
            "SELECT bool_or(trusted) FROM pg_available_extension_versions WHERE name = 'vector'"
        ).fetchone()
    assert version is not None and version[0] >= "0.8"
    assert trusted == (False,)


def test_create_app_database_unpacks_to_owner_and_app_urls(pg_database: AppDatabase) -> None:
    owner_url, app_url = pg_database
    assert (owner_url, app_url) == (pg_database.owner_url, pg_database.app_url)
    assert "host=/tmp/ms-pg-" in app_url


# ---------------------------------------------------------------- Redis


def test_redis_set_ex_expires(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        client.set("ms:scratch:a", "1", ex=30)
        client.set("ms:scratch:b", "2", px=150)
        assert 0 < client.ttl("ms:scratch:a") <= 30
        deadline = time.monotonic() + 5
        while client.exists("ms:scratch:b") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.get("ms:scratch:b") is None
        assert client.get("ms:scratch:a") == b"1"
    finally:
        client.close()


def test_redis_scan_by_prefix(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        pipe = client.pipeline()
        for i in range(250):
            pipe.set(f"ms:t1:s1:{i}", i)
        for i in range(50):
            pipe.set(f"ms:t2:s1:{i}", i)
        pipe.execute()
        keys = set(client.scan_iter(match="ms:t1:*", count=40))
        assert keys == {f"ms:t1:s1:{i}".encode() for i in range(250)}
    finally:
        client.close()


def test_redis_url_starts_empty(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.dbsize() == 0
    finally:
        client.close()


# ---------------------------------------------------------------- lifecycle


def test_missing_redis_binary_is_service_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTRATA_REDIS_SERVER", "/nonexistent/redis-server")
    with pytest.raises(ServiceUnavailable, match="not executable"):
        start_redis()


@pytest.mark.parametrize(
    ("ci", "outcome"), [("true", pytest.fail.Exception), ("", pytest.skip.Exception)]
)
def test_unavailable_server_fails_on_ci_and_skips_locally(
    monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]
) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="no redis"):
        _unavailable(ServiceUnavailable("no redis"))


def test_stop_removes_server_and_directory() -> None:
    svc: RedisService = start_redis()
    assert svc.workdir.exists() and svc.process.poll() is None
    svc.stop()
    svc.stop()  # idempotent
    assert svc.process.poll() is not None
    assert not svc.workdir.exists()


_CHILD = textwrap.dedent(
    """
    import json, sys, time
    sys.path[:0] = {paths!r}
    from services import start_postgres, start_redis
    pg, rd = start_postgres(), start_redis()
    print(json.dumps([pg.process.pid, rd.process.pid, str(pg.workdir), str(rd.workdir)]),
          flush=True)
    time.sleep(120)
    """
)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers kill(0); its state says it is dead.
    status = Path(f"/proc/{pid}/stat")
    return not status.exists() or status.read_text().split(") ")[1][0] in "ZX"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux")
def test_servers_die_with_a_killed_test_process() -> None:
    here = str(Path(__file__).parents[1])  # services.py
    paths = [here, *sys.path]
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(paths=paths)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        pg_pid, redis_pid, *workdirs = json.loads(child.stdout.readline())
        assert not _gone(pg_pid) and not _gone(redis_pid)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    try:
        deadline = time.monotonic() + 15
        while not (_gone(pg_pid) and _gone(redis_pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(pg_pid) and _gone(redis_pid)
    finally:
        # A SIGKILLed owner cannot clean up; the next start's sweep would, after a minute.
        for workdir in workdirs:
            shutil.rmtree(workdir, ignore_errors=True)
