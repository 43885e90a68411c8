"""The SQLite and PostgreSQL schemas agree: the same record tables with the same columns,
nullability and primary keys, and only documented engine-specific differences.

Two migration registries (``store/sqlite_schema.py``, ``store/pg_schema.py``) build the two
schemas; this test keeps them from drifting apart.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from memstrata import Memory
from memstrata.store.sqlite_driver import sqlite3
from memstrata.store.sqlite_schema import RECORD_TABLES
from services import AppDatabase

pytestmark = pytest.mark.postgres

#: How a SQLite declared type reads in PostgreSQL (times are ISO text in SQLite).
TYPES = {"TEXT": {"text", "timestamp with time zone"}, "REAL": {"double precision"},
         "INTEGER": {"integer", "bigint"}, "BLOB": {"USER-DEFINED"}}
#: Tables only one engine has, and why.
ONLY_SQLITE = {"write_guard",          # the maintenance guard (PostgreSQL: a setting)
               "fts_rewrites"}         # entries written in place (the word counts' top-ups)
ONLY_POSTGRES: set[str] = set()
#: Tables that are neither records nor an engine's own, with the same columns on both.
SERVICE_TABLES = ("api_keys",)   # the keys of `memstrata serve` (interfaces/service/keys.py)
#: Engine tables whose columns differ by design.
ENGINE_TABLES = {
    "meta",          # one row set per file in SQLite, per tenant in PostgreSQL
    "vectors",       # PostgreSQL copies the episode filter columns beside each vector
    "facts_fts",     # FTS5 (body, context) against tsvector rows keyed by (tenant, id)
    "episodes_fts",
    "migrations",
    "tenants",
}


Schema = dict[str, dict[str, tuple[str, bool, bool]]]
Schemas = tuple[Schema, Schema]


def sqlite_schema(path: Path) -> Schema:
    """table -> column -> (declared type, NOT NULL, in the primary key)."""
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE '%_fts_%'")]
        return {t: {r[1]: (r[2].upper(), bool(r[3]) or bool(r[5]), bool(r[5]))
                    for r in conn.execute(f'PRAGMA table_info("{t}")')} for t in tables}
    finally:
        conn.close()


def pg_schema(url: str) -> Schema:
    with psycopg.connect(url) as conn:
        pk = {(r[0], r[1]) for r in conn.execute(
            "SELECT tc.table_name, kcu.column_name FROM information_schema.table_constraints tc "
            "JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = "
            "tc.constraint_name AND kcu.table_schema = tc.table_schema WHERE "
            "tc.table_schema = 'public' AND tc.constraint_type = 'PRIMARY KEY'")}
        out: dict[str, dict[str, tuple[str, bool, bool]]] = {}
        for table, column, dtype, nullable in conn.execute(
                "SELECT table_name, column_name, data_type, is_nullable FROM "
                "information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, "
                "ordinal_position"):
            out.setdefault(table, {})[column] = (dtype, nullable == "NO",
                                                 (table, column) in pk)
        return out


@pytest.fixture
def schemas(tmp_path: Path, pg_conformance_db: AppDatabase) -> Schemas:
    path = tmp_path / "schema.db"
    Memory.open(f"sqlite:///{path}", embedder=None).close()
    return sqlite_schema(path), pg_schema(pg_conformance_db.admin_url)


def test_the_same_tables_but_documented_ones(schemas: Schemas) -> None:
    lite, pg = schemas
    assert set(lite) - set(pg) == ONLY_SQLITE
    assert set(pg) - set(lite) == ONLY_POSTGRES
    assert set(lite) == set(RECORD_TABLES) | set(SERVICE_TABLES) | ENGINE_TABLES | ONLY_SQLITE


@pytest.mark.parametrize("table", (*RECORD_TABLES, *SERVICE_TABLES))
def test_record_tables_have_the_same_columns(schemas: Schemas, table: str) -> None:
    lite, pg = schemas
    assert list(lite[table]) == list(pg[table]), "same columns, same order"
    for column, (ltype, lnotnull, lpk) in lite[table].items():
        ptype, pnotnull, ppk = pg[table][column]
        assert ptype in TYPES[ltype], (table, column, ltype, ptype)
        assert (lnotnull, lpk) == (pnotnull, ppk), (table, column)


def test_the_parity_check_sees_a_difference(tmp_path: Path,
                                           pg_conformance_db: AppDatabase) -> None:
    """A column added on one engine only is caught."""
    path = tmp_path / "drift.db"
    Memory.open(f"sqlite:///{path}", embedder=None).close()
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE facts ADD COLUMN colour TEXT")
    conn.commit()
    conn.close()
    assert list(sqlite_schema(path)["facts"]) != list(pg_schema(
        pg_conformance_db.admin_url)["facts"])
