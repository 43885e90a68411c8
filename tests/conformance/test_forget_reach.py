"""Forget reaches everything derived from the text: the thread neighbours that carried a
forgotten episode as context, and every version of a forgotten fact (every backend)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from backends import StoreProbe, lexical_matches, open_store
from memstrata import ManualClock, Memory, Scope
from memstrata.layers.episodes import Episodes
from memstrata.providers.embeddings import HashingEmbedder

ALICE = Scope(user="alice", project="docs-site")


@pytest.fixture
def hmem(store_url: str, scratch_url: str | None, clock: ManualClock) -> Iterator[Memory]:
    m = open_store(store_url, scratch_url, clock, HashingEmbedder(256))
    yield m
    m.close()


def thread(mem: Memory, clock: ManualClock) -> list[str]:
    ids = []
    for text in ("I booked the Quokkafest venue for the offsite", "Great, who is catering?",
                 "Priya's team handles the food", "Confirmed the date with the team"):
        clock.advance(minutes=1)
        ids.append(mem.episodes.append(ALICE, text=text, actor="user",
                                       source="chat:planning").id)
    return ids


def test_neighbours_lose_a_forgotten_episode_from_their_index(hmem: Memory, clock: ManualClock,
                                                             store: StoreProbe) -> None:
    ids = thread(hmem, clock)
    # the reply after the forgotten turn is indexed with its thread context ...
    assert f"episode:{ids[1]}" in lexical_matches(hmem, ALICE, "quokkafest")
    report = hmem.forget(ALICE, match="quokkafest")
    assert report.counts["episodes"] == 1
    # ... and no longer: its context was rebuilt from what remains
    assert lexical_matches(hmem, ALICE, "quokkafest") == set()
    assert hmem.episodes.search(ALICE, "quokkafest") == []
    assert all("quokkafest" not in h.excerpt.lower()
               for h in hmem.recall(ALICE, "quokkafest venue").items)
    assert not store.contains("quokkafest")
    # the neighbours' vectors were rebuilt too: the reply is now embedded on its own
    index, emb = hmem.index.vectors, HashingEmbedder(256)
    assert index is not None
    reply = hmem.episodes.get(ids[1])
    with hmem.db.transaction(ALICE.tenant, write=False) as tx:
        [(_, cos)] = [(i, s) for i, s in index.search(
            tx, ALICE, "alice", emb.embed_query(Episodes.line(reply)), 10, now=clock.now())
            if i == ids[1]]
    assert cos == pytest.approx(1.0, abs=1e-5)
    # the rest of the thread is intact, its context too (two turns back)
    assert lexical_matches(hmem, ALICE, "catering") == {f"episode:{i}" for i in ids[1:]}
    assert hmem.doctor() == []


def test_forgetting_a_fact_by_id_takes_its_history(mem: Memory, store: StoreProbe,
                                                   clock: ManualClock) -> None:
    kw = dict(kind="profile", subject="alice", attribute="allergy", actor="user",
              source="chat")
    first = mem.facts.propose(ALICE, claim="Allergic to Quokkaberries", **kw)
    clock.advance(days=1)
    second = mem.facts.propose(ALICE, claim="Allergic to Quokkaberries and walnuts", **kw)
    other = mem.facts.propose(ALICE, claim="Prefers tea", kind="preference",
                              subject="alice", attribute="drink", actor="user", source="chat")
    assert second.status == "superseding" and second.record is not None
    report = mem.forget(ALICE, record_ids=[second.record.ref])
    assert report.counts["facts"] == 2
    assert first.record is not None and f"fact:{first.record.id}" in report.ids
    assert [f.claim for f in mem.facts.list(ALICE)] == ["Prefers tea"]
    assert other.record is not None
    assert not store.contains("quokkaberr")
    assert mem.doctor() == []


def test_a_fault_in_the_scratch_step_leaves_all_or_reports(mem: Memory, store: StoreProbe,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from memstrata import BackendError

    ep = mem.episodes.append(ALICE, text="the Quokkafest invoice", actor="tool", source="erp")
    run = mem.run(ALICE)
    run.__enter__()
    run.scratch.write("note", "pay the Quokkafest invoice")

    def broken(*args: object, **kwargs: object) -> int:
        raise BackendError("scratch store down")

    monkeypatch.setattr(mem.scratch_store, "forget", broken)
    if mem.scratch_store.transactional:
        # the scratch table is the database's: one transaction, so nothing was deleted
        with pytest.raises(BackendError):
            mem.forget(ALICE, match="quokkafest")
        assert mem.episodes.get(ep.id).text == "the Quokkafest invoice"
        assert run.scratch.read("note").found
    else:
        # another store: the records are gone and the report says what failed
        report = mem.forget(ALICE, match="quokkafest")
        assert report.counts["episodes"] == 1 and report.counts["scratch"] == 0
        assert any("scratch store failed" in n for n in report.notes)


def test_a_failed_compaction_is_reported_not_raised(mem: Memory, store: StoreProbe,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from memstrata import BackendError

    mem.episodes.append(ALICE, text="the Quokkafest invoice", actor="tool", source="erp")

    def broken() -> None:
        raise BackendError("disk full")

    monkeypatch.setattr(mem.db, "compact", broken)
    report = mem.forget(ALICE, match="quokkafest")
    assert report.counts["episodes"] == 1 and not report.compacted
    assert any("compaction failed" in n for n in report.notes)
    assert mem.episodes.search(ALICE, "quokkafest") == []
    monkeypatch.undo()
    # the next compaction rewrites the files: the first forgotten text is gone from them too
    mem.episodes.append(ALICE, text="the Wombatfest invoice", actor="tool", source="erp")
    assert mem.forget(ALICE, match="wombatfest").compacted
    assert not store.contains("quokkafest")
