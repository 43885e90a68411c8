"""The PostgreSQL schema of memstrata: named migrations, applied in order and recorded.

Contract and invariants (enforced by the database, not only by Python):
- The same tables and columns as the SQLite schema (``store/sqlite.py`` m001), with
  ``timestamptz`` for times and ``double precision`` for scores; every tenant table leads
  with ``tenant`` in its keys, so the schema can later be distributed by tenant.
- Row-level security is ENABLEd on every tenant table with the policy
  ``tenant = current_setting('app.tenant', true)`` (USING and WITH CHECK), and FORCEd on
  all but the two full-text tables, so even the owner sees and writes only the tenant of
  the current transaction; without a tenant nothing is visible.
- Full-text matching goes through two SECURITY DEFINER functions
  (``memstrata_episode_matches``, ``memstrata_fact_matches``) that return the ids of the
  *current tenant's* rows matching a tsquery, filtering by ``app.tenant`` themselves. Why:
  under row-level security a query's own conditions may not use an index unless their
  operator is LEAKPROOF, and ``tsvector @@ tsquery`` is not, so the GIN index would never
  be used by the application role (every search would read all of the tenant's rows).
  A third, ``memstrata_episode_match_rows`` (m009), returns the matching episode rows with
  the filter columns the full-text table carries, so a caller's filter applies to them
  directly; it is planned for each call's word, tenant and cap (m011), so that the first
  matches of a common word are read without a bitmap of all of them.
  The owner, as definer, is exempt from the non-forced policy; the application role
  reading the full-text tables directly still sees only its tenant.
- ``tenants`` (the registry of tenant names): a transaction sees its own tenant's name
  only; a maintenance transaction sees them all, so retention, doctor and reindex can
  visit each tenant (m005). ``migrations`` is readable, never writable, by the application
  role.
- Episodes are append-only and checkpoint versions immutable (PL/pgSQL triggers); the
  deletes of forget and retention pass only when the transaction set
  ``memstrata.maintenance = 'on'`` (``set_config(..., true)``, so it ends with the
  transaction). A fact's content is frozen once it left review; facts are never deleted
  outside maintenance.
- At most one active fact per slot and one active procedure per name (partial unique
  indexes); operation keys unique per (tenant, scope) (primary key).
- Full-text entries (``*_fts``, tsvector + GIN) reference their row with ON DELETE
  CASCADE and vectors are deleted by triggers, so no index keeps what a base table
  forgot. The GIN indexes keep a short pending list (m010): every search reads all of it.
- Vectors live in ``vectors.vec`` (pgvector, any dimension); episode vectors are searched
  through partial HNSW indexes, one per common dimension (``INDEXED_DIMS``), on
  ``vec::vector(D)`` with inner-product ops (the embedders return unit vectors, so this
  is cosine, as in the SQLite backend). Other dimensions are searched exactly, as are
  the few vectors of facts and checkpoint versions (m013).
- Migrations need the owner role (DDL); the application role only uses rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from .migrations import Migrations
from .pg_tx import TS_CONFIG
from .sql import checkpoint_vector_id_sql

Migration = Callable[[psycopg.Connection[Any], str | None], None]
MIGRATIONS: Migrations[Migration] = Migrations("postgresql")
migration = MIGRATIONS.register

#: Dimensions that get an HNSW index (hash embedder 256, MiniLM 384, common API models).
INDEXED_DIMS = (256, 384, 512, 768, 1024, 1536)

#: Tables holding tenant rows: RLS with the tenant policy on each.
TENANT_TABLES = ("meta", "facts", "facts_fts", "episodes", "episodes_fts", "vectors",
                 "checkpoints", "operations", "runs", "scratch", "feedback", "procedures")
#: Read by the owner's SECURITY DEFINER match functions: RLS enabled, not forced.
DEFINER_READ_TABLES = ("facts_fts", "episodes_fts")
#: Tables whose inserts register their tenant in ``tenants`` (a safety net under the
#: backend's own registration, so a row written by any path makes its tenant visible).
REGISTERING_TABLES = ("meta", "facts", "episodes", "checkpoints", "operations", "runs",
                      "scratch", "feedback", "procedures")

#: API keys (m007): a tenant table with the same policy, FORCEd; not a record table
#: (forget and retention never touch it).
KEY_TABLE = "api_keys"

TENANT_SETTING = "app.tenant"
MAINTENANCE_SETTING = "memstrata.maintenance"


_SCOPE_COLS = """
    tenant text NOT NULL,
    s_user text, s_project text, s_agent text,
    scope_key text NOT NULL"""


@migration
def m001_initial(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    del app_role
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.execute(f"""
        CREATE TABLE tenants (tenant text PRIMARY KEY,
                              registered_at timestamptz NOT NULL DEFAULT now());
        CREATE TABLE meta (tenant text NOT NULL, key text NOT NULL, value text NOT NULL,
                           PRIMARY KEY (tenant, key));

        CREATE TABLE facts ({_SCOPE_COLS},
            id text NOT NULL,
            kind text NOT NULL, subject text NOT NULL, attribute text NOT NULL,
            claim text NOT NULL, confidence double precision NOT NULL,
            tier text NOT NULL, sensitivity text NOT NULL, status text NOT NULL,
            actor text NOT NULL, source text NOT NULL, evidence text,
            created_at timestamptz NOT NULL, valid_from timestamptz, valid_to timestamptz,
            recheck_after timestamptz, expires_at timestamptz,
            supersedes text, superseded_by text, reason text,
            readers text, last_confirmed_at timestamptz, reviewer text,
            flags text NOT NULL DEFAULT '[]',
            feedback_score integer NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, id),
            CHECK (status IN ('active', 'pending_review', 'superseded', 'retired', 'expired',
                              'rejected')),
            CHECK (confidence >= 0 AND confidence <= 1)
        );
        CREATE UNIQUE INDEX facts_one_active_per_slot
            ON facts (tenant, scope_key, subject, attribute) WHERE status = 'active';
        CREATE INDEX facts_scope ON facts (tenant, s_user, s_project, status);
        CREATE INDEX facts_slot ON facts (tenant, scope_key, subject, attribute, status);
        CREATE INDEX facts_supersedes ON facts (tenant, supersedes)
            WHERE supersedes IS NOT NULL;
        CREATE INDEX facts_superseded_by ON facts (tenant, superseded_by)
            WHERE superseded_by IS NOT NULL;

        CREATE TABLE episodes ({_SCOPE_COLS},
            id text NOT NULL,
            event text NOT NULL, text text NOT NULL,
            actor text NOT NULL, source text NOT NULL, evidence text,
            created_at timestamptz NOT NULL, observed_at timestamptz NOT NULL,
            outcome text, confidence double precision NOT NULL, expires_at timestamptz,
            supersedes text, readers text, flags text NOT NULL DEFAULT '[]',
            subject text,
            PRIMARY KEY (tenant, id)
        );
        CREATE INDEX episodes_subject ON episodes (tenant, subject);
        CREATE INDEX episodes_thread ON episodes (tenant, scope_key, source, observed_at);
        CREATE INDEX episodes_scope ON episodes (tenant, s_user, s_project, observed_at);
        CREATE INDEX episodes_supersedes ON episodes (tenant, supersedes)
            WHERE supersedes IS NOT NULL;
        CREATE INDEX episodes_expiry ON episodes (expires_at) WHERE expires_at IS NOT NULL;

        -- tsv: the record's own text at weight A, its thread context at weight B.
        CREATE TABLE facts_fts (
            tenant text NOT NULL, id text NOT NULL, tsv tsvector NOT NULL,
            PRIMARY KEY (tenant, id),
            FOREIGN KEY (tenant, id) REFERENCES facts (tenant, id) ON DELETE CASCADE
        );
        CREATE INDEX facts_fts_tsv ON facts_fts USING gin (tsv);
        -- Episode rows are immutable, so their filter columns are copied here: a search
        -- filters and takes its top k from this one table (no join per matching row).
        CREATE TABLE episodes_fts (
            tenant text NOT NULL, id text NOT NULL, tsv tsvector NOT NULL,
            s_user text, s_project text, s_agent text,
            expires_at timestamptz, observed_at timestamptz, readers text,
            PRIMARY KEY (tenant, id),
            FOREIGN KEY (tenant, id) REFERENCES episodes (tenant, id) ON DELETE CASCADE
        );
        CREATE INDEX episodes_fts_tsv ON episodes_fts USING gin (tsv);

        -- Likewise for episode vectors.
        CREATE TABLE vectors (
            tenant text NOT NULL, record_id text NOT NULL, layer text NOT NULL,
            model text NOT NULL, dims integer NOT NULL, vec vector NOT NULL,
            s_user text, s_project text, s_agent text,
            expires_at timestamptz, observed_at timestamptz, readers text,
            PRIMARY KEY (tenant, record_id),
            CHECK (layer IN ('facts', 'episodes'))
        );
        CREATE INDEX vectors_scope ON vectors (tenant, layer, s_user, s_project);
        -- the exact fallback of a date-bounded search reads the period, not the scope
        CREATE INDEX vectors_observed ON vectors (tenant, layer, observed_at);

        CREATE TABLE checkpoints ({_SCOPE_COLS},
            task text NOT NULL, version integer NOT NULL,
            data text NOT NULL, updated_at timestamptz NOT NULL, updated_by text,
            PRIMARY KEY (tenant, scope_key, task, version)
        );

        CREATE TABLE operations ({_SCOPE_COLS},
            key text NOT NULL, intent text NOT NULL, status text NOT NULL,
            external_ref text, error text, attempts integer NOT NULL DEFAULT 1,
            run_id text, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
            PRIMARY KEY (tenant, scope_key, key),
            CHECK (status IN ('pending', 'succeeded', 'failed', 'unknown'))
        );

        CREATE TABLE runs ({_SCOPE_COLS},
            run_id text NOT NULL, task text, started_at timestamptz NOT NULL,
            ended_at timestamptz,
            PRIMARY KEY (tenant, run_id)
        );

        CREATE TABLE scratch ({_SCOPE_COLS},
            run_id text NOT NULL, key text NOT NULL, value text NOT NULL,
            written_at timestamptz NOT NULL, expires_at timestamptz NOT NULL,
            PRIMARY KEY (tenant, run_id, key)
        );
        CREATE INDEX scratch_expiry ON scratch (tenant, expires_at);

        CREATE TABLE feedback (
            tenant text NOT NULL, ref text NOT NULL, signal text NOT NULL,
            note text, created_at timestamptz NOT NULL
        );
        CREATE INDEX feedback_ref ON feedback (tenant, ref);

        CREATE TABLE procedures ({_SCOPE_COLS},
            name text NOT NULL, version integer NOT NULL, status text NOT NULL,
            data text NOT NULL, owner text, created_at timestamptz NOT NULL,
            activated_at timestamptz, activated_by text,
            PRIMARY KEY (tenant, scope_key, name, version)
        );
        CREATE UNIQUE INDEX procedures_one_active
            ON procedures (tenant, scope_key, name) WHERE status = 'active';
    """)


@migration
def m002_guards(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """Append-only, frozen-content and index-cleanup triggers; full-text match functions."""
    del app_role
    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute("SELECT quote_ident(current_schema())").fetchone()
    schema = row[0] if row else "public"
    conn.execute(f"""
        CREATE FUNCTION memstrata_in_maintenance() RETURNS boolean
            LANGUAGE sql STABLE AS
            $$ SELECT coalesce(current_setting('{MAINTENANCE_SETTING}', true), '') = 'on' $$;

        -- TG_ARGV[0]: the message; TG_ARGV[1] = 'maintenance' lets maintenance through.
        CREATE FUNCTION memstrata_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_NARGS > 1 AND TG_ARGV[1] = 'maintenance' AND memstrata_in_maintenance() THEN
                IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
                RETURN NEW;
            END IF;
            RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';
        END $$;

        CREATE TRIGGER episodes_append_only BEFORE UPDATE ON episodes FOR EACH ROW
            EXECUTE FUNCTION memstrata_refuse(
                'episodes are append-only: append a correction that supersedes it',
                'maintenance');
        CREATE TRIGGER episodes_no_delete BEFORE DELETE ON episodes FOR EACH ROW
            EXECUTE FUNCTION memstrata_refuse('episodes are append-only', 'maintenance');

        CREATE TRIGGER checkpoints_versioned BEFORE UPDATE ON checkpoints FOR EACH ROW
            EXECUTE FUNCTION memstrata_refuse(
                'checkpoint versions are immutable: save a new one');
        CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints FOR EACH ROW
            EXECUTE FUNCTION memstrata_refuse('checkpoint history is kept', 'maintenance');

        CREATE TRIGGER facts_no_delete BEFORE DELETE ON facts FOR EACH ROW
            EXECUTE FUNCTION memstrata_refuse(
                'facts are never deleted: retire or supersede them', 'maintenance');

        CREATE FUNCTION memstrata_facts_frozen() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF OLD.status <> 'pending_review' AND
               (NEW.claim, NEW.kind, NEW.subject, NEW.attribute, NEW.tenant, NEW.scope_key,
                NEW.actor, NEW.source, NEW.created_at)
               IS DISTINCT FROM
               (OLD.claim, OLD.kind, OLD.subject, OLD.attribute, OLD.tenant, OLD.scope_key,
                OLD.actor, OLD.source, OLD.created_at) THEN
                RAISE EXCEPTION 'fact content is immutable: propose a new fact'
                    USING ERRCODE = 'integrity_constraint_violation';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER facts_content_frozen BEFORE UPDATE ON facts FOR EACH ROW
            EXECUTE FUNCTION memstrata_facts_frozen();

        -- The full-text rows go by ON DELETE CASCADE; vectors (one table for two layers)
        -- by trigger.
        CREATE FUNCTION memstrata_drop_vector() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM vectors WHERE tenant = OLD.tenant AND record_id = OLD.id;
            RETURN OLD;
        END $$;
        CREATE TRIGGER facts_deindex AFTER DELETE ON facts FOR EACH ROW
            EXECUTE FUNCTION memstrata_drop_vector();
        CREATE TRIGGER episodes_deindex AFTER DELETE ON episodes FOR EACH ROW
            EXECUTE FUNCTION memstrata_drop_vector();

        -- The GIN index under row-level security (see the module docstring). cap limits
        -- the matches (NULL: all); the index is the right path whatever the estimate.
        CREATE FUNCTION memstrata_episode_matches(q tsquery, cap integer) RETURNS SETOF text
            LANGUAGE sql STABLE SECURITY DEFINER
            SET search_path = pg_catalog, {schema} SET enable_seqscan = off AS $$
            SELECT f.id FROM episodes_fts f
            WHERE f.tenant = current_setting('{TENANT_SETTING}', true) AND f.tsv @@ q
            LIMIT cap $$;
        CREATE FUNCTION memstrata_fact_matches(q tsquery, cap integer) RETURNS SETOF text
            LANGUAGE sql STABLE SECURITY DEFINER
            SET search_path = pg_catalog, {schema} SET enable_seqscan = off AS $$
            SELECT f.id FROM facts_fts f
            WHERE f.tenant = current_setting('{TENANT_SETTING}', true) AND f.tsv @@ q
            LIMIT cap $$;

        CREATE FUNCTION memstrata_register_tenants() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO tenants (tenant)
                SELECT DISTINCT n.tenant FROM new_rows n
                WHERE NOT EXISTS (SELECT 1 FROM tenants t WHERE t.tenant = n.tenant)
                ON CONFLICT (tenant) DO NOTHING;
            RETURN NULL;
        END $$;
    """)
    for table in REGISTERING_TABLES:
        conn.execute(sql.SQL(
            "CREATE TRIGGER {trigger} AFTER INSERT ON {table} REFERENCING NEW TABLE AS new_rows "
            "FOR EACH STATEMENT EXECUTE FUNCTION memstrata_register_tenants()"
        ).format(trigger=sql.Identifier(f"{table}_register_tenant"),
                 table=sql.Identifier(table)))


@migration
def m003_row_level_security(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """Tenant isolation by the database: ENABLE + FORCE row-level security everywhere."""
    tenant = sql.SQL("tenant = current_setting({}, true)").format(sql.Literal(TENANT_SETTING))
    for table in TENANT_TABLES:
        _tenant_policy(conn, table, force=table not in DEFINER_READ_TABLES)
    # Tenant names are visible to every role (maintenance visits each tenant); a role can
    # only register the tenant of its own transaction and never rename or drop one.
    conn.execute("ALTER TABLE tenants ENABLE ROW LEVEL SECURITY")
    conn.execute("ALTER TABLE tenants FORCE ROW LEVEL SECURITY")
    conn.execute("CREATE POLICY tenants_read ON tenants FOR SELECT USING (true)")
    conn.execute(sql.SQL("CREATE POLICY tenants_register ON tenants FOR INSERT WITH CHECK ({})")
                 .format(tenant))
    # Not FORCEd: the owner records migrations; everybody else may only read them.
    conn.execute("ALTER TABLE migrations ENABLE ROW LEVEL SECURITY")
    conn.execute("CREATE POLICY migrations_read ON migrations FOR SELECT USING (true)")
    if app_role is not None:
        grant_app_role(conn, app_role)


@migration
def m004_vector_indexes(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """One partial HNSW index per common dimension, over episode vectors only (facts are
    few per scope and searched exactly)."""
    del app_role
    for dims in INDEXED_DIMS:
        conn.execute(sql.SQL(
            "CREATE INDEX {name} ON vectors USING hnsw ((vec::vector({dims})) vector_ip_ops) "
            "WHERE dims = {dims} AND layer = 'episodes'"
        ).format(name=sql.Identifier(f"vectors_hnsw_{dims}"), dims=sql.Literal(dims)))


@migration
def m005_private_tenant_registry(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """A transaction sees its own tenant's name only; the whole registry is visible to
    maintenance transactions (retention, doctor, reindex), which visit every tenant."""
    del app_role
    conn.execute("DROP POLICY tenants_read ON tenants")
    conn.execute(sql.SQL(
        "CREATE POLICY tenants_read ON tenants FOR SELECT USING "
        "(tenant = current_setting({}, true) OR memstrata_in_maintenance())"
    ).format(sql.Literal(TENANT_SETTING)))


@migration
def m006_episode_threads(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """Episodes carry their thread (a session, a run, a ticket), apart from their source;
    the episodes stored before it are threaded by source, as they were."""
    del app_role
    conn.execute("ALTER TABLE episodes ADD COLUMN thread text")
    # the owner fills the new column for every tenant: row security and the append-only
    # trigger step aside for this one statement, inside the migration's transaction
    conn.execute("ALTER TABLE episodes NO FORCE ROW LEVEL SECURITY")
    conn.execute("ALTER TABLE episodes DISABLE TRIGGER episodes_append_only")
    conn.execute("UPDATE episodes SET thread = source")
    conn.execute("ALTER TABLE episodes ENABLE TRIGGER episodes_append_only")
    conn.execute("ALTER TABLE episodes FORCE ROW LEVEL SECURITY")
    conn.execute("CREATE INDEX episodes_by_thread ON episodes (tenant, scope_key, thread, "
                 "observed_at)")


@migration
def m007_api_keys(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """API keys of ``memstrata serve``: a tenant table like the others (RLS ENABLEd and
    FORCEd), so a key is looked up inside its own tenant's transaction only."""
    conn.execute(f"""
        CREATE TABLE {KEY_TABLE} (
            tenant text NOT NULL, id text NOT NULL, secret_hash text NOT NULL,
            role text NOT NULL CHECK (role IN ('agent', 'reviewer', 'admin')),
            users text, projects text, agents text, principal text, actor text NOT NULL,
            label text, rate_per_minute integer, created_at timestamptz NOT NULL,
            revoked_at timestamptz,
            PRIMARY KEY (tenant, id))""")
    _tenant_policy(conn, KEY_TABLE, force=True)
    if app_role is not None:
        conn.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE ON {} TO {}").format(
            sql.Identifier(KEY_TABLE), sql.Identifier(app_role)))


@migration
def m008_drop_source_thread_index(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """Threads are read by the ``thread`` column (m006's index); the index by source that
    threaded episodes before it backs no query and only slows every insert."""
    del app_role
    conn.execute("DROP INDEX IF EXISTS episodes_thread")


@migration
def m009_episode_match_rows(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """The current tenant's matching full-text rows *with the filter columns they carry*
    (``memstrata_episode_match_rows``, SECURITY DEFINER like m002's match functions): a
    caller's filter applies to them without looking each match up again (counting a
    common word's first 2,000 matches, measured on a 140k-episode store as it was being
    filled: 10-11 ms against 5 ms for one word, 17-18 against 10-11 for another)."""
    del app_role
    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute("SELECT quote_ident(current_schema())").fetchone()
    schema = row[0] if row else "public"
    conn.execute(f"""
        CREATE FUNCTION memstrata_episode_match_rows(q tsquery, cap integer)
            RETURNS TABLE (tenant text, id text, s_user text, s_project text, s_agent text,
                           expires_at timestamptz, observed_at timestamptz, readers text)
            LANGUAGE sql STABLE SECURITY DEFINER
            SET search_path = pg_catalog, {schema} SET enable_seqscan = off AS $$
            SELECT f.tenant, f.id, f.s_user, f.s_project, f.s_agent, f.expires_at,
                   f.observed_at, f.readers
            FROM episodes_fts f
            WHERE f.tenant = current_setting('{TENANT_SETTING}', true) AND f.tsv @@ q
            LIMIT cap $$""")


#: The full-text GIN indexes' pending list, in kB (PostgreSQL's default is 4,096). Every
#: search of a GIN index reads its whole pending list (the entries inserted since the last
#: merge), so a full default list makes each word of a query pay for a scan of 4 MB; the
#: first pass of a fresh process, which counts each query word once, paid most of it
#: (bench latency, 100k episodes, hash:384 vectors, MiniLM query cost: recall p95 265-276
#: ms with a 413-page list, 93-94 ms once it was merged). At 40k episodes, 256 kB, 64 kB
#: and no pending list at all (``fastupdate = off``) wrote 235-237 episodes/s against 196
#: with the default: the vectors' index, not this one, bounds the writes.
GIN_PENDING_LIST_KB = 256


@migration
def m010_gin_pending_list(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """A short pending list for the full-text GIN indexes (:data:`GIN_PENDING_LIST_KB`),
    merged once now; later merges happen as it fills, and by VACUUM (``compact``,
    autovacuum)."""
    del app_role
    for index in ("episodes_fts_tsv", "facts_fts_tsv"):
        conn.execute(sql.SQL("ALTER INDEX {} SET (gin_pending_list_limit = {})").format(
            sql.Identifier(index), sql.Literal(GIN_PENDING_LIST_KB)))
        conn.execute("SELECT gin_clean_pending_list(%s::regclass)", (index,))


@migration
def m011_match_rows_planned_per_call(conn: psycopg.Connection[Any],
                                     app_role: str | None) -> None:
    """``memstrata_episode_match_rows`` plans its query for each call's word, tenant and cap
    (PL/pgSQL ``EXECUTE ... USING``): the planner may then read a word in a quarter of the
    rows with a scan that stops at the cap, instead of the bitmap of every match that the
    SQL function's one plan (with the sequential scan turned off) built for each word. Counting the
    first 2,000 matches of the bench's query words at 1M episodes (43 words, best of 3):
    296 ms in all against 518, a common word 3 ms against 26-49."""
    del app_role
    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute("SELECT quote_ident(current_schema())").fetchone()
    schema = row[0] if row else "public"
    conn.execute(f"""
        CREATE OR REPLACE FUNCTION memstrata_episode_match_rows(q tsquery, cap integer)
            RETURNS TABLE (tenant text, id text, s_user text, s_project text, s_agent text,
                           expires_at timestamptz, observed_at timestamptz, readers text)
            LANGUAGE plpgsql STABLE SECURITY DEFINER
            SET search_path = pg_catalog, {schema} AS $$
            BEGIN
                RETURN QUERY EXECUTE 'SELECT f.tenant, f.id, f.s_user, f.s_project,
                        f.s_agent, f.expires_at, f.observed_at, f.readers
                    FROM episodes_fts f WHERE f.tenant = $1 AND f.tsv @@ $2 LIMIT $3'
                USING current_setting('{TENANT_SETTING}', true), q, cap;
            END $$""")


@migration
def m012_fulltext_words_of_paths(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """The words of the paths, URLs, file names and versions already indexed: the parser
    kept each as one lexeme ("src/handlers/payment.py"), which no query word matched (new
    rows are indexed with their words, :func:`memstrata.store.lexical.plain_words`). Each
    such lexeme's words are added at its weight (A: the record's own text, B: its thread
    context); the owner updates every tenant's rows (the full-text tables do not force
    row security)."""
    del app_role
    for table in DEFINER_READ_TABLES:
        conn.execute(sql.SQL("""
            UPDATE {table} f SET tsv = f.tsv || x.words
            FROM (SELECT p.tenant, p.id,
                         setweight(to_tsvector({cfg}, coalesce(
                             string_agg(p.words, ' ') FILTER (WHERE p.own), '')), 'A') ||
                         setweight(to_tsvector({cfg}, coalesce(
                             string_agg(p.words, ' ') FILTER (WHERE NOT p.own), '')), 'B')
                         AS words
                  FROM (SELECT t.tenant, t.id,
                               regexp_replace(u.lexeme, {joiners}, ' ', 'g') AS words,
                               'A' = ANY(u.weights::text[]) AS own
                        FROM {table} t, unnest(t.tsv) u
                        WHERE u.lexeme ~ {joiners}) p
                  GROUP BY p.tenant, p.id) x
            WHERE f.tenant = x.tenant AND f.id = x.id""").format(
            table=sql.Identifier(table), cfg=sql.Literal(TS_CONFIG),
            joiners=sql.Literal("[^[:alnum:]_'-]+")))


@migration
def m013_checkpoint_vectors(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """Checkpoint versions have vectors (the handoffs are ranked like facts), in the one
    vectors table; a deleted version takes its vector with it."""
    del app_role
    conn.execute("ALTER TABLE vectors DROP CONSTRAINT vectors_layer_check")
    conn.execute("ALTER TABLE vectors ADD CONSTRAINT vectors_layer_check "
                 "CHECK (layer IN ('facts', 'episodes', 'checkpoints'))")
    conn.execute(f"""
        CREATE FUNCTION memstrata_drop_checkpoint_vector() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM vectors WHERE tenant = OLD.tenant AND layer = 'checkpoints'
                AND record_id = {checkpoint_vector_id_sql('OLD')};
            RETURN OLD;
        END $$""")
    conn.execute("CREATE TRIGGER checkpoints_deindex AFTER DELETE ON checkpoints "
                 "FOR EACH ROW EXECUTE FUNCTION memstrata_drop_checkpoint_vector()")


@migration
def m014_runs_per_scope(conn: psycopg.Connection[Any], app_role: str | None) -> None:
    """A run id names a run of one scope (SQLite's m011): two users who pick the same run id
    get two runs and two scratchpads."""
    del app_role
    conn.execute("ALTER TABLE runs DROP CONSTRAINT runs_pkey, "
                 "ADD PRIMARY KEY (tenant, scope_key, run_id)")
    conn.execute("ALTER TABLE scratch DROP CONSTRAINT scratch_pkey, "
                 "ADD PRIMARY KEY (tenant, scope_key, run_id, key)")


def _tenant_policy(conn: psycopg.Connection[Any], table: str, *, force: bool) -> None:
    """ENABLE (and FORCE) row-level security on ``table`` with the tenant policy."""
    tenant = sql.SQL("tenant = current_setting({}, true)").format(sql.Literal(TENANT_SETTING))
    ident = sql.Identifier(table)
    conn.execute(sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(ident))
    if force:
        conn.execute(sql.SQL("ALTER TABLE {} FORCE ROW LEVEL SECURITY").format(ident))
    conn.execute(sql.SQL(
        "CREATE POLICY tenant_isolation ON {} USING ({}) WITH CHECK ({})"
    ).format(ident, tenant, tenant))


def grant_app_role(conn: psycopg.Connection[Any], app_role: str) -> None:
    """Give the application role row access (and VACUUM, so compaction can run as it)."""
    role = sql.Identifier(app_role)
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(role))
    tables = sql.SQL(", ").join(sql.Identifier(t) for t in ("tenants", *TENANT_TABLES))
    conn.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}")
                 .format(tables, role))
    conn.execute(sql.SQL("REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON migrations FROM {}")
                 .format(role))
    conn.execute(sql.SQL("GRANT SELECT ON migrations TO {}").format(role))
    conn.execute(sql.SQL("REVOKE TRUNCATE ON {} FROM {}").format(tables, role))
    if conn.info.server_version >= 170000:
        conn.execute(sql.SQL("GRANT MAINTAIN ON {} TO {}").format(tables, role))


__all__ = ["DEFINER_READ_TABLES", "GIN_PENDING_LIST_KB", "INDEXED_DIMS", "KEY_TABLE",
           "MIGRATIONS", "REGISTERING_TABLES", "TENANT_TABLES", "grant_app_role", "migration"]
