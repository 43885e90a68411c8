"""The SQLite schema of memstrata: named migrations, applied in order and recorded.

Invariants enforced by the schema itself, not only by Python:

- Episodes and checkpoint versions are append-only: triggers refuse UPDATE, and refuse
  DELETE unless the transaction holds the maintenance guard (a row in ``write_guard``,
  written by forget and retention only). Facts are never deleted outside maintenance, and
  a fact's content is frozen once it left review.
- At most one active fact per (tenant, scope, subject, attribute) and one active
  procedure per name: partial unique indexes. Operation keys are unique per (tenant,
  scope): the primary key.
- Deleting a row deletes its full-text entry and its vector (triggers), so no index can
  keep what the base table forgot; deleting a vector bumps ``meta.vector_generation`` so
  in-process vector caches reload.
- ``tenants`` registers every tenant that wrote a row (insert triggers), the same registry
  as the PostgreSQL schema's, so maintenance visits each tenant on either engine.

The record tables (facts, episodes, checkpoints, operations, runs, scratch, feedback,
procedures) have the same columns as in :mod:`memstrata.store.pg_schema`; a test compares
them.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import BackendError
from .lexical import CJK_CHARS, COMBINING_MARKS, index_form
from .migrations import Migrations
from .sql import checkpoint_vector_id_sql
from .sqlite_driver import sqlite3

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: Migrations[Migration] = Migrations("sqlite")
migration = MIGRATIONS.register

#: Tables whose inserts register their tenant (see the module docstring).
RECORD_TABLES = ("facts", "episodes", "checkpoints", "operations", "runs", "scratch",
                 "feedback", "procedures")

_SCOPE_COLS = """
    tenant TEXT NOT NULL,
    s_user TEXT, s_project TEXT, s_agent TEXT,
    scope_key TEXT NOT NULL"""

#: The columns of ``api_keys`` (``memstrata.interfaces.service.keys``), the same on both engines.
_KEY_COLS = """
    tenant TEXT NOT NULL, id TEXT NOT NULL, secret_hash TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('agent', 'reviewer', 'admin')),
    users TEXT, projects TEXT, agents TEXT, principal TEXT, actor TEXT NOT NULL,
    label TEXT, rate_per_minute INTEGER, created_at TEXT NOT NULL, revoked_at TEXT,
    PRIMARY KEY (tenant, id)"""


@migration
def m001_initial(conn: sqlite3.Connection) -> None:
    _run_script(conn, f"""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE write_guard (token INTEGER);

        CREATE TABLE facts ({_SCOPE_COLS},
            id TEXT NOT NULL,
            kind TEXT NOT NULL, subject TEXT NOT NULL, attribute TEXT NOT NULL,
            claim TEXT NOT NULL, confidence REAL NOT NULL,
            tier TEXT NOT NULL, sensitivity TEXT NOT NULL, status TEXT NOT NULL,
            actor TEXT NOT NULL, source TEXT NOT NULL, evidence TEXT,
            created_at TEXT NOT NULL, valid_from TEXT, valid_to TEXT,
            recheck_after TEXT, expires_at TEXT,
            supersedes TEXT, superseded_by TEXT, reason TEXT,
            readers TEXT, last_confirmed_at TEXT, reviewer TEXT, flags TEXT NOT NULL DEFAULT '[]',
            feedback_score INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, id),
            CHECK (status IN ('active', 'pending_review', 'superseded', 'retired', 'expired',
                              'rejected')),
            CHECK (confidence >= 0 AND confidence <= 1)
        );
        CREATE UNIQUE INDEX facts_one_active_per_slot
            ON facts (tenant, scope_key, subject, attribute) WHERE status = 'active';
        CREATE INDEX facts_scope ON facts (tenant, s_user, s_project, status);
        CREATE TRIGGER facts_content_frozen
            BEFORE UPDATE OF claim, kind, subject, attribute, tenant, scope_key, actor, source,
                             created_at ON facts
            WHEN old.status != 'pending_review'
            BEGIN SELECT RAISE(ABORT, 'fact content is immutable: propose a new fact'); END;
        CREATE TRIGGER facts_no_delete BEFORE DELETE ON facts
            WHEN NOT EXISTS (SELECT 1 FROM write_guard)
            BEGIN SELECT RAISE(ABORT, 'facts are never deleted: retire or supersede them'); END;

        CREATE TABLE episodes ({_SCOPE_COLS},
            id TEXT NOT NULL,
            event TEXT NOT NULL, text TEXT NOT NULL,
            actor TEXT NOT NULL, source TEXT NOT NULL, evidence TEXT,
            created_at TEXT NOT NULL, observed_at TEXT NOT NULL,
            outcome TEXT, confidence REAL NOT NULL, expires_at TEXT,
            supersedes TEXT, readers TEXT, flags TEXT NOT NULL DEFAULT '[]',
            subject TEXT,
            PRIMARY KEY (tenant, id)
        );
        CREATE INDEX episodes_subject ON episodes (tenant, subject);
        CREATE INDEX episodes_thread ON episodes (tenant, scope_key, source, observed_at);
        CREATE INDEX episodes_scope ON episodes (tenant, s_user, s_project, observed_at);
        CREATE INDEX episodes_supersedes ON episodes (tenant, supersedes);
        CREATE TRIGGER episodes_append_only BEFORE UPDATE ON episodes
            WHEN NOT EXISTS (SELECT 1 FROM write_guard)
            BEGIN SELECT RAISE(ABORT,
                'episodes are append-only: append a correction that supersedes it'); END;
        CREATE TRIGGER episodes_no_delete BEFORE DELETE ON episodes
            WHEN NOT EXISTS (SELECT 1 FROM write_guard)
            BEGIN SELECT RAISE(ABORT, 'episodes are append-only'); END;

        CREATE VIRTUAL TABLE facts_fts USING fts5 (body, context,
                                                   tokenize = 'porter unicode61');
        CREATE VIRTUAL TABLE episodes_fts USING fts5 (body, context,
                                                      tokenize = 'porter unicode61');

        CREATE TABLE vectors (
            tenant TEXT NOT NULL, record_id TEXT NOT NULL, layer TEXT NOT NULL,
            model TEXT NOT NULL, dims INTEGER NOT NULL, vec BLOB NOT NULL,
            PRIMARY KEY (tenant, record_id)
        );

        INSERT INTO meta (key, value) VALUES ('vector_generation', '0');
        CREATE TRIGGER vectors_generation AFTER DELETE ON vectors BEGIN
            UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)
            WHERE key = 'vector_generation';
        END;

        CREATE TRIGGER facts_deindex AFTER DELETE ON facts BEGIN
            DELETE FROM facts_fts WHERE rowid = old.rowid;
            DELETE FROM vectors WHERE tenant = old.tenant AND record_id = old.id;
        END;
        CREATE TRIGGER episodes_deindex AFTER DELETE ON episodes BEGIN
            DELETE FROM episodes_fts WHERE rowid = old.rowid;
            DELETE FROM vectors WHERE tenant = old.tenant AND record_id = old.id;
        END;

        CREATE TABLE checkpoints ({_SCOPE_COLS},
            task TEXT NOT NULL, version INTEGER NOT NULL,
            data TEXT NOT NULL, updated_at TEXT NOT NULL, updated_by TEXT,
            PRIMARY KEY (tenant, scope_key, task, version)
        );
        CREATE TRIGGER checkpoints_versioned BEFORE UPDATE ON checkpoints
            BEGIN SELECT RAISE(ABORT, 'checkpoint versions are immutable: save a new one'); END;
        CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
            WHEN NOT EXISTS (SELECT 1 FROM write_guard)
            BEGIN SELECT RAISE(ABORT, 'checkpoint history is kept'); END;

        CREATE TABLE operations ({_SCOPE_COLS},
            key TEXT NOT NULL, intent TEXT NOT NULL, status TEXT NOT NULL,
            external_ref TEXT, error TEXT, attempts INTEGER NOT NULL DEFAULT 1,
            run_id TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
            PRIMARY KEY (tenant, scope_key, key),
            CHECK (status IN ('pending','succeeded','failed','unknown'))
        );

        CREATE TABLE runs ({_SCOPE_COLS},
            run_id TEXT NOT NULL, task TEXT, started_at TEXT NOT NULL, ended_at TEXT,
            PRIMARY KEY (tenant, run_id)
        );

        CREATE TABLE scratch ({_SCOPE_COLS},
            run_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            written_at TEXT NOT NULL, expires_at TEXT NOT NULL,
            PRIMARY KEY (tenant, run_id, key)
        );
        CREATE INDEX scratch_expiry ON scratch (expires_at);

        CREATE TABLE feedback (
            tenant TEXT NOT NULL, ref TEXT NOT NULL, signal TEXT NOT NULL,
            note TEXT, created_at TEXT NOT NULL
        );
        CREATE INDEX feedback_ref ON feedback (tenant, ref);

        CREATE TABLE procedures ({_SCOPE_COLS},
            name TEXT NOT NULL, version INTEGER NOT NULL, status TEXT NOT NULL,
            data TEXT NOT NULL, owner TEXT, created_at TEXT NOT NULL,
            activated_at TEXT, activated_by TEXT,
            PRIMARY KEY (tenant, scope_key, name, version)
        );
        CREATE UNIQUE INDEX procedures_one_active
            ON procedures (tenant, scope_key, name) WHERE status = 'active';
        """)


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run statements one by one inside the caller's transaction (executescript would
    commit it)."""
    stmt = ""
    for line in script.splitlines(keepends=True):
        stmt += line
        if sqlite3.complete_statement(stmt):
            conn.execute(stmt)
            stmt = ""
    if stmt.strip():
        raise BackendError(f"incomplete statement in migration: {stmt[:80]!r}")


@migration
def m002_tenants(conn: sqlite3.Connection) -> None:
    """The tenant registry, filled from the rows already stored and kept by triggers."""
    conn.execute("CREATE TABLE tenants (tenant TEXT PRIMARY KEY, registered_at TEXT NOT NULL)")
    for table in RECORD_TABLES:
        conn.execute(f"INSERT OR IGNORE INTO tenants (tenant, registered_at) SELECT DISTINCT "
                     f"tenant, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now') FROM {table}")
        _register_tenant_trigger(conn, table)


def _register_tenant_trigger(conn: sqlite3.Connection, table: str) -> None:
    """The trigger that registers the tenant of every row inserted into ``table``."""
    conn.execute(
        f"CREATE TRIGGER {table}_register_tenant AFTER INSERT ON {table} BEGIN "
        "INSERT OR IGNORE INTO tenants (tenant, registered_at) VALUES "
        "(new.tenant, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')); END")


@migration
def m003_episode_threads(conn: sqlite3.Connection) -> None:
    """Episodes carry their thread (a session, a run, a ticket), apart from their source;
    the episodes stored before it are threaded by source, as they were."""
    conn.execute("ALTER TABLE episodes ADD COLUMN thread TEXT")
    conn.execute("INSERT INTO write_guard (token) VALUES (3)")  # the maintenance guard
    conn.execute("UPDATE episodes SET thread = source")
    conn.execute("DELETE FROM write_guard WHERE token = 3")
    conn.execute("CREATE INDEX episodes_by_thread ON episodes (tenant, scope_key, thread, "
                 "observed_at)")


@migration
def m004_api_keys(conn: sqlite3.Connection) -> None:
    """API keys of ``memstrata serve`` (the hash of each secret, never the secret)."""
    conn.execute(f"""CREATE TABLE api_keys ({_KEY_COLS})""")


@migration
def m005_drop_source_thread_index(conn: sqlite3.Connection) -> None:
    """Threads are read by the ``thread`` column (m003's index); the index by source that
    threaded episodes before it backs no query and only slows every insert."""
    conn.execute("DROP INDEX IF EXISTS episodes_thread")


@migration
def m006_fts_secure_delete(conn: sqlite3.Connection) -> None:
    """Deleting a row removes its terms from the full-text index in place (FTS5
    ``secure-delete``), so a forget scrubs the index without rewriting it; the one
    ``optimize`` here scrubs what earlier deletes left in the index's segments."""
    for table in ("facts_fts", "episodes_fts"):
        conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('secure-delete', 1)")
        conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


@migration
def m007_vector_files(conn: sqlite3.Connection) -> None:
    """The vector files beside the store (:mod:`memstrata.store.vector_segment`) need the
    store's identity (files of another store are never read), rowids that never repeat
    (``vector_rowid``, the highest given out), the rowids of one tenant's layer without
    reading its vectors (the ``vectors_segment`` index) and a delete counter that only
    episode vectors move."""
    import secrets

    conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)",
                 (secrets.token_hex(16),))
    conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('vector_rowid', "
                 "(SELECT CAST(coalesce(max(rowid), 0) AS TEXT) FROM vectors))")
    conn.execute("CREATE INDEX IF NOT EXISTS vectors_segment ON vectors (tenant, layer)")
    # only a deleted *episode* vector sends the files to reconcile (facts are searched in
    # the table itself, and a fact's edit replaces its vector often)
    conn.execute("DROP TRIGGER IF EXISTS vectors_generation")
    conn.execute("CREATE TRIGGER vectors_generation AFTER DELETE ON vectors "
                 "WHEN old.layer = 'episodes' BEGIN "
                 "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) "
                 "WHERE key = 'vector_generation'; END")


@migration
def m008_checkpoint_vectors(conn: sqlite3.Connection) -> None:
    """Checkpoint versions have vectors (the handoffs are ranked like facts): a deleted
    version takes its vector with it (no other index holds them: they are scored in the
    table, never in the vector files)."""
    conn.execute("CREATE TRIGGER checkpoints_deindex AFTER DELETE ON checkpoints BEGIN "
                 "DELETE FROM vectors WHERE tenant = old.tenant AND layer = 'checkpoints' "
                 f"AND record_id = {checkpoint_vector_id_sql('old')}; END")


@migration
def m009_words(conn: sqlite3.Connection) -> None:
    """The full-text rows hold their text in :func:`memstrata.store.lexical.index_form`:
    each Chinese, Japanese or Korean character a token of its own (a clause without spaces
    was one token, found by no word of it), and decomposed accents composed (as a query's
    words are). The rows written before that hold either are written again so."""
    pattern = f"*[{CJK_CHARS}{COMBINING_MARKS}]*"  # one pass; GLOB reads the ranges
    for table in ("facts", "episodes"):
        rows = conn.execute(f"SELECT rowid, body, context FROM {table}_fts WHERE body GLOB ? "
                            "OR context GLOB ?", (pattern, pattern)).fetchall()
        for rowid, body, context in rows:
            conn.execute(f"DELETE FROM {table}_fts WHERE rowid = ?", (rowid,))
            conn.execute(f"INSERT INTO {table}_fts (rowid, body, context) VALUES (?, ?, ?)",
                         (rowid, index_form(body or ""), index_form(context or "")))


@migration
def m010_fts_rewrites(conn: sqlite3.Connection) -> None:
    """How many full-text entries of each table were written again in place (a thread's new
    turn rewrites its neighbours' context), counted by
    :meth:`~memstrata.store.sqlite.SQLiteDatabase.index_text`: a process's remembered word
    counts, topped up by rowid, cannot see such a change
    (:meth:`memstrata.store.sqlite_search.TextSearch._watch`)."""
    conn.execute("CREATE TABLE fts_rewrites (tbl TEXT PRIMARY KEY, n INTEGER NOT NULL)")


@migration
def m011_runs_per_scope(conn: sqlite3.Connection) -> None:
    """A run id names a run of one scope, as a Redis scratchpad's keys always did: two users
    who pick the same run id get two runs and two scratchpads (before, the second one's
    write replaced the first one's value, and its end ended the other's run). SQLite cannot
    change a primary key: the two tables are built again, rows, index and trigger kept."""
    for table, key, columns, index in (
            ("runs", "run_id",
             "run_id TEXT NOT NULL, task TEXT, started_at TEXT NOT NULL, ended_at TEXT", None),
            ("scratch", "run_id, key",
             "run_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
             "written_at TEXT NOT NULL, expires_at TEXT NOT NULL",
             "CREATE INDEX scratch_expiry ON scratch (expires_at)")):
        conn.execute(f"CREATE TABLE {table}_m011 ({_SCOPE_COLS}, {columns}, "
                     f"PRIMARY KEY (tenant, scope_key, {key}))")
        conn.execute(f"INSERT INTO {table}_m011 SELECT * FROM {table}")
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE {table}_m011 RENAME TO {table}")
        if index is not None:
            conn.execute(index)
        _register_tenant_trigger(conn, table)


def apply_pending(conn: sqlite3.Connection, when: str) -> list[str]:
    """Apply the pending migrations inside the caller's transaction; returns their names."""
    conn.execute("CREATE TABLE IF NOT EXISTS migrations "
                 "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    done = [r[0] for r in conn.execute("SELECT name FROM migrations")]
    applied = []
    for name, fn in MIGRATIONS.pending(done):
        fn(conn)
        conn.execute("INSERT INTO migrations VALUES (?, ?)", (name, when))
        applied.append(name)
    return applied


__all__ = ["MIGRATIONS", "RECORD_TABLES", "apply_pending", "migration"]
