"""The SQLite engine itself, read with a raw connection: pragmas and recorded migrations.

The schema's invariants are checked on every backend in ``conformance/test_invariants.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from backends import sqlite_store_files
from memstrata import Memory, Scope
from memstrata.store.sqlite_driver import sqlite3


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_pragmas_and_migrations(mem: Memory, db_path: Path) -> None:
    c = raw(db_path)
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = [r[0] for r in c.execute("SELECT name FROM migrations ORDER BY name")]
    assert names == ["m001_initial", "m002_tenants", "m003_episode_threads", "m004_api_keys",
                     "m005_drop_source_thread_index", "m006_fts_secure_delete",
                     "m007_vector_files", "m008_checkpoint_vectors", "m009_words",
                     "m010_fts_rewrites", "m011_runs_per_scope"]
    mem.close()
    Memory.open(f"sqlite:///{db_path}", embedder=None).close()  # reopen: no re-run
    assert [r[0] for r in c.execute("SELECT name FROM migrations ORDER BY name")] == names


def migrated_before(db_path: Path, migration: str) -> sqlite3.Connection:
    """A raw connection to a new store built by every migration before ``migration``: a
    store as the code before it wrote them."""
    from memstrata.store.sqlite_schema import MIGRATIONS

    c = raw(db_path)
    c.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for name, fn in MIGRATIONS.pending([]):
        if name == migration:
            break
        fn(c)
        c.execute("INSERT INTO migrations VALUES (?, '2026-01-01')", (name,))
    return c


def test_episodes_stored_before_threads_are_threaded_by_their_source(db_path: Path) -> None:
    """m003 on a store written before it: every episode's thread is its source, and the
    append-only guard is back in force afterwards."""
    c = migrated_before(db_path, "m003_episode_threads")
    c.execute("INSERT INTO episodes (tenant, s_user, s_project, s_agent, scope_key, id, event, "
              "text, actor, source, created_at, observed_at, confidence) VALUES ('default', "
              "'alice', NULL, NULL, 'u=alice;p=;a=', 'E1', 'note', 'old turn', 'user', 'chat:s1', "
              "'2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00', 1.0)")
    with Memory.open(f"sqlite:///{db_path}", embedder=None) as mem:
        assert mem.episodes.get("E1").thread == "chat:s1"
    assert c.execute("SELECT thread FROM episodes").fetchall() == [("chat:s1",)]
    try:
        c.execute("UPDATE episodes SET text = 'changed'")
        raise AssertionError("episodes must stay append-only after the migration")
    except sqlite3.IntegrityError:
        pass


def test_runs_and_scratch_written_before_m011_keep_their_rows(db_path: Path) -> None:
    """m011 builds ``runs`` and ``scratch`` again with the scope in their keys: the rows
    written before stay readable by their run, new tenants still register, and another
    scope may now use the same run id."""
    c = migrated_before(db_path, "m011_runs_per_scope")
    c.execute("INSERT INTO runs VALUES ('default', 'alice', NULL, NULL, 'u=alice;p=;a=', 'r1', "
              "'t', '2026-01-01T00:00:00+00:00', NULL)")
    c.execute("INSERT INTO scratch VALUES ('default', 'alice', NULL, NULL, 'u=alice;p=;a=', "
              "'r1', 'plan', 'old value', '2026-01-01T00:00:00+00:00', "
              "'2999-01-01T00:00:00+00:00')")
    with Memory.open(f"sqlite:///{db_path}", embedder=None) as mem:
        alice = Scope(user="alice")
        assert alice.key == "u=alice;p=;a="
        assert mem.run(alice, run_id="r1").scratch.read("plan") == "old value"
        with mem.run(Scope(user="bob"), run_id="r1", task="t") as bob:
            bob.scratch.write("plan", "bob's")
            assert mem.run(alice, run_id="r1").scratch.read("plan") == "old value"
        mem.run(Scope(tenant="acme", user="carol"), run_id="r1").scratch.write("k", "v")
        assert "acme" in mem.db.tenants()
    assert c.execute("SELECT s_user FROM runs ORDER BY s_user").fetchall() == [("alice",),
                                                                               ("bob",)]
    assert c.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = "
                     "'scratch' AND name = 'scratch_expiry'").fetchone() == ("scratch_expiry",)


def test_a_forget_scrubs_the_full_text_index_in_place(mem: Memory, db_path: Path) -> None:
    """FTS5 secure-delete (m006): a forgotten record's words leave the index's pages with
    the delete, without rewriting the index; the other records stay searchable."""
    c = raw(db_path)
    for table in ("facts_fts", "episodes_fts"):
        assert c.execute(f"SELECT v FROM {table}_config WHERE k = 'secure-delete'"
                         ).fetchone() == (1,)
    scope = Scope(user="alice")
    eps = mem.episodes.append_many([{"scope": scope, "text": f"release note number {i} "
                                     f"token{i:04d}x", "actor": "user", "source": f"s:{i}",
                                     "thread": f"t{i}"} for i in range(400)])
    segments = c.execute("SELECT count(*) FROM episodes_fts_data").fetchone()[0]
    report = mem.forget(scope, record_ids=[eps[123].ref])
    assert report.counts["episodes"] == 1 and report.compacted
    blob = b"".join(p.read_bytes() for p in sqlite_store_files(db_path))
    assert b"token0123x" not in blob and b"token0124x" in blob
    assert [h.ref for h in mem.episodes.search(scope, "token0124x")] == [eps[124].ref]
    assert mem.episodes.search(scope, "token0123x") == []
    # in place: the index was not rewritten into one segment by an optimize
    assert c.execute("SELECT count(*) FROM episodes_fts_data").fetchone()[0] >= segments - 1
    assert mem.doctor() == []


def _held_read(db_path: Path) -> Any:
    """A second connection holding a read snapshot open (a server's long read)."""
    reader = raw(db_path)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM episodes").fetchone()
    return reader


def _holding(db_path: Path, word: bytes) -> list[str]:
    """The store's files whose bytes hold ``word``."""
    return [p.name for p in sqlite_store_files(db_path) if word in p.read_bytes()]


def test_a_forget_while_another_connection_reads_says_it_did_not_compact(
        db_path: Path) -> None:
    """Another connection holds a read open past the busy timeout: the checkpoint cannot
    truncate the WAL, which still holds the forgotten text, so the forget says
    ``compacted=False`` with a note; the store checkpoints again after its next write,
    once the read is over, and the text leaves every file."""
    mem = Memory.open(f"sqlite:///{db_path}", embedder=None, busy_timeout_ms=100)
    scope = Scope(user="alice", project="p")
    for i in range(20):
        mem.episodes.append(scope, text=f"ordinary line {i}", actor="tool", source=f"ci:{i}")
    mem.episodes.append(scope, text="my bank pin hint is walrusgarnet", actor="user",
                        source="chat:1")
    reader = _held_read(db_path)

    def holding() -> list[str]:
        return _holding(db_path, b"walrusgarnet")

    report = mem.forget(scope, match="walrusgarnet")
    assert report.counts["episodes"] == 1
    assert report.compacted is False
    assert any("write-ahead log" in n and "busy_timeout" in n for n in report.notes), \
        report.notes
    assert holding() == [f"{db_path.name}-wal"]  # what the note says
    reader.execute("COMMIT")
    mem.episodes.append(scope, text="a later line", actor="tool", source="ci:x")
    assert holding() == []
    assert mem.forget(scope, match="ordinary line 3").compacted is True
    reader.close()
    mem.close()


@pytest.mark.parametrize("then", ["write", "open"])
def test_a_compaction_a_reader_blocked_is_finished_by_another_process(
        db_path: Path, then: str) -> None:
    """The forgetting process gives up (the long read still holds the WAL) and closes; the
    compaction it could not finish is recorded in the store, so another process finishes
    it once the read is over: after its next write, or when it opens the store. The
    record is cleared then, and the forgotten text is in none of the files."""
    url = f"sqlite:///{db_path}"
    scope = Scope(user="alice", project="p")
    forgetter = Memory.open(url, embedder=None, busy_timeout_ms=100)
    forgetter.episodes.append(scope, text="the quokkaberyl codename leaked", actor="user",
                              source="chat:1")
    server = Memory.open(url, embedder=None, busy_timeout_ms=100)  # a long-lived server
    reader = _held_read(db_path)

    def holding() -> list[str]:
        return _holding(db_path, b"quokkaberyl")

    def due() -> Any:
        return raw(db_path).execute("SELECT value FROM meta WHERE key = 'compaction_due'"
                                    ).fetchone()

    report = forgetter.forget(scope, match="quokkaberyl")
    assert report.compacted is False
    assert any("then write to or close the store" in n for n in report.notes), report.notes
    forgetter.close()  # its retry on close meets the read too: the process is gone
    assert holding() == [f"{db_path.name}-wal"]
    reader.execute("COMMIT")  # "end the long read ..."
    if then == "write":  # "... then write to the store", from another process
        server.episodes.append(scope, text="a later line", actor="tool", source="ci:x")
    else:
        Memory.open(url, embedder=None).close()
    assert holding() == [] and due() is None
    server.episodes.append(scope, text="one more line", actor="tool", source="ci:y")
    assert holding() == [] and due() is None
    reader.close()
    server.close()


class _FailingRollbackTo:
    """A connection whose ``ROLLBACK TO`` fails (a dying disk), everything else real."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("ROLLBACK TO"):
            raise sqlite3.OperationalError("disk I/O error (injected)")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_a_failed_savepoint_rollback_lets_nothing_of_the_outer_transaction_commit(
        db_path: Path) -> None:
    """The outer code catches the inner failure and writes on in a new nested transaction:
    that write must not commit on its own (the outer transaction was ended with the
    connection), and the handle works again once the outer frame has exited."""
    from memstrata import BackendError
    from memstrata.store.sqlite import SQLiteDatabase

    db = SQLiteDatabase(db_path)
    db._conn = _FailingRollbackTo(db._conn)  # type: ignore[assignment]
    with pytest.raises(BackendError), db.transaction("t") as tx:
        tx.execute("INSERT INTO meta (key, value) VALUES ('outer', '1')")
        with pytest.raises(BackendError), db.transaction("t") as inner:
            inner.execute("INSERT INTO meta (key, value) VALUES ('inner', '1')")
            raise BackendError("the inner step failed")
        with db.transaction("t") as again:  # refused: its outer transaction is gone
            again.execute("INSERT INTO meta (key, value) VALUES ('after', '1')")
    with db.transaction("t") as tx:
        tx.execute("INSERT INTO meta (key, value) VALUES ('next', '1')")
    keys = {r[0] for r in raw(db_path).execute("SELECT key FROM meta")}
    assert {"outer", "inner", "after"}.isdisjoint(keys) and "next" in keys
    db.close()


def _fts5_bm25(mem: Memory, scope: Scope, query: str) -> dict[str, float]:
    """What SQLite's own ``bm25`` gives the scope's rows for the query (all its words)."""
    from memstrata.store.lexical import terms

    where, params = mem.episodes.filter_sql(scope, None)
    match = " OR ".join(f'"{w}"' for w in terms(query))
    with mem.db.transaction(scope.tenant, write=False) as tx:
        rows = tx.all("SELECT r.id AS id, bm25(episodes_fts, 1.0, 0.5) AS s FROM episodes_fts "
                      "CROSS JOIN episodes r ON r.rowid = episodes_fts.rowid WHERE "
                      f"episodes_fts MATCH ? AND {where}", (match, *params))
    return {r["id"]: -r["s"] for r in rows}


def _text_search(mem: Memory, scope: Scope, query: str) -> dict[str, float]:
    where, params = mem.episodes.filter_sql(scope, None)
    with mem.db.transaction(scope.tenant, write=False) as tx:
        return dict(mem.db.text_search(tx, "episodes", query, where, params, 200))


QUERIES = ("budget review on Friday", "who moved the standup", "kickoff deck for Zephyrine",
           "staging disk full")


def _thread_of_turns(mem: Memory, scope: Scope, n: int) -> None:
    lines = ["Kickoff call with the Zephyrine team went fine", "The budget review is on Friday",
             "Bob moved the standup to ten", "The staging disk is full again, budget it",
             "Who owns the kickoff deck?", "Friday works for the review, Bob said"]
    mem.episodes.append_many([{"scope": scope, "text": f"{lines[i % 6]} ({i})", "actor": "user",
                               "source": f"chat:{i}", "thread": f"t{i // 7}"}
                              for i in range(n)])


def _same(ours: dict[str, float], theirs: dict[str, float]) -> bool:
    return bool(ours) and ours.keys() == theirs.keys() and all(
        ours[i] == pytest.approx(theirs[i], rel=1e-9) for i in ours)


def test_with_one_caller_the_scores_are_sqlites_own_bm25(mem: Memory, db_path: Path) -> None:
    bo, ana = Scope(user="bo"), Scope(user="ana")
    _thread_of_turns(mem, bo, 60)
    assert all(_same(_text_search(mem, bo, q), _fts5_bm25(mem, bo, q)) for q in QUERIES)
    mem.episodes.append(bo, text="The budget review slipped to Monday", actor="user",
                        source="chat:x")  # still alone in the file
    alone = {q: _text_search(mem, bo, q) for q in QUERIES}
    assert all(_same(alone[q], _fts5_bm25(mem, bo, q)) for q in QUERIES)
    # another caller arrives, then leaves: bo's scores never move
    mem.episodes.append(ana, text="budget budget budget review standup", actor="user",
                        source="chat:y")
    assert all(_same(_text_search(mem, bo, q), alone[q]) for q in QUERIES)
    mem.forget(ana)
    assert all(_same(_text_search(mem, bo, q), alone[q]) for q in QUERIES)


def test_a_large_index_of_other_callers_moves_no_score(
        mem: Memory, db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memstrata.store import sqlite_search

    monkeypatch.setattr(sqlite_search, "LARGE_INDEX_ROWS", 50)  # the large-index path, small data
    bo = Scope(user="bo")
    _thread_of_turns(mem, bo, 60)
    alone = {q: _text_search(mem, bo, q) for q in QUERIES}
    for tenant, user in (("default", "ana"), ("acme", "bo")):
        _thread_of_turns(mem, Scope(tenant=tenant, user=user), 300)
        mem.episodes.append_many([{"scope": Scope(tenant=tenant, user=user),
                                   "text": "budget " * (i % 9 + 1) + "review standup",
                                   "actor": "user", "source": f"x:{i}"} for i in range(200)])
        for query in QUERIES:
            assert _same(_text_search(mem, bo, query), alone[query])


def _hits(mem: Memory, scope: Scope, query: str, **kw: Any) -> list[tuple[str, float]]:
    return [(h.excerpt, round(h.score, 9)) for h in mem.episodes.search(scope, query, k=10, **kw)]


LINES = ["cache miss on deploy", "deploy went fine", "deploy rollback after cache error",
         "docs deploy", "deploy deploy deploy preview", "cache"]


def test_a_reused_rowid_lets_no_other_callers_row_in(tmp_path: Path) -> None:
    """alice forgets her newest episode and bob writes the next (SQLite gives it the same
    rowid): alice's scores are those of a file holding only her rows."""
    alice, bob = Scope(user="alice", project="p"), Scope(user="bob", project="p")
    solo = Memory.open(f"sqlite:///{tmp_path / 'solo.db'}", embedder=None)
    shared = Memory.open(f"sqlite:///{tmp_path / 'shared.db'}", embedder=None)
    for mem in (solo, shared):
        for i, text in enumerate(LINES):
            mem.episodes.append(alice, text=text, actor="user", source=f"chat:{i}",
                                thread=f"n{i}")
    shared.episodes.append(alice, text="zzz marker", actor="user", source="z", thread="z")
    _hits(shared, alice, "cache deploy")  # alice alone: remembered
    shared.forget(alice, match="zzz marker")
    shared.episodes.append(bob, text="cache " * 40 + "log", actor="user", source="b",
                           thread="b")
    assert _hits(shared, alice, "cache deploy") == _hits(solo, alice, "cache deploy")
    solo.close()
    shared.close()


def test_one_window_leaves_no_counts_to_another(tmp_path: Path) -> None:
    from memstrata import ManualClock

    alice = Scope(user="alice", project="p")
    clock = ManualClock("2026-03-01T00:00:00Z")
    path = f"sqlite:///{tmp_path / 'w.db'}"
    mem = Memory.open(path, embedder=None, clock=clock)
    for i in range(20):
        mem.episodes.append(alice, text=f"cache warmup step {i} cache", actor="user",
                            source=f"o{i}", thread=f"o{i}",
                            observed_at=f"2026-01-{i + 1:02d}T00:00:00Z")
    for i, text in enumerate(LINES):
        mem.episodes.append(alice, text=text, actor="user", source=f"n{i}", thread=f"n{i}",
                            observed_at=f"2026-02-{i + 1:02d}T00:00:00Z")
    fresh = Memory.open(path, embedder=None, clock=clock)
    february = _hits(fresh, alice, "cache deploy", since="2026-02-01T00:00:00Z")
    _hits(mem, alice, "cache deploy", since="2025-12-01T00:00:00Z")
    assert _hits(mem, alice, "cache deploy", since="2026-02-01T00:00:00Z") == february
    mem.close()
    fresh.close()


def test_cjk_rows_indexed_before_m009_are_found_by_their_words(db_path: Path) -> None:
    """A store written before m009 held a CJK clause as one token; the migration writes its
    full-text rows again, a character a token, so a word inside the clause finds it."""
    from memstrata.store import sqlite_schema

    mem = Memory.open(db_path, embedder=None)
    you = Scope(user="li")
    zh = mem.episodes.append(you, text="服务器部署失败了，因为缓存过期", actor="user",
                             source="chat:1")
    mem.close()
    c = raw(db_path)
    with c:  # as the index held it before m009: the clause as written, one token
        c.execute("INSERT INTO write_guard VALUES (1)")
        rowid = c.execute("SELECT rowid FROM episodes WHERE id = ?", (zh.id,)).fetchone()[0]
        c.execute("DELETE FROM episodes_fts WHERE rowid = ?", (rowid,))
        c.execute("INSERT INTO episodes_fts (rowid, body, context) VALUES (?, ?, '')",
                  (rowid, "服务器部署失败了，因为缓存过期"))
        c.execute("DELETE FROM write_guard")
        c.execute("DELETE FROM migrations WHERE name = 'm009_words'")
    c.close()
    assert "m009_words" in [name for name, _ in sqlite_schema.MIGRATIONS.pending([])]
    again = Memory.open(db_path, embedder=None)  # applies m009
    assert [h.ref for h in again.episodes.search(you, "缓存", k=5)] == [zh.ref]
    assert again.doctor() == []
    again.close()


def test_a_long_lived_process_weighs_words_as_a_fresh_one(
        db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Word counts a process remembers are brought up to date with the rows written since
    (rowids above the count's), so after its own writes a long-lived process ranks a
    request as a fresh process does (the stale count of 'zucchini' made 900 new rows of it
    outrank the one row holding both words)."""
    from memstrata.store import sqlite_search

    monkeypatch.setattr(sqlite_search, "LARGE_INDEX_ROWS", 50)
    you = Scope(user="u")
    mem = Memory.open(db_path, embedder=None)
    mem.episodes.append_many([{"scope": you, "text": f"olive note {i} zucchini" if i == 3
                               else f"olive note {i}", "actor": "user", "source": f"c:{i}"}
                              for i in range(120)])
    query = "zucchini papaya"
    mem.episodes.search(you, query, k=10)  # counted now: one zucchini, no papaya
    mem.episodes.append_many([{"scope": you, "text": f"zucchini harvest {i}", "actor": "user",
                               "source": f"z:{i}"} for i in range(90)])
    special = mem.episodes.append(you, text="papaya note special zucchini", actor="user",
                                  source="p:1")
    long_lived = [(h.ref, round(h.score, 6)) for h in mem.episodes.search(you, query, k=10)]
    fresh = Memory.open(db_path, embedder=None)
    assert long_lived[0][0] == special.ref
    assert [r for r, _ in long_lived] == [h.ref for h in fresh.episodes.search(you, query,
                                                                               k=10)]
    fresh.close()
    mem.close()


def test_a_long_lived_process_ranks_as_a_fresh_one_after_forgets_and_long_rows(
        db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Remembered counts over a large index: the mean entry length is topped up with the
    rows written since like the word counts, and a forget of the newest rows (then writes
    on the rowids SQLite gives again) makes the process count afresh, so after each step
    a long-lived process ranks a request exactly as a fresh one."""
    from memstrata.store import sqlite_search

    monkeypatch.setattr(sqlite_search, "LARGE_INDEX_ROWS", 50)
    you = Scope(user="u")
    mem = Memory.open(db_path, embedder=None)
    mem.episodes.append_many([{"scope": you, "text": f"olive note {i} kiwi" if i % 40 == 0
                               else f"olive note {i} fig", "actor": "user",
                               "source": f"c:{i}"} for i in range(160)])
    query = "kiwi fig olive"

    def same() -> bool:
        fresh = Memory.open(db_path, embedder=None)
        try:
            return [(h.ref, round(h.score, 9)) for h in mem.episodes.search(you, query, k=10)] \
                == [(h.ref, round(h.score, 9)) for h in fresh.episodes.search(you, query, k=10)]
        finally:
            fresh.close()

    assert same()
    long = mem.episodes.append_many([{"scope": you, "text": "fig " + "word " * 60 + str(i),
                                      "actor": "user", "source": f"l:{i}"} for i in range(30)])
    assert same()  # longer entries: the mean length moved
    mem.forget(you, record_ids=[e.ref for e in long])
    assert same()
    mem.episodes.append_many([{"scope": you, "text": f"kiwi harvest {i}", "actor": "user",
                               "source": f"k:{i}"} for i in range(30)])  # reused rowids
    assert same()
    mem.close()
