"""Scratch in Redis: native TTL, run-scoped keys, SCAN (never KEYS), forget by scope.

The behaviour tests of scratch also run against Redis through the conformance suite
(``postgres+redis``); these check what only Redis shows.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis

from memstrata import ManualClock, Memory, Scope
from memstrata.errors import BackendError
from memstrata.store.redis_scratch import RedisScratchStore

pytestmark = pytest.mark.redis

ALICE = Scope(user="alice", project="docs-site")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-08-03T09:00:00+00:00")


@pytest.fixture
def mem(redis_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[Memory]:
    m = Memory.open(f"sqlite:///{tmp_path / 'm.db'}", clock=clock, embedder=None,
                    scratch_url=redis_url)
    yield m
    m.close()


def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def test_scratch_url_selects_redis_with_native_ttl(mem: Memory, redis_url: str) -> None:
    assert isinstance(mem.scratch_store, RedisScratchStore)
    with mem.run(ALICE) as run:
        assert run.scratch.write("plan", "outline") == "wrote plan (7 chars)"
        run.scratch.write("short", "x", ttl=timedelta(minutes=5))
        r = _client(redis_url)
        names = sorted(n.decode() for n in r.scan_iter(match="ms:*"))
        assert len(names) == 2 and all(n.startswith("ms:default:") for n in names)
        assert names[0].endswith(f":{run.run_id}:plan")
        ttls = sorted(r.ttl(n) for n in names)
        assert 290 <= ttls[0] <= 300 and 86_390 <= ttls[1] <= 86_400
        with mem.db.transaction("default", write=False) as tx:  # nothing in the SQL table
            assert tx.one("SELECT count(*) AS n FROM scratch") == {"n": 0}
    assert list(r.scan_iter(match="ms:*")) == []  # discarded when the run ended


def test_the_env_variable_selects_redis_too(redis_url: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTRATA_SCRATCH_URL", redis_url)
    with Memory.open(f"sqlite:///{tmp_path / 'env.db'}", embedder=None) as mem:
        assert isinstance(mem.scratch_store, RedisScratchStore)


def test_runs_scopes_and_tenants_never_share_keys(mem: Memory) -> None:
    odd = Scope(tenant="t:1", user="a:b", project="x/y")
    with mem.run(ALICE, run_id="r1") as r1, mem.run(ALICE, run_id="r1:") as r2, \
            mem.run(odd, run_id="r1") as r3:
        r1.scratch.write("k*", "one")
        r1.scratch.write("k?", "two")
        r2.scratch.write("k*", "other run")
        r3.scratch.write("k*", "other scope")
        assert r1.scratch.list("k*") == ["k*"]  # glob characters are literal
        assert r1.scratch.list() == ["k*", "k?"]
        assert r2.scratch.list() == ["k*"] and r3.scratch.list() == ["k*"]
        assert r2.scratch.read("k*") == "other run" and r3.scratch.read("k*") == "other scope"
        assert r1.scratch.discard() == 2
        assert r2.scratch.list() == ["k*"] and r3.scratch.read("k*") == "other scope"


def test_logical_expiry_follows_the_clock_and_sweep_removes(mem: Memory,
                                                            clock: ManualClock) -> None:
    with mem.run(ALICE) as run:
        run.scratch.write("k", "v")
        run.scratch.write("long", "v", ttl=timedelta(days=3))
        clock.advance(hours=23, minutes=59)
        assert run.scratch.read("k") == "v"
        clock.advance(minutes=2)
        assert run.scratch.read("k") == "k is not set"
        assert run.scratch.list() == ["long"]
        assert mem.sweep()["scratch"] == 1
        assert run.scratch.read("long") == "v"


def test_forget_takes_owned_entries_only(mem: Memory) -> None:
    bob = Scope(user="bob", project="docs-site")
    with mem.run(ALICE) as a, mem.run(bob) as b, mem.run(Scope(user="alice")) as c:
        a.scratch.write("note", "remember Quokkaberry")
        a.scratch.write("quokka-key", "plain value")
        a.scratch.write("other", "nothing to see")
        b.scratch.write("note", "bob also said quokkaberry")
        c.scratch.write("note", "alice-wide quokkaberry")
        report = mem.forget(Scope(user="alice"), match="QUOKKA")
        assert report.counts["scratch"] == 3  # both alice scopes; not bob's
        assert a.scratch.list() == ["other"] and c.scratch.list() == []
        assert b.scratch.read("note") == "bob also said quokkaberry"


def test_uses_scan_and_never_keys(mem: Memory, redis_url: str) -> None:
    r = _client(redis_url)
    r.config_resetstat()
    with mem.run(ALICE) as run:
        for i in range(30):
            run.scratch.write(f"k{i}", "v")
        assert len(run.scratch.list("k1")) == 11
    mem.sweep()
    mem.forget(ALICE, match="v")
    stats = r.info("commandstats")
    assert "cmdstat_scan" in stats
    assert "cmdstat_keys" not in stats


def test_unreachable_redis_is_a_backend_error() -> None:
    with pytest.raises(BackendError, match="cannot reach Redis"):
        RedisScratchStore.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)
