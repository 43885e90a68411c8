"""Invariants the schema enforces itself, on every backend: written around the library,
through the engine's own transactions, and refused by the database."""

from __future__ import annotations

from typing import Any

import pytest

from backends import StoreProbe
from memstrata import ConfigError, Conflict, ManualClock, Memory, Scope, ValidationError


def test_episodes_are_append_only(mem: Memory, alice: Scope) -> None:
    ep = mem.episodes.append(alice, text="Deployed v1", source="ci", actor="tool")
    for statement in ("UPDATE episodes SET text = 'tampered' WHERE tenant = ? AND id = ?",
                      "DELETE FROM episodes WHERE tenant = ? AND id = ?"):
        with pytest.raises(Conflict, match="append-only"), \
                mem.db.transaction(alice.tenant) as tx:
            tx.execute(statement, (alice.tenant, ep.id))
    assert mem.episodes.get(ep.id).text == "Deployed v1"


def test_one_active_fact_per_slot_and_frozen_content(mem: Memory, alice: Scope) -> None:
    res = mem.facts.propose(alice, claim="Uses tabs", kind="preference", subject="alice",
                            attribute="indent", actor="user", source="chat")
    assert res.record is not None
    with mem.db.transaction(alice.tenant, write=False) as tx:
        row = tx.one("SELECT * FROM facts WHERE tenant = ? AND id = ?",
                     (alice.tenant, res.record.id))
    assert row is not None
    copy = {**row, "id": "01ZZZZZZZZZZZZZZZZZZZZZZZZ", "claim": "Uses spaces"}
    with pytest.raises(Conflict), mem.db.transaction(alice.tenant) as tx:
        tx.execute(f"INSERT INTO facts ({', '.join(copy)}) VALUES "
                   f"({', '.join('?' * len(copy))})", list(copy.values()))
    with pytest.raises(Conflict, match="immutable"), mem.db.transaction(alice.tenant) as tx:
        tx.execute("UPDATE facts SET claim = 'rewritten' WHERE tenant = ? AND id = ?",
                   (alice.tenant, res.record.id))
    with pytest.raises(Conflict, match="never deleted"), mem.db.transaction(alice.tenant) as tx:
        tx.execute("DELETE FROM facts WHERE tenant = ?", (alice.tenant,))
    assert [f.claim for f in mem.facts.current(alice)] == ["Uses tabs"]


def test_checkpoint_versions_are_immutable(mem: Memory, alice: Scope) -> None:
    mem.checkpoints.save(alice, "t", objective="first")
    with pytest.raises(Conflict, match="immutable"), mem.db.transaction(alice.tenant) as tx:
        tx.execute("UPDATE checkpoints SET data = '{}' WHERE tenant = ?", (alice.tenant,))
    with pytest.raises(Conflict, match="history is kept"), \
            mem.db.transaction(alice.tenant) as tx:
        tx.execute("DELETE FROM checkpoints WHERE tenant = ?", (alice.tenant,))
    cp = mem.checkpoints.current(alice, "t")
    assert cp is not None and cp.objective == "first"


def test_operation_keys_unique_per_scope(mem: Memory, alice: Scope, store: StoreProbe) -> None:
    mem.ledger.begin(alice, "publish:v1", intent="publish")
    mem.ledger.begin(Scope(user="bob"), "publish:v1", intent="publish")
    assert store.counts()["operations"] == 2
    with mem.db.transaction(alice.tenant, write=False) as tx:
        row = tx.one("SELECT tenant, s_user, s_project, s_agent, scope_key, key, intent, status, "
                     "created_at, updated_at FROM operations WHERE s_user = 'alice'")
    assert row is not None
    with pytest.raises(Conflict), mem.db.transaction(alice.tenant) as tx:
        tx.execute("INSERT INTO operations (tenant, s_user, s_project, s_agent, scope_key, key, "
                   "intent, status, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                   list(row.values()))


def test_a_failed_batch_leaves_no_rows_and_no_index_rows(mem: Memory, alice: Scope,
                                                         store: StoreProbe) -> None:
    mem.episodes.append(alice, text="Search index stays in step", source="s", actor="user")
    before = store.counts()
    with pytest.raises(ValidationError):
        mem.episodes.append_many([
            {"scope": alice, "text": "first of batch", "source": "s", "actor": "user"},
            {"scope": alice, "text": "second", "source": "s", "actor": "user",
             "supersedes": "01ZZZZZZZZZZZZZZZZZZZZZZZZ"},
        ])
    assert store.counts() == before
    assert not store.contains("first of batch")
    assert mem.doctor() == []


def test_doctor_finds_a_broken_index(mem: Memory, alice: Scope) -> None:
    mem.episodes.append(alice, text="will lose its index row", source="s", actor="user")
    assert mem.doctor() == []
    with mem.db.transaction(alice.tenant) as tx:
        tx.execute("DELETE FROM episodes_fts")
    problems = mem.doctor()
    assert any("missing from episodes_fts" in p for p in problems)


def test_a_process_refuses_vectors_once_another_re_embedded_the_store(
        store_url: str, scratch_url: str | None, clock: ManualClock, alice: Scope) -> None:
    """One vector space per store: a process that began with one model and finds the store
    re-embedded with another (by another process) refuses to search or write vectors,
    rather than mixing them or answering from nothing."""
    from backends import open_store
    from memstrata.providers.embeddings import HashingEmbedder

    old = open_store(store_url, scratch_url, clock, HashingEmbedder(dims=64))
    old.episodes.append(alice, text="the nightly backup finished", source="ci", actor="tool")
    assert old.recall(alice, "nightly backup", layers=["episodes"]).items
    new = open_store(store_url, scratch_url, clock, HashingEmbedder(dims=32))
    assert new.reindex() == 1
    new.close()
    with pytest.raises(ConfigError, match="reindex"):
        old.recall(alice, "nightly backup", layers=["episodes"])
    with pytest.raises(ConfigError, match="reindex"):
        old.episodes.append(alice, text="the nightly backup failed", source="ci", actor="tool")
    old.close()
    again = open_store(store_url, scratch_url, clock, HashingEmbedder(dims=32))
    assert again.doctor() == [] and len(again.episodes.log(alice)) == 1
    again.close()


def test_records_written_without_an_embedder_are_reported_and_mended(
        store_url: str, scratch_url: str | None, clock: ManualClock, alice: Scope,
        minilm: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A store with vectors, opened without an embedder: a record written then gets no
    vector, which the write says once; doctor counts it per table; reindex(missing=True)
    embeds exactly those records, keeps the others' vectors, and semantic search finds it."""
    from backends import open_store
    from memstrata import notices

    embedded = open_store(store_url, scratch_url, clock, minilm)
    embedded.episodes.append(alice, text="the deploy failed because of a stale cache",
                             source="ci:1", actor="tool")
    embedded.checkpoints.save(alice, "release", objective="ship the notes")
    assert embedded.doctor() == []
    embedded.close()
    notices._SAID.discard("unembedded")
    plain = open_store(store_url, scratch_url, clock)
    with caplog.at_level("WARNING", logger="memstrata"):
        plain.episodes.append(alice, text="Alice adopted a golden retriever puppy named "
                              "Biscuit", source="chat:2", actor="user")
        plain.facts.propose(alice, claim="Alice's dog is called Biscuit", kind="profile",
                            subject="alice", attribute="dog_name", actor="user",
                            source="chat:2")
        plain.episodes.append(alice, text="Biscuit chewed a shoe", source="chat:3",
                              actor="user")
    said = [r for r in caplog.records if "opened without an embedder" in r.getMessage()]
    assert len(said) == 1 and "reindex --missing" in said[0].getMessage()
    problems = plain.doctor()
    assert len(problems) == 1 and "1 facts, 2 episodes" in problems[0], problems
    plain.close()
    mended = open_store(store_url, scratch_url, clock, minilm)
    query = "what pet does she have? a dog"
    assert not any("Biscuit" in h.excerpt
                   for h in mended.recall(alice, query, layers=["episodes"], k=5).items)
    assert mended.reindex(missing=True) == 3
    assert mended.doctor() == []
    assert mended.reindex(missing=True) == 0  # nothing left; the others were kept
    hits = mended.recall(alice, query, layers=["episodes"], k=5).items
    assert hits and "golden retriever" in hits[0].excerpt
    mended.close()


def test_an_edited_approval_or_a_checkpoint_without_an_embedder_is_counted_and_mended(
        store_url: str, scratch_url: str | None, clock: ManualClock, alice: Scope,
        minilm: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A claim edited on approval without an embedder loses the old claim's vector (it
    would answer for words that are gone); a checkpoint version saved without one says so
    once; doctor counts both and reindex(missing=True) remakes them from the new text."""
    from backends import open_store
    from memstrata import notices

    embedded = open_store(store_url, scratch_url, clock, minilm)
    held = embedded.facts.propose(alice, claim="Alice prefers green tea in the morning",
                                  kind="preference", subject="alice", attribute="drink",
                                  actor="agent", source="chat:1")
    assert held.status == "pending" and held.record is not None
    embedded.close()
    notices._SAID.discard("unembedded")
    plain = open_store(store_url, scratch_url, clock)
    with caplog.at_level("WARNING", logger="memstrata"):
        plain.checkpoints.save(alice, "rota", objective="plan the night rota")
    assert sum("opened without an embedder" in r.getMessage() for r in caplog.records) == 1
    edited = "Alice works night shifts at the city hospital"
    assert plain.review.approve(held.record.id, by="rev", claim=edited).status == "committed"
    problems = plain.doctor()
    assert len(problems) == 1 and "1 facts, 1 checkpoints" in problems[0], problems
    plain.close()
    mended = open_store(store_url, scratch_url, clock, minilm)
    assert mended.reindex(missing=True) == 2 and mended.doctor() == []
    hits = mended.recall(alice, "where does she work at night", layers=["facts"], k=3).items
    assert hits and hits[0].excerpt == edited
    mended.close()


class _Hooked:
    """A layer for a reindex that runs ``then`` once its records are listed (another
    process writing at that moment), else the layer itself."""

    def __init__(self, layer: Any, then: Any) -> None:
        self._layer, self._then = layer, then
        self.table = layer.table

    def embed_items(self, tx: Any, tenant: str) -> list[tuple[str, str]]:
        items = list(self._layer.embed_items(tx, tenant))
        self._then()
        return items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._layer, name)


def test_a_record_written_while_a_reindex_runs_keeps_its_vector(
        store_url: str, scratch_url: str | None, clock: ManualClock, alice: Scope,
        store: StoreProbe) -> None:
    """An episode another process appends (with the embedder) right after the reindex read
    its list of records keeps a vector: the reindex clears a tenant before it lists it, so
    it never deletes a vector it will not remake; doctor stays clean and says nothing of
    an embedder when records lack vectors."""
    from backends import open_store
    from memstrata.layers.indexing import reindex
    from memstrata.providers.embeddings import HashingEmbedder

    mem = open_store(store_url, scratch_url, clock, HashingEmbedder(dims=64))
    writer = open_store(store_url, scratch_url, clock, HashingEmbedder(dims=64))
    for i in range(3):
        mem.episodes.append(alice, text=f"routine deploy log line {i}", source=f"ci:{i}",
                            actor="tool")

    def append() -> None:
        writer.episodes.append(alice, text="the walrus release shipped late", source="ci:w",
                               actor="tool")

    episodes = _Hooked(mem.episodes, append)
    assert reindex(mem.index, [mem.facts, episodes, mem.checkpoints]) >= 3
    assert store.counts()["episodes"] == 4
    assert mem.doctor() == []
    hits = mem.recall(alice, "walrus release", layers=["episodes"]).items
    assert hits and "walrus" in hits[0].excerpt
    # a record without a vector is reported with what mends it, not a guessed cause
    with mem.db.transaction(alice.tenant) as tx:
        mem.db.delete_vectors(tx, alice.tenant, [hits[0].ref.partition(":")[2]])
    problems = mem.doctor()
    assert len(problems) == 1 and "1 episodes" in problems[0], problems
    assert "reindex --missing" in problems[0] and "embedder" not in problems[0]
    assert mem.reindex(missing=True) == 1 and mem.doctor() == []
    writer.close()
    mem.close()


def test_a_record_forgotten_while_a_reindex_runs_gets_no_vector(
        store_url: str, scratch_url: str | None, clock: ManualClock, alice: Scope,
        store: StoreProbe) -> None:
    """An episode forgotten by another process after the reindex listed it, before its batch
    is written, gets no vector back (a vector of forgotten text, belonging to no record)."""
    from backends import open_store
    from memstrata.layers.indexing import reindex
    from memstrata.providers.embeddings import HashingEmbedder

    mem = open_store(store_url, scratch_url, clock, HashingEmbedder(dims=64))
    other = open_store(store_url, scratch_url, clock, HashingEmbedder(dims=64))
    mem.episodes.append(alice, text="the backup finished", source="s:1", actor="tool")
    mem.episodes.append(alice, text="my zebragarnet pin hint", source="s:2", actor="user")
    forgotten: list[int] = []

    def forget_the_second(done: int, total: int) -> None:
        if done == 1 and not forgotten:  # the first batch is written, the second is not
            forgotten.append(other.forget(alice, match="zebragarnet").counts["episodes"])

    embedded = reindex(mem.index, [mem.facts, mem.episodes, mem.checkpoints], batch=1,
                       progress=forget_the_second)
    assert forgotten == [1]
    assert store.counts()["vectors"] == 1 and not store.contains("zebragarnet")
    assert mem.doctor() == []
    assert embedded == 1  # the forgotten one is not counted
    other.close()
    mem.close()


class _EmbedThen:
    """An embedder that runs ``then`` once, right after it embeds a batch holding ``text``:
    between a reindex's listing and its batch's write, outside any transaction."""

    def __init__(self, base: Any, text: str, then: Any) -> None:
        self._base, self._text, self._then = base, text, then
        self.model_name, self.dims = base.model_name, base.dims
        self.knows_meaning = getattr(base, "knows_meaning", True)

    def embed(self, texts: list[str]) -> Any:
        out = self._base.embed(texts)
        if self._then is not None and self._text in texts:
            then, self._then = self._then, None
            then()
        return out

    def embed_query(self, text: str) -> Any:
        return self._base.embed_query(text)


@pytest.mark.parametrize("missing", [False, True], ids=["full", "missing"])
@pytest.mark.parametrize("reviewer_embeds", [True, False], ids=["embedder", "no-embedder"])
def test_a_claim_edited_while_a_reindex_runs_keeps_the_vector_of_its_new_text(
        store_url: str, scratch_url: str | None, clock: ManualClock, alice: Scope,
        missing: bool, reviewer_embeds: bool) -> None:
    """A reviewer's edit-and-approve (another process, with or without the embedder)
    rewrites a claim in place after the reindex listed and embedded it with its old claim,
    before the batch is written: the fact ends with the vector of the claim it has, never
    the old one's. With ``missing`` the fact had no vector (written without the embedder)."""
    from backends import open_store
    from memstrata.providers.embeddings import HashingEmbedder

    old, new = "The team deploys every Friday afternoon", "Alice's cat is called Biscuit"
    base = HashingEmbedder(dims=64)
    writer = open_store(store_url, scratch_url, clock, None if missing else base)
    fact = writer.facts.propose(alice, claim=old, kind="preference", subject="team",
                                attribute="deploy_day", actor="agent", source="chat:1").record
    assert fact is not None and fact.status == "pending_review"
    writer.close()
    reviewer = open_store(store_url, scratch_url, clock,
                          HashingEmbedder(dims=64) if reviewer_embeds else None)

    def edit() -> None:
        reviewer.review.approve(fact.id, by="rita", claim=new, scope=alice)

    mem = open_store(store_url, scratch_url, clock, _EmbedThen(base, old, edit))
    embedded = mem.reindex(missing=missing)
    assert mem.facts.get(fact.id, alice).claim == new
    vectors = mem.index.vectors
    assert vectors is not None
    with mem.db.transaction(alice.tenant, write=False) as tx:
        to_new, to_old = (dict(vectors.record_scores(tx, alice.tenant, "facts", [fact.id],
                                                     base.embed_query(text)))[fact.id]
                          for text in (new, old))
    assert to_new > 0.99 and to_old < 0.5, (to_new, to_old)
    assert embedded == 1  # embedded again from the new claim, once
    assert mem.doctor() == []
    reviewer.close()
    mem.close()


def test_reimporting_an_episode_restricted_to_other_readers_stores_it_once(
        mem: Memory, alice: Scope, tmp_path: Any, store: StoreProbe) -> None:
    """An episodic.md line restricted to bob, imported into alice's scope again and again,
    is stored once: the import's check of what exists sees every episode of exactly the
    scope, whoever may read it, and its report only counts it (no text)."""
    from memstrata.interfaces.memory_files import import_markdown

    files = tmp_path / "files"
    files.mkdir()
    (files / "episodic.md").write_text(
        "# Episodic log\n\n- 2026-08-02 (ci:run/2): Rotated the zebracert certificate "
        "{readers: bob}\n- 2026-08-02 (ci:run/2): Opened the ticket\n", "utf-8")
    first = import_markdown(mem, alice, files)
    assert first.counts.get("episodes") == 2
    for _ in range(2):
        again = import_markdown(mem, alice, files)
        assert again.counts.get("episodes_existing") == 2 and "episodes" not in again.counts
        assert "zebracert" not in repr(again)
    assert store.counts()["episodes"] == 2
    assert [e.text for e in mem.episodes.log(alice, principal="bob")] == [
        "Rotated the zebracert certificate", "Opened the ticket"]
    assert [e.text for e in mem.episodes.log(alice)] == ["Opened the ticket"]
