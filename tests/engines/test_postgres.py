"""PostgreSQL backend: what the conformance suite cannot see through the API.

Checked with raw SQL against a real PostgreSQL 18 + pgvector: migrations, row-level
security as the application role, the schema's own guards, forget leaving no trace in
base tables, full-text rows, vectors or history, HNSW vector search under filters,
retention and doctor across tenants, retries after a real deadlock.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql

from backends import PG_TABLES, migrate
from memstrata import BackendError, ConfigError, Conflict, ManualClock, Memory, Scope
from memstrata.providers.embeddings import HashingEmbedder
from memstrata.store.pg_schema import DEFINER_READ_TABLES, TENANT_TABLES
from memstrata.store.pg_vectors import PgVectorIndex
from memstrata.store.postgres import PostgresDatabase
from services import AppDatabase

pytestmark = pytest.mark.postgres

ALICE = Scope(user="alice", project="docs-site")
SECRET = "Quokkaberry7731"
FACT: dict[str, Any] = dict(kind="profile", subject="alice", attribute="allergy", actor="user",
                            source="chat")


def app(db: AppDatabase, tenant: str | None = None) -> psycopg.Connection[Any]:
    """A raw connection as the application role, optionally inside one tenant."""
    conn = psycopg.connect(db.app_url)
    if tenant is not None:
        conn.execute("SELECT set_config('app.tenant', %s, true)", (tenant,))
    return conn


def counts(db: AppDatabase) -> dict[str, int]:
    """Rows per table over every tenant (superuser: row-level security does not apply)."""
    with psycopg.connect(db.admin_url) as conn:
        return {t: conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t)))
                .fetchone()[0] for t in PG_TABLES}  # type: ignore[index]


@pytest.fixture
def pg(pg_conformance_db: AppDatabase, pg_app_url: str) -> AppDatabase:
    """The conformance database, emptied."""
    return pg_conformance_db


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-08-03T09:00:00+00:00")


# ------------------------------------------------------------------ migrations and roles


def test_migrations_need_the_owner_are_recorded_and_not_rerun(pg_database: AppDatabase) -> None:
    with pytest.raises(ConfigError, match="may not apply them"):
        Memory.open(pg_database.app_url, embedder=None)
    names = migrate(pg_database)
    assert names == ["m001_initial", "m002_guards", "m003_row_level_security",
                     "m004_vector_indexes", "m005_private_tenant_registry",
                     "m006_episode_threads", "m007_api_keys",
                     "m008_drop_source_thread_index", "m009_episode_match_rows",
                     "m010_gin_pending_list", "m011_match_rows_planned_per_call",
                     "m012_fulltext_words_of_paths", "m013_checkpoint_vectors",
                     "m014_runs_per_scope"]
    assert migrate(pg_database) == names  # idempotent
    with Memory.open(pg_database.app_url, embedder=None) as mem:
        assert mem.stats()["migrations"] == names
        assert "***" in mem.db.url and pg_database.app_url not in repr(mem)
    with psycopg.connect(pg_database.admin_url) as conn:
        applied = conn.execute("SELECT name, applied_at FROM migrations ORDER BY name").fetchall()
        owners = {r[0] for r in conn.execute(
            "SELECT tableowner FROM pg_tables WHERE schemaname = 'public'")}
        role = conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s",
                            (pg_database.app_role,)).fetchone()
    assert [r[0] for r in applied] == names and all(r[1] is not None for r in applied)
    assert owners == {pg_database.owner_role}  # the app role owns nothing
    assert role == (False, False)
    with app(pg_database) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("INSERT INTO migrations VALUES ('m999_evil', now())")
    with app(pg_database) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("CREATE TABLE mine (x int)")


def test_a_wrong_password_is_a_backend_error_without_the_password(
        pg_database: AppDatabase) -> None:
    bad = pg_database.app_url.replace("_app:", "_app:x", 1)
    with pytest.raises(BackendError) as info:
        PostgresDatabase.from_url(bad, timeout=3)
    assert "***" in str(info.value)
    password = bad.split(":", 2)[2].split("@", 1)[0]
    assert password not in str(info.value)


# ------------------------------------------------------------------ row-level security


def _fill_two_tenants(url: str) -> None:
    with Memory.open(url, embedder=HashingEmbedder(256)) as mem:
        for tenant in ("acme", "globex"):
            scope = Scope(tenant=tenant, user="alice", project="p")
            res = mem.facts.propose(scope, claim=f"{tenant} alice likes tea", **FACT)
            assert res.record is not None
            mem.feedback(res.record.ref, "useful", tenant=tenant)
            mem.episodes.append(scope, text=f"{tenant} ordered tea", source="erp", actor="tool")
            mem.checkpoints.save(scope, "t", objective=f"{tenant} objective")
            mem.ledger.begin(scope, f"{tenant}:op", intent="order")
            run = mem.run(scope).__enter__()
            run.scratch.write("k", f"{tenant} scratch")
            mem.procedures.propose({"name": "deploy", "owner": "alice", "steps": ["build"],
                                    "cases": [{"state": {"conditions": []},
                                               "expect": {"next_step": "build"}}]},
                                   scope=scope)


def test_app_role_sees_only_its_tenant_even_with_raw_sql(pg: AppDatabase) -> None:
    _fill_two_tenants(pg.app_url)
    every = counts(pg)
    assert all(every[t] >= 2 for t in TENANT_TABLES), every
    with app(pg) as conn:  # no tenant set: nothing at all
        for table in TENANT_TABLES:
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
        # the registry of tenant names is private too ...
        assert conn.execute("SELECT tenant FROM tenants").fetchall() == []
    with app(pg, "acme") as conn:
        assert [r[0] for r in conn.execute("SELECT tenant FROM tenants")] == ["acme"]
    with app(pg) as conn:
        # ... but a maintenance transaction (retention, doctor, reindex) lists them all
        conn.execute("SELECT set_config('memstrata.maintenance', 'on', true)")
        assert [r[0] for r in conn.execute("SELECT tenant FROM tenants ORDER BY 1")] == [
            "acme", "globex"]
    with Memory.open(pg.app_url, embedder=None) as mem:
        assert mem.db.tenants() == ["acme", "globex"]
    with app(pg, "acme") as conn:
        for table in TENANT_TABLES:
            tenants = {r[0] for r in conn.execute(f"SELECT DISTINCT tenant FROM {table}")}
            assert tenants == {"acme"}, table
            named = conn.execute(f"SELECT count(*) FROM {table} WHERE tenant = 'globex'")
            assert named.fetchone() == (0,), table
        assert conn.execute("UPDATE facts SET reviewer = 'x' WHERE tenant = 'globex'"
                            ).rowcount == 0
        assert conn.execute("DELETE FROM scratch WHERE tenant = 'globex'").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO runs (tenant, scope_key, run_id, started_at) "
                         "VALUES ('globex', 'x', 'smuggled', now())")
    with app(pg, "acme") as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("UPDATE operations SET tenant = 'globex'")
    # the full-text match functions (SECURITY DEFINER) answer for the current tenant only
    match = ("SELECT count(*) FROM memstrata_episode_matches(plainto_tsquery('english', %s), "
             "NULL)")
    with app(pg, "acme") as conn:
        assert conn.execute(match, ("acme",)).fetchone() == (1,)
        assert conn.execute(match, ("globex",)).fetchone() == (0,)
    with app(pg) as conn:
        assert conn.execute(match, ("tea",)).fetchone() == (0,)
    # the owner is subject to the policy too (FORCE), except on the two full-text tables
    # that only its match functions read
    with psycopg.connect(pg.owner_url) as conn:
        assert conn.execute("SELECT count(*) FROM facts").fetchone() == (0,)
        rls = dict(conn.execute(
            "SELECT relname, relforcerowsecurity FROM pg_class WHERE relname = ANY(%s) "
            "AND relrowsecurity", (list(TENANT_TABLES),)).fetchall())
    assert set(rls) == set(TENANT_TABLES)
    assert {t for t, forced in rls.items() if not forced} == set(DEFINER_READ_TABLES)
    assert counts(pg) == every  # nothing leaked, nothing changed


def test_the_api_keeps_tenants_apart_and_refuses_mixed_nesting(pg: AppDatabase) -> None:
    _fill_two_tenants(pg.app_url)
    with Memory.open(pg.app_url, embedder=HashingEmbedder(256)) as mem:
        acme = Scope(tenant="acme", user="alice", project="p")
        globex = Scope(tenant="globex", user="alice", project="p")
        assert [f.claim for f in mem.facts.current(acme)] == ["acme alice likes tea"]
        assert [h.excerpt for h in mem.episodes.search(globex, "ordered tea")] == [
            "globex ordered tea"]
        assert all("acme" in h.excerpt for h in mem.recall(acme, "tea").items)
        db = mem.db
        assert isinstance(db, PostgresDatabase)
        with (db.transaction("acme") as tx, pytest.raises(BackendError, match="nest"),
              db.transaction("globex")):
            pass
        assert tx.tenant == "acme"


# ------------------------------------------------------------------ schema guards


def test_schema_guards_hold_against_raw_sql(pg: AppDatabase, clock: ManualClock) -> None:
    with Memory.open(pg.app_url, embedder=HashingEmbedder(256), clock=clock) as mem:
        ep = mem.episodes.append(ALICE, text="Deployed v1", source="ci", actor="tool")
        fact = mem.facts.propose(ALICE, claim="Uses tabs", kind="preference", subject="alice",
                                 attribute="indent", actor="user", source="chat").record
        mem.checkpoints.save(ALICE, "t", objective="ship")
        mem.ledger.begin(ALICE, "publish:v1", intent="publish")
    assert fact is not None
    refused = psycopg.errors.IntegrityConstraintViolation
    with app(pg, "default") as c, pytest.raises(refused, match="append-only"):
        c.execute("UPDATE episodes SET text = 'tampered' WHERE id = %s", (ep.id,))
    with app(pg, "default") as c, pytest.raises(refused, match="append-only"):
        c.execute("DELETE FROM episodes WHERE id = %s", (ep.id,))
    with app(pg, "default") as c, pytest.raises(refused, match="immutable"):
        c.execute("UPDATE facts SET claim = 'rewritten' WHERE id = %s", (fact.id,))
    with app(pg, "default") as c, pytest.raises(refused, match="never deleted"):
        c.execute("DELETE FROM facts")
    with app(pg, "default") as c, pytest.raises(refused, match="immutable"):
        c.execute("UPDATE checkpoints SET data = '{}'")
    with app(pg, "default") as c, pytest.raises(psycopg.errors.UniqueViolation,
                                                match="facts_one_active_per_slot"):
        c.execute("INSERT INTO facts SELECT (jsonb_populate_record(f, jsonb_build_object("
                  "'id', '01ZZZZZZZZZZZZZZZZZZZZZZZZ', 'claim', 'Uses spaces'))).* FROM facts f")
    with app(pg, "default") as c, pytest.raises(psycopg.errors.UniqueViolation):
        c.execute("INSERT INTO operations SELECT * FROM operations")
    with app(pg, "default") as c:
        assert c.execute("UPDATE facts SET reviewer = 'ok' WHERE id = %s", (fact.id,)
                         ).rowcount == 1  # metadata may change; content may not
        c.rollback()
    # maintenance (forget, retention) may delete; the indexes follow their row
    with app(pg, "default") as c:
        c.execute("SELECT set_config('memstrata.maintenance', 'on', true)")
        assert c.execute("DELETE FROM episodes WHERE id = %s", (ep.id,)).rowcount == 1
        left = c.execute("SELECT (SELECT count(*) FROM episodes_fts WHERE id = %s), "
                         "(SELECT count(*) FROM vectors WHERE record_id = %s)",
                         (ep.id, ep.id)).fetchone()
        assert left == (0, 0)
        c.rollback()
    # the maintenance setting ends with its transaction
    with app(pg, "default") as c, pytest.raises(refused, match="append-only"):
        c.execute("DELETE FROM episodes")
    assert counts(pg)["episodes"] == 1


def test_failed_batches_leave_no_rows_or_index_rows(pg: AppDatabase) -> None:
    from memstrata import ValidationError

    with Memory.open(pg.app_url, embedder=HashingEmbedder(256)) as mem:
        mem.episodes.append(ALICE, text="Search index stays in step", source="s", actor="user")
        before = counts(pg)
        assert before["episodes"] == before["episodes_fts"] == before["vectors"] == 1
        with pytest.raises(ValidationError):
            mem.episodes.append_many([
                {"scope": ALICE, "text": "first of batch", "source": "s", "actor": "user"},
                {"scope": ALICE, "text": "second", "source": "s", "actor": "user",
                 "supersedes": "01ZZZZZZZZZZZZZZZZZZZZZZZZ"},
            ])
        with pytest.raises(ValidationError):
            mem.facts.propose(ALICE, claim="", **FACT)
        with pytest.raises(ValidationError):
            mem.checkpoints.save(ALICE, "t", objective="ok", completed="not a list")
        assert counts(pg) == before
        assert mem.doctor() == []
        with app(pg, "default") as c:
            c.execute("DELETE FROM episodes_fts")
            c.commit()
        assert any("missing from episodes_fts" in p for p in mem.doctor())


def test_a_row_indexed_with_its_accents_is_still_found(pg: AppDatabase) -> None:
    """Rows are indexed without accents ("café" as "cafe"), and a query word is matched in
    both forms: a row indexed before that, with its accents, is still found by the word
    typed with them (its full-text row is written here as it was then)."""
    you = Scope(user="u")
    with Memory.open(pg.app_url, embedder=None) as mem:
        old = mem.episodes.append(you, text="Réunion au café à Montréal", actor="user",
                                  source="chat:1", thread="t1")
        new = mem.episodes.append(you, text="Le café de la gare ferme tôt", actor="user",
                                  source="chat:2", thread="t2")
        with app(pg, "default") as c:
            c.execute("UPDATE episodes_fts SET tsv = setweight(to_tsvector('english', %s), "
                      "'A') WHERE id = %s", ("Réunion au café à Montréal", old.id))
            c.commit()
        assert {h.ref for h in mem.episodes.search(you, "café", k=5)} == {old.ref, new.ref}
        # the word typed without its accents finds the rows indexed without them
        assert [h.ref for h in mem.episodes.search(you, "cafe gare", k=5)][:1] == [new.ref]


# ------------------------------------------------------------------ forget


def test_forget_leaves_no_trace_in_tables_fulltext_vectors_or_history(
        pg: AppDatabase, clock: ManualClock) -> None:
    with Memory.open(pg.app_url, embedder=HashingEmbedder(256), clock=clock) as mem:
        f1 = mem.facts.propose(ALICE, claim=f"Allergic to {SECRET} pastries", **FACT)
        clock.advance(days=1)
        f2 = mem.facts.propose(ALICE, claim=f"No longer allergic to {SECRET}", **FACT)
        assert f1.record is not None and f2.record is not None and f2.status == "superseding"
        mem.feedback(f2.record.ref, "useful")
        keep = mem.facts.propose(ALICE, claim="Prefers tea", kind="preference",
                                 subject="alice", attribute="drink", actor="user",
                                 source="chat")
        ep = mem.episodes.append(ALICE, text=f"Ordered {SECRET} pastries for the offsite",
                                 event="order", actor="tool", source="shop")
        mem.episodes.append(ALICE, text="Booked the offsite room", event="booking",
                            actor="tool", source="calendar")
        mem.checkpoints.save(ALICE, "offsite", objective=f"Avoid {SECRET} at the offsite")
        mem.ledger.begin(ALICE, "order:1", intent=f"order {SECRET}-free catering")
        run = mem.run(ALICE).__enter__()
        run.scratch.write("note", f"remember {SECRET}")
        gone = [f1.record.id, f2.record.id, ep.id]

        def traces() -> dict[str, int]:
            out = {}
            with psycopg.connect(pg.admin_url) as conn:  # superuser: every tenant's rows
                for table in PG_TABLES:
                    out[table] = conn.execute(sql.SQL(
                        "SELECT count(*) FROM {} t WHERE lower(t::text) LIKE '%%quokkaberr%%'"
                    ).format(sql.Identifier(table))).fetchone()[0]
                for table, col in (("vectors", "record_id"), ("facts_fts", "id"),
                                   ("episodes_fts", "id"), ("facts", "supersedes"),
                                   ("facts", "superseded_by"), ("feedback", "ref")):
                    out[f"{table}.{col}"] = conn.execute(sql.SQL(
                        "SELECT count(*) FROM {} WHERE split_part({}, ':', 2) = ANY(%s) "
                        "OR {} = ANY(%s)").format(sql.Identifier(table), sql.Identifier(col),
                                                  sql.Identifier(col)),
                        (gone, gone)).fetchone()[0]
            return out

        before = traces()
        for table in ("facts", "facts_fts", "episodes", "episodes_fts", "checkpoints",
                      "operations", "scratch"):
            assert before[table] >= 1, table
        assert before["vectors.record_id"] == 3 and before["feedback.ref"] == 1
        report = mem.forget(ALICE, match=SECRET.lower())
        assert (report.counts["facts"], report.counts["episodes"], report.counts["checkpoints"],
                report.counts["operations"], report.counts["scratch"]) == (2, 1, 1, 1, 1)
        after = traces()
        assert after == dict.fromkeys(after, 0), after
        # dead tuples of the forgotten rows were pruned by compact (VACUUM as the app role)
        with psycopg.connect(pg.admin_url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
            for table in ("facts", "episodes", "facts_fts", "episodes_fts", "checkpoints",
                          "operations", "scratch"):
                pages = conn.execute("SELECT pg_relation_size(%s) / 8192", (table,)).fetchone()
                assert pages is not None
                for block in range(pages[0]):
                    items = conn.execute(
                        "SELECT t_data FROM heap_page_items(get_raw_page(%s, %s)) "
                        "WHERE t_data IS NOT NULL", (table, block)).fetchall()
                    assert not any(b"uokkaberr" in bytes(r[0]).lower() for r in items), table
        assert keep.record is not None
        assert [f.claim for f in mem.facts.current(ALICE)] == ["Prefers tea"]
        assert [h.excerpt for h in mem.episodes.search(ALICE, "offsite room")] == [
            "Booked the offsite room"]
        assert mem.doctor() == []


# ------------------------------------------------------------------ vectors


def _vector_corpus(mem: Memory) -> dict[str, str]:
    """Episodes in several scopes with near-identical texts; returns id -> label."""
    labels: dict[str, str] = {}
    base = "deploy of billing-api failed because the TLS certificate expired"
    for label, scope, extra in (
        ("alice", ALICE, {}),
        ("alice-project", Scope(project="docs-site"), {}),
        ("bob", Scope(user="bob", project="docs-site"), {}),
        ("other-tenant", Scope(tenant="globex", user="alice", project="docs-site"), {}),
        ("restricted", Scope(project="docs-site"), {"readers": ["carol"]}),
        ("expired", ALICE, {"expires_at": "2026-08-01T00:00:00+00:00"}),
    ):
        now = mem.clock.now()
        if "expires_at" in extra:  # written before it expired (a past expiry is refused)
            mem.clock.set("2026-07-31T00:00:00+00:00")  # type: ignore[attr-defined]
        ep = mem.episodes.append(scope, text=f"{base} ({label})", source="ci", actor="tool",
                                 observed_at="2026-07-30T00:00:00+00:00", **extra)
        mem.clock.set(now)  # type: ignore[attr-defined]
        labels[ep.id] = label
    for i in range(40):
        ep = mem.episodes.append(ALICE, text=f"unrelated note number {i} about lunch",
                                 source="chat", actor="user")
        labels[ep.id] = f"noise{i}"
    return labels


def test_vector_search_filters_in_sql_and_walks_hnsw(pg: AppDatabase, clock: ManualClock
                                                     ) -> None:
    emb = HashingEmbedder(256)
    with Memory.open(pg.app_url, embedder=emb, clock=clock) as mem:
        labels = _vector_corpus(mem)
        index = mem.index.vectors
        assert isinstance(index, PgVectorIndex)
        q = emb.embed_query("deploy failed TLS certificate expired")
        with mem.db.transaction("default", write=False) as tx:
            got = index.search(tx, ALICE, "alice", q, 5, now=clock.now())
            plan = index.explain(tx, ALICE, "alice", 5, now=clock.now())
            exact = index.explain(tx, ALICE, "alice", 5, now=clock.now(),
                                  exact=True)
            tx.raw_one("SELECT set_config('enable_seqscan', 'off', true)")
            forced = index.explain(tx, ALICE, "alice", 5, now=clock.now())
        assert [labels[i] for i, _ in got[:2]] == ["alice", "alice-project"]
        assert not {"bob", "other-tenant", "restricted", "expired"} & {labels[i] for i, _ in got}
        # scores are cosines with the stored vectors, best first
        with psycopg.connect(pg.admin_url) as conn:
            register_vector(conn)
            stored = dict(conn.execute("SELECT record_id, vec FROM vectors").fetchall())
        for rid, score in got:
            assert score == pytest.approx(float(stored[rid].to_numpy() @ q), abs=1e-5)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        assert "vectors_hnsw_256" in forced and "vectors_hnsw_256" not in exact
        assert "Limit" in plan
        # a selective filter still gets every row it allows (exact fallback)
        few = Scope(user="zed", project="solo")
        mem.episodes.append(few, text="zed deployed solo", source="ci", actor="tool")
        with mem.db.transaction("default", write=False) as tx:
            assert len(index.search(tx, few, "zed", emb.embed_query("deploy"), 5,
                                    now=clock.now())) == 1
        # and the hybrid gate keeps the same filter
        refs = mem.recall(ALICE, "deploy failed TLS certificate expired", k=10).refs
        assert {labels[r.split(":")[1]] for r in refs} <= {"alice", "alice-project"}


def test_another_embedder_is_refused_until_reindex(pg: AppDatabase, clock: ManualClock) -> None:
    with Memory.open(pg.app_url, embedder=HashingEmbedder(256), clock=clock) as mem:
        mem.episodes.append(ALICE, text="the CDN cache was purged", source="ops", actor="tool")
        mem.facts.propose(ALICE, claim="Prefers the CDN dashboard", kind="preference",
                          subject="alice", attribute="dashboard", actor="user", source="chat")
    with Memory.open(pg.app_url, embedder=HashingEmbedder(384), clock=clock) as mem:
        with pytest.raises(ConfigError, match="reindex"):
            mem.recall(ALICE, "CDN cache")
        assert mem.reindex() == 2
        assert mem.recall(ALICE, "CDN cache purged").items
        with psycopg.connect(pg.admin_url) as conn:
            dims = conn.execute("SELECT DISTINCT dims FROM vectors").fetchall()
        assert dims == [(384,)]


def test_hybrid_recall_agrees_with_sqlite(pg: AppDatabase, tmp_path: Any,
                                          clock: ManualClock) -> None:
    """The same corpus and queries give the same top answers on both backends."""
    corpus = [
        ("deploy_failed", "Deploy of billing-api v3.2 failed: an expired TLS certificate."),
        ("incident", "Incident on search-cluster: the disk filled up, 40 customers affected."),
        ("review", "Priya reviewed the payments pull request and asked for more tests."),
        ("decision", "Decided to move to weekly releases for the docs-site."),
        ("customer_request", "Customer asked for CSV export in the admin console."),
        ("meeting", "Planning meeting with Omar: prioritise single sign-on next sprint."),
        ("note", "Hiro mentioned that the notification-worker has no runbook yet."),
    ]
    queries = {"why did the billing deploy fail": "expired TLS certificate",
               "who reviewed the payments pull request": "Priya reviewed",
               "release cadence decision": "weekly",
               "CSV export request": "CSV export",
               "which service lacks a runbook": "no runbook"}
    top: dict[str, dict[str, str]] = {}
    for name, url in (("sqlite", f"sqlite:///{tmp_path / 'parity.db'}"), ("pg", pg.app_url)):
        with Memory.open(url, embedder=HashingEmbedder(256), clock=clock) as mem:
            for event, text in corpus:
                mem.episodes.append(ALICE, text=text, event=event, source="log", actor="tool",
                                    observed_at="2026-07-01T00:00:00+00:00")
            mem.facts.propose(ALICE, claim="Releases ship weekly on Tuesdays",
                              kind="decision", subject="releases", attribute="cadence",
                              actor="user", source="chat")
            top[name] = {q: (mem.recall(ALICE, q, k=3).items or [None])[0].excerpt  # type: ignore[union-attr]
                         for q in queries}
    for q, needle in queries.items():
        assert needle in top["pg"][q], (q, top["pg"][q])
    assert top["pg"] == top["sqlite"]


# ------------------------------------------------------------------ maintenance, processes


def test_sweep_and_doctor_visit_every_tenant(pg: AppDatabase, clock: ManualClock) -> None:
    with Memory.open(pg.app_url, embedder=None, clock=clock) as mem:
        for tenant in ("acme", "globex"):
            scope = Scope(tenant=tenant, user="u", project="p")
            mem.facts.propose(scope, claim="Office closed this week", kind="constraint",
                              subject="office", attribute="open", actor="user", source="chat",
                              expires_at=clock.now() + timedelta(days=7))
            mem.episodes.append(scope, text="temporary note", source="s", actor="user",
                                expires_at=clock.now() + timedelta(days=1))
            with mem.run(scope) as run:
                run.scratch.write("k", "v", ttl=timedelta(hours=1))
                clock.advance(days=8)
                assert mem.sweep() == {"scratch": 1, "facts": 1, "episodes": 1}
        assert mem.doctor() == []
        with app(pg, "globex") as c:
            c.execute("DELETE FROM facts_fts")
            c.commit()
        assert any("tenant globex" in p for p in mem.doctor())


def test_fresh_process_resumes_checkpoint_and_ledger(pg: AppDatabase) -> None:
    with Memory.open(pg.app_url, embedder=None) as mem, \
            mem.run(ALICE, task="release-v17") as run:
        run.checkpoint.save(objective="Ship", next_action="publish notes")
        assert not run.ledger.begin("publish:v17", intent="POST notes").resumed
    code = textwrap.dedent(f"""
        from memstrata import Memory, Scope
        mem = Memory.open({pg.app_url!r}, embedder=None)
        with mem.run(Scope(user="alice", project="docs-site"), task="release-v17") as run:
            cp = run.checkpoint.load()
            op = run.ledger.begin("publish:v17", intent="POST notes")
            print(cp.next_action, "|", op.status, op.intent, op.resumed, op.attempts)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "publish notes | unknown POST notes True 2"


def test_run_retries_a_body_after_a_real_deadlock(pg: AppDatabase) -> None:
    with Memory.open(pg.app_url, embedder=None) as mem:
        for key in ("a", "b"):
            mem.ledger.begin(ALICE, key, intent="x")
        db = mem.db
        assert isinstance(db, PostgresDatabase)
        both = threading.Barrier(2)
        calls: list[str] = []

        def body(first: str, second: str) -> Any:
            def run(tx: Any) -> None:
                calls.append(first)
                # no tenant lock here: raw statements lock rows in opposite orders
                tx.raw_one("UPDATE operations SET attempts = attempts + 1 WHERE key = %s "
                           "RETURNING key", (first,))
                if len(calls) <= 2:
                    both.wait(timeout=10)
                tx.raw_one("UPDATE operations SET attempts = attempts + 1 WHERE key = %s "
                           "RETURNING key", (second,))
            return run

        errors: list[BaseException] = []

        def worker(first: str, second: str) -> None:
            try:
                db.run("default", body(first, second))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=pair) for pair in (("a", "b"),
                                                                           ("b", "a"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == []
        assert len(calls) == 3  # one body was re-run after PostgreSQL chose it as victim
        ops = {o.key: o.attempts for o in mem.ledger.list(ALICE)}
        assert ops == {"a": 3, "b": 3}


def test_conflicts_from_the_schema_are_conflicts(pg: AppDatabase) -> None:
    with Memory.open(pg.app_url, embedder=None) as mem:
        db = mem.db
        assert isinstance(db, PostgresDatabase)
        mem.ledger.begin(ALICE, "k", intent="x")
        with pytest.raises(Conflict, match="refused by the schema"), \
                db.transaction("default") as tx:
            tx.execute("INSERT INTO operations SELECT * FROM operations")
        with pytest.raises(BackendError, match="PostgreSQL error"), \
                db.transaction("default") as tx:
            tx.execute("SELECT no_such_column FROM operations")
        assert mem.ledger.get(ALICE, "k") is not None


def test_nested_transactions_are_savepoints(pg: AppDatabase) -> None:
    with Memory.open(pg.app_url, embedder=None) as mem:
        db = mem.db
        assert isinstance(db, PostgresDatabase)
        insert = ("INSERT INTO runs (tenant, scope_key, run_id, started_at) "
                  "VALUES ('default', 'k', ?, now())")
        with db.transaction("default") as tx:
            tx.execute(insert, ("outer",))
            with pytest.raises(BackendError, match="missing"), \
                    db.transaction("default") as inner:
                inner.execute(insert, ("inner",))
                # a full-text entry for a row that does not exist fails when it is written
                db.index_text(inner, "episodes", "01ZZZZZZZZZZZZZZZZZZZZZZZZ", "default", "x")
                inner.one("SELECT 1 AS x")
            tx.execute(insert, ("after",))
        with db.transaction("default", write=False) as tx:
            runs = [r["run_id"] for r in tx.all("SELECT run_id FROM runs ORDER BY run_id")]
        assert runs == ["after", "outer"]


def test_vector_search_honours_dates(pg: AppDatabase, clock: ManualClock) -> None:
    from datetime import UTC, datetime

    with Memory.open(pg.app_url, embedder=HashingEmbedder(256), clock=clock) as mem:
        for day in range(1, 11):
            mem.episodes.append(ALICE, text=f"deploy report of day {day}", source="ci",
                                actor="tool", observed_at=f"2026-07-{day:02d}T12:00:00+00:00")
        index = mem.index.vectors
        assert index is not None
        with mem.db.transaction("default", write=False) as tx:
            got = index.search(tx, ALICE, "alice", HashingEmbedder(256).embed_query(
                               "deploy report"), 5,
                               now=clock.now(), since=datetime(2026, 7, 4, tzinfo=UTC),
                               until=datetime(2026, 7, 6, 23, tzinfo=UTC))
        days = sorted(int(mem.episodes.get(i).text.split()[-1]) for i, _ in got)
        assert days == [4, 5, 6]


def test_postgres_scheme_and_migrate_only(pg_database: AppDatabase) -> None:
    owner = pg_database.owner_url.replace("postgresql://", "postgres://", 1)
    PostgresDatabase.from_url(owner, migrate_only=True, app_role=pg_database.app_role)
    with Memory.open(pg_database.app_url.replace("postgresql://", "postgres://", 1),
                     embedder=None) as mem:
        assert mem.ledger.begin(ALICE, "k", intent="x").status == "pending"
        assert mem.doctor() == []


def test_any_insert_registers_its_tenant(pg: AppDatabase) -> None:
    with app(pg, "initech") as c:
        c.execute("INSERT INTO runs (tenant, scope_key, run_id, started_at) "
                  "VALUES ('initech', 'k', 'r', now())")
        c.commit()
    with Memory.open(pg.app_url, embedder=None) as mem:
        db = mem.db
        assert isinstance(db, PostgresDatabase)
        assert db.tenants() == ["initech"]
        mem.episodes.append(Scope(tenant="acme", user="u"), text="x", source="s", actor="user")
        assert db.tenants() == ["acme", "initech"]


def test_a_large_index_leaves_out_very_common_words(pg: AppDatabase,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from memstrata.store import pg_search

    with Memory.open(pg.app_url, embedder=None) as mem:
        mem.episodes.append_many([{"scope": ALICE, "text": f"deploy number {i} went fine",
                                   "source": "ci", "actor": "tool"} for i in range(30)])
        mem.episodes.append_many([{"scope": ALICE, "text": f"kubernetes deploy {i} failed",
                                   "source": "ci", "actor": "tool"} for i in range(3)])
        mem.episodes.append(Scope(tenant="other", user="u"), text="kubernetes", source="s",
                            actor="user")
        db = mem.db
        assert isinstance(db, PostgresDatabase)
        where, params = mem.episodes.filter_sql(ALICE, None)

        def found() -> int:
            with db.transaction("default", write=False) as tx:
                return len(db.text_search(tx, "episodes", "kubernetes deploy", where, params,
                                          100))

        assert found() == 33
        with app(pg, "default") as c:
            c.execute("ANALYZE episodes_fts")  # the app role holds MAINTAIN
            c.commit()
        # large for Alice (15 rows) and Carol (12): a caller's own rows decide
        monkeypatch.setattr(pg_search, "LARGE_INDEX_ROWS", 10)
        monkeypatch.setattr(pg_search, "COMMON_TERM_DOCS", 10)
        # "deploy" is in 33 rows: left out; "kubernetes" is in 3 of them and in the following
        # context of the two turns before them
        assert found() == 5


def test_full_text_indexes_keep_a_short_pending_list_that_compaction_merges(
        pg: AppDatabase) -> None:
    """Every GIN search reads the index's whole pending list: m010 keeps it short, and the
    VACUUM of compaction (as the application role) merges what is in it."""
    from memstrata.store.pg_schema import GIN_PENDING_LIST_KB

    def clean(index: str) -> int:  # merges the pending list; returns the pages it held
        with psycopg.connect(pg.admin_url, autocommit=True) as conn:
            row = conn.execute("SELECT gin_clean_pending_list(%s::regclass)", (index,))
            return int(row.fetchone()[0])  # type: ignore[index]

    with psycopg.connect(pg.admin_url) as conn:
        options: dict[str, Any] = dict(conn.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relname LIKE '%_fts_tsv'"))
    limit = [f"gin_pending_list_limit={GIN_PENDING_LIST_KB}"]
    assert options == {"episodes_fts_tsv": limit, "facts_fts_tsv": limit}
    with Memory.open(pg.app_url, embedder=None) as mem:
        rows = [{"scope": ALICE, "text": f"deploy {i} of billing-api went fine: ticket zq{i}",
                 "source": f"ci:{i}", "actor": "tool"} for i in range(200)]
        mem.episodes.append_many(rows)
        assert clean("episodes_fts_tsv") > 0  # new entries wait in the pending list
        mem.episodes.append_many([{**r, "source": f"cd:{i}"} for i, r in enumerate(rows)])
        mem.db.compact()
        assert clean("episodes_fts_tsv") == 0
        # merged, every entry is still found
        assert all(len(mem.episodes.search(ALICE, f"zq{i}", k=5)) == 2 for i in (0, 123, 199))


def test_the_match_rows_a_word_count_reads_are_the_transactions_tenants(
        pg: AppDatabase) -> None:
    """m011 plans the match rows' query per call (dynamic SQL as the definer): it still
    returns only the current tenant's rows, at most ``cap`` of them (NULL: all), and no
    sequential-scan setting forces a bitmap of every match."""
    with Memory.open(pg.app_url, embedder=None) as mem:
        for tenant, n in (("acme", 7), ("globex", 5)):
            mem.episodes.append_many([{"scope": Scope(tenant=tenant, user="alice"),
                                       "text": f"deploy {i} of billing-api went fine",
                                       "source": f"ci:{i}", "actor": "tool"}
                                      for i in range(n)])

    def matches(tenant: str | None, cap: int | None) -> list[tuple[str, str]]:
        with app(pg, tenant) as c:
            return [tuple(r) for r in c.execute(
                "SELECT tenant, s_user FROM memstrata_episode_match_rows("
                "plainto_tsquery('english', 'deploy'), %s)", (cap,))]

    assert matches("acme", None) == [("acme", "alice")] * 7
    assert matches("globex", None) == [("globex", "alice")] * 5
    assert len(matches("acme", 3)) == 3
    assert matches("initech", None) == [] and matches(None, None) == []
    with psycopg.connect(pg.admin_url) as conn:
        row = conn.execute("SELECT l.lanname, p.proconfig FROM pg_proc p JOIN pg_language l "
                           "ON l.oid = p.prolang WHERE p.proname = "
                           "'memstrata_episode_match_rows'").fetchone()
    assert row is not None and row[0] == "plpgsql"
    assert not any("seqscan" in c for c in row[1] or [])


def test_the_callers_own_rows_decide_which_words_are_common(
        pg: AppDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scoped count first reads the tenant's first matches; when the caller's rows are
    a minority of them it counts them all, so the rows of another user never decide which
    words this caller's query keeps."""
    from memstrata.store import pg_search

    carol = Scope(user="carol", project="docs-site")
    with Memory.open(pg.app_url, embedder=None) as mem:
        mem.episodes.append_many([{"scope": Scope(user="bob", project="docs-site"),
                                   "text": f"deploy number {i} went fine", "source": f"ci:{i}",
                                   "actor": "tool"} for i in range(60)])
        mem.episodes.append_many([{"scope": ALICE, "text": f"deploy {i} went fine",
                                   "source": f"ci:a{i}", "actor": "tool"} for i in range(12)])
        for who, n in ((ALICE, 3), (carol, 4)):
            mem.episodes.append_many([{"scope": who, "text": f"kubernetes deploy {i} failed",
                                       "source": f"k8s:{i}", "actor": "tool"}
                                      for i in range(n)])
        mem.episodes.append_many([{"scope": carol, "text": f"carol's note {i}",
                                   "source": f"n:{i}", "actor": "tool"} for i in range(8)])
        db = mem.db
        assert isinstance(db, PostgresDatabase)
        with app(pg, "default") as c:
            c.execute("ANALYZE episodes_fts")
            c.commit()
        # large for Alice (15 rows) and Carol (12): a caller's own rows decide
        monkeypatch.setattr(pg_search, "LARGE_INDEX_ROWS", 10)
        monkeypatch.setattr(pg_search, "COMMON_TERM_DOCS", 10)

        def found(scope: Scope, query: str) -> int:
            where, params = mem.episodes.filter_sql(scope, None)
            with db.transaction("default", write=False) as tx:
                return len(db.text_search(tx, "episodes", query, where, params, 100))

        # "deploy" is in 79 of the tenant's rows, 15 of Alice's (after Bob's 60, past the
        # first matches the count reads): common for her, so only "kubernetes" is scored
        assert found(ALICE, "kubernetes deploy") == found(ALICE, "kubernetes") == 3
        assert found(ALICE, "deploy") == 15  # every word common: the query keeps them all
        # 4 of Carol's rows: "deploy" stays in her query (the 60 of Bob's rows do not count)
        assert found(carol, "deploy number") == 4
        assert found(carol, "deploy") == 4


def test_another_tenants_rows_never_make_a_callers_index_large(pg: AppDatabase,
                                                              clock: ManualClock) -> None:
    """Whether a query drops its common words is the caller's own rows' call: al's 1,500
    rows (a word in 1,100 of them) keep every word after another tenant's 1,000 rows and
    ANALYZE, with the same scores (the planner's estimate of the whole table decided, and
    al's hits went from 30 to 20)."""
    al, zed = Scope(user="al"), Scope(tenant="acme", user="zed")
    filler = [f"w{n}" for n in range(40)]

    def text(i: int) -> str:
        return " ".join(filler[(i * 7 + j) % 40] for j in range(3 + i % 9))

    with Memory.open(pg.app_url, embedder=None, clock=clock) as mem:
        mem.episodes.append_many([
            {"scope": al, "text": ("alpha " if i < 1100 else "") + ("kiwi " if i % 75 == 0
                                                                     else "") + text(i),
             "actor": "user", "source": f"c:{i}"} for i in range(1500)])
        with psycopg.connect(pg.owner_url, autocommit=True) as c:
            c.execute("ANALYZE episodes_fts")

        def shown() -> list[tuple[str, float]]:
            return [(h.ref, round(h.score, 9)) for h in mem.episodes.search(al, "alpha kiwi",
                                                                            k=30)]
        before = shown()
        assert len(before) == 30
        mem.episodes.append_many([{"scope": zed, "text": text(i), "actor": "user",
                                   "source": f"z:{i}"} for i in range(1000)])
        with psycopg.connect(pg.owner_url, autocommit=True) as c:
            c.execute("ANALYZE episodes_fts")
        assert shown() == before


def test_m012_gives_rows_indexed_before_it_the_words_of_their_paths(pg: AppDatabase) -> None:
    """Rows indexed while the parser kept a path whole (one lexeme no query word matched)
    find its words after m012, at the weight they had: the record's own (A) or its thread
    context's (B)."""
    from memstrata.store.pg_schema import m012_fulltext_words_of_paths

    with Memory.open(pg.app_url, embedder=None) as mem:
        ep = mem.episodes.append(ALICE, text="The bug is in src/handlers/payment.py",
                                 actor="user", source="chat:1")
        res = mem.facts.propose(ALICE, claim="Runtime settings live in config/app.yaml",
                                kind="system_fact", subject="config", attribute="file",
                                actor="user", source="chat")
        fact = res.record
        assert fact is not None
        with psycopg.connect(pg.admin_url) as conn:  # indexed as before m012
            conn.execute("UPDATE episodes_fts SET tsv = setweight(to_tsvector('english', %s), "
                         "'A') || setweight(to_tsvector('english', %s), 'B') WHERE id = %s",
                         ("The bug is in src/handlers/payment.py",
                          "user: see https://wiki.example.org/postmortems", ep.id))
            conn.execute("UPDATE facts_fts SET tsv = to_tsvector('english', %s) WHERE id = %s",
                         ("Runtime settings live in config/app.yaml", fact.id))
        assert mem.episodes.search(ALICE, "handlers", k=3) == []
        assert mem.recall(ALICE, "app.yaml", layers=["facts"]).items == []

        with psycopg.connect(pg.admin_url) as conn:
            m012_fulltext_words_of_paths(conn, None)
            tsv = conn.execute("SELECT tsv::text FROM episodes_fts WHERE id = %s",
                               (ep.id,)).fetchone()[0]  # type: ignore[index]
        assert [h.ref for h in mem.episodes.search(ALICE, "handlers payment", k=3)] == [ep.ref]
        assert mem.recall(ALICE, "app.yaml", layers=["facts"]).refs == [fact.ref]
        assert "'handler':" in tsv and "'postmortem':" in tsv
        assert tsv.split("'handler':")[1].split()[0].endswith("A")
        assert tsv.split("'postmortem':")[1].split()[0].endswith("B")
