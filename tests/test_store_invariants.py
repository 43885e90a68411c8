"""Invariants enforced by the SQLite schema itself, checked with raw SQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memstrata import Memory, Scope


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


def test_episodes_are_append_only_in_the_schema(mem: Memory, db_path: Path,
                                                alice: Scope) -> None:
    ep = mem.episodes.append(alice, text="Deployed v1", source="ci", actor="tool")
    c = raw(db_path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        c.execute("UPDATE episodes SET text = 'tampered' WHERE id = ?", (ep.id,))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        c.execute("DELETE FROM episodes WHERE id = ?", (ep.id,))
    assert c.execute("SELECT text FROM episodes").fetchone()[0] == "Deployed v1"


def test_one_active_fact_per_slot_in_the_schema(mem: Memory, db_path: Path,
                                                alice: Scope) -> None:
    res = mem.facts.propose(alice, claim="Uses tabs", kind="preference", subject="alice",
                            attribute="indent", actor="user", source="chat")
    assert res.record is not None
    c = raw(db_path)
    row = c.execute("SELECT * FROM facts").fetchone()
    cols = [d[0] for d in c.execute("SELECT * FROM facts").description]
    values = dict(zip(cols, row, strict=True))
    values["id"] = "01ZZZZZZZZZZZZZZZZZZZZZZZZ"
    values["claim"] = "Uses spaces"
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        c.execute(f"INSERT INTO facts ({', '.join(values)}) VALUES "
                  f"({', '.join('?' * len(values))})", list(values.values()))
    with pytest.raises(sqlite3.IntegrityError, match="immutable"):
        c.execute("UPDATE facts SET claim = 'rewritten' WHERE id = ?", (res.record.id,))
    with pytest.raises(sqlite3.IntegrityError, match="never deleted"):
        c.execute("DELETE FROM facts")


def test_operation_keys_unique_per_scope(mem: Memory, db_path: Path, alice: Scope) -> None:
    mem.ledger.begin(alice, "publish:v1", intent="publish")
    mem.ledger.begin(Scope(user="bob"), "publish:v1", intent="publish")
    c = raw(db_path)
    assert c.execute("SELECT count(*) FROM operations").fetchone()[0] == 2
    row = c.execute("SELECT tenant, s_user, s_project, s_agent, scope_key, key, intent, status, "
                    "created_at, updated_at FROM operations WHERE s_user = 'alice'").fetchone()
    with pytest.raises(sqlite3.IntegrityError):
        c.execute("INSERT INTO operations (tenant, s_user, s_project, s_agent, scope_key, key, "
                  "intent, status, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)", row)


def test_fts_row_commits_with_its_record(mem: Memory, db_path: Path, alice: Scope) -> None:
    mem.episodes.append(alice, text="Search index stays in step", source="s", actor="user")
    c = raw(db_path)
    assert c.execute("SELECT count(*) FROM episodes_fts").fetchone()[0] == 1
    # a failing batch (bad supersedes in the second item) leaves neither rows nor index rows
    from memstrata import ValidationError

    with pytest.raises(ValidationError):
        mem.episodes.append_many([
            {"scope": alice, "text": "first of batch", "source": "s", "actor": "user"},
            {"scope": alice, "text": "second", "source": "s", "actor": "user",
             "supersedes": "01ZZZZZZZZZZZZZZZZZZZZZZZZ"},
        ])
    assert c.execute("SELECT count(*) FROM episodes").fetchone()[0] == 1
    assert c.execute("SELECT count(*) FROM episodes_fts").fetchone()[0] == 1
    assert mem.doctor() == []


def test_doctor_finds_a_broken_index(mem: Memory, db_path: Path, alice: Scope) -> None:
    mem.episodes.append(alice, text="will lose its index row", source="s", actor="user")
    assert mem.doctor() == []
    c = raw(db_path)
    c.execute("DELETE FROM episodes_fts")
    problems = mem.doctor()
    assert any("missing from episodes_fts" in p for p in problems)
