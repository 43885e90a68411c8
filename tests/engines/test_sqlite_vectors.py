"""The SQLite vector index: a model change is refused until reindex; the two-stage search
of a large block agrees with the exact one; the memory-mapped files beside the store are
opened by a new process instead of loaded, lose a forgotten vector at once, and are rebuilt
when they do not match the store. (PostgreSQL's HNSW counterparts are in
``test_postgres.py``.)"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memstrata import ConfigError, ManualClock, Memory, Scope
from memstrata.providers.embeddings import HashingEmbedder

ALICE = Scope(user="alice", project="docs-site")


def test_model_change_is_detected_and_reindex_fixes_it(tmp_path: Path, minilm: Any) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    first = Memory.open(url, embedder=minilm)
    first.episodes.append(ALICE, text="Kickoff meeting moved to Thursday", actor="user",
                          source="cal")
    first.close()
    other = Memory.open(url, embedder=HashingEmbedder(dims=64))
    with pytest.raises(ConfigError, match="reindex"):
        other.recall(ALICE, "kickoff meeting")
    assert other.reindex() == 1
    assert other.recall(ALICE, "kickoff meeting").items
    other.close()


def test_two_stage_search_agrees_with_exact_search(tmp_path: Path, clock: ManualClock,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from memstrata.bench.synthetic import QUERIES, episodes
    from memstrata.store import sqlite_vectors as vmod
    from memstrata.store import vector_segment as segment

    mem = Memory.open(f"sqlite:///{tmp_path / 'p.db'}", clock=clock,
                      embedder=HashingEmbedder(dims=256))
    mem.episodes.append_many([{"scope": ALICE, "text": e.text, "event": e.event,
                               "actor": "tool", "source": e.source,
                               "observed_at": e.observed_at} for e in episodes(3000, seed=5)])
    index = mem.index.vectors
    assert isinstance(index, vmod.SQLiteVectorIndex)

    def top(query: str) -> list[str]:
        qvec = mem.index.embed_query(query)
        assert qvec is not None
        with mem.db.transaction("default", write=False) as tx:
            return [i for i, _ in index.search(tx, ALICE, "alice", qvec, 10, now=clock.now())]

    exact = {q: top(q) for q in QUERIES}
    monkeypatch.setattr(segment, "PROJECT_ABOVE", 1000)
    monkeypatch.setattr(vmod, "RERANK", 200)
    index.invalidate()  # reopened from its files, which are projected on the next search
    approx = {q: top(q) for q in QUERIES}
    block = next(iter(index._segments.values()))
    assert block.proj is not None  # the two-stage path really ran
    overlap = sum(len(set(exact[q]) & set(approx[q])) for q in QUERIES) / (10 * len(QUERIES))
    assert overlap >= 0.9
    mem.close()


@pytest.fixture
def small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Vector files even for the few vectors of a test (the engine keeps small segments in
    memory)."""
    from memstrata.store import sqlite_vectors

    monkeypatch.setattr(sqlite_vectors, "FILES_ABOVE", 0)


def _vector_files(db: Path) -> list[Path]:
    return sorted(p for p in db.with_name(db.name + "-vectors").iterdir() if p.is_file())


def _stored_vector(db: Path, record_id: str) -> bytes:
    from memstrata.store.sqlite_driver import sqlite3

    conn = sqlite3.connect(str(db))
    try:
        row = conn.execute("SELECT vec FROM vectors WHERE record_id = ?", (record_id,)).fetchone()
    finally:
        conn.close()
    assert row is not None
    return bytes(row[0])


def _texts(n: int) -> list[dict[str, Any]]:
    topics = ["the billing export failed", "Bob moved the standup", "the staging cluster ran "
              "out of disk", "Alice approved the design doc", "the nightly backup finished"]
    return [{"scope": ALICE, "text": f"{topics[i % 5]} (ticket {1000 + i})", "actor": "user",
             "source": f"chat:{i}", "thread": f"t{i // 4}"} for i in range(n)]


def test_forget_removes_the_vector_from_the_index_files(tmp_path: Path, minilm: Any,
                                                        small_files: None) -> None:
    db = tmp_path / "f.db"
    mem = Memory.open(f"sqlite:///{db}", embedder=minilm)
    eps = mem.episodes.append_many(_texts(40))
    target = eps[17]
    query = "which ticket was about the staging cluster disk"
    assert target.ref in mem.recall(ALICE, query, layers=["episodes"], k=40).refs
    vec = _stored_vector(db, target.id)
    blob = b"".join(p.read_bytes() for p in _vector_files(db))
    assert vec in blob and target.id.encode() in blob  # the files really hold it
    other = Memory.open(f"sqlite:///{db}", embedder=minilm)  # another process's view
    assert target.ref in other.recall(ALICE, query, layers=["episodes"], k=40).refs

    report = mem.forget(ALICE, record_ids=[target.ref])
    assert report.counts["vectors"] >= 1
    blob = b"".join(p.read_bytes() for p in _vector_files(db))
    assert vec not in blob and target.id.encode() not in blob
    assert target.ref not in mem.recall(ALICE, query, layers=["episodes"], k=40).refs
    assert target.ref not in other.recall(ALICE, query, layers=["episodes"], k=40).refs
    # a neighbour re-embedded by the forget is found with its new vector, not its old one
    # (the one made beside the forgotten line): both processes score it alike
    for n in (16, 18):
        own = eps[n].text
        here = {h.ref: h.score for h in mem.recall(ALICE, own, layers=["episodes"]).items}
        there = {h.ref: h.score for h in other.recall(ALICE, own, layers=["episodes"]).items}
        assert eps[n].ref in there and there[eps[n].ref] == pytest.approx(here[eps[n].ref])
    other.close()
    mem.close()


def test_forgetting_the_newest_episode_removes_its_vector_from_the_files(
        tmp_path: Path, clock: ManualClock, small_files: None) -> None:
    db = tmp_path / "n.db"
    mem = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=64))
    mem.episodes.append_many(_texts(20))
    newest = mem.episodes.append(ALICE, text="the vault code for project Albatross is 7-7-3",
                                 actor="user", source="chat:z/1")
    assert newest.ref in mem.recall(ALICE, "Albatross vault code", layers=["episodes"]).refs
    vec = _stored_vector(db, newest.id)
    assert vec in b"".join(p.read_bytes() for p in _vector_files(db))

    mem.forget(ALICE, record_ids=[newest.ref])
    blob = b"".join(p.read_bytes() for p in _vector_files(db))
    assert vec not in blob and newest.id.encode() not in blob
    # nor does a later write bring it back into the search (its rowid is below the new ones)
    later = mem.episodes.append(ALICE, text="the nightly backup finished again",
                                actor="user", source="chat:z/2")
    found = mem.recall(ALICE, "Albatross vault code", layers=["episodes"], k=30).refs
    assert newest.ref not in found
    mem.close()
    blob = b"".join(p.read_bytes() for p in _vector_files(db))
    assert _stored_vector(db, later.id) in blob  # the files moved on past it
    assert vec not in blob and newest.id.encode() not in blob


def test_a_new_process_opens_the_files_instead_of_loading(tmp_path: Path, clock: ManualClock,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          small_files: None) -> None:
    from memstrata.store.sqlite_vectors import SQLiteVectorIndex

    url = f"sqlite:///{tmp_path / 'o.db'}"
    mem = Memory.open(url, clock=clock, embedder=HashingEmbedder(dims=128))
    mem.episodes.append_many(_texts(300))
    mem.close()  # close brings the files up to date though nothing was searched
    read: list[int] = []
    original = SQLiteVectorIndex._fetch

    def counting(self: SQLiteVectorIndex, *args: Any) -> Any:
        rows = original(self, *args)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(SQLiteVectorIndex, "_fetch", counting)
    again = Memory.open(url, clock=clock, embedder=HashingEmbedder(dims=128))
    first = again.recall(ALICE, "staging cluster disk", layers=["episodes"], k=10).refs
    assert first and read == []  # nothing was read from the table
    again.episodes.append(ALICE, text="the staging cluster disk alarm fired again",
                          actor="user", source="chat:new", thread="t-new")
    after = again.recall(ALICE, "staging cluster disk alarm", layers=["episodes"], k=10)
    assert read == [1]  # only the new row
    assert after.items[0].excerpt.startswith("the staging cluster disk alarm")
    again.close()


def test_rowids_never_repeat_so_a_replaced_last_vector_is_not_mistaken(
        tmp_path: Path, clock: ManualClock) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    mem = Memory.open(url, clock=clock, embedder=HashingEmbedder(dims=128))
    eps = mem.episodes.append_many(_texts(10))
    assert mem.recall(ALICE, "nightly backup", layers=["episodes"]).items
    index = mem.index.vectors
    assert index is not None
    newest = eps[-1]
    fresh = HashingEmbedder(dims=128).embed(["a sentence about llamas and glaciers"])
    with mem.db.transaction(ALICE.tenant) as tx:  # replace the vector of the highest rowid
        index.add(tx, "episodes", ALICE.tenant, [newest.id], fresh)
    hits = mem.recall(ALICE, "a sentence about llamas and glaciers", layers=["episodes"],
                      decision="planning", k=3)
    assert newest.ref in hits.refs
    mem.close()


def test_files_that_do_not_match_the_store_are_rebuilt(tmp_path: Path, clock: ManualClock,
                                                       small_files: None) -> None:
    import shutil

    emb = HashingEmbedder(dims=128)
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    mem_a = Memory.open(f"sqlite:///{a}", clock=clock, embedder=emb)
    mem_a.episodes.append_many(_texts(30))
    mem_a.close()
    mem_b = Memory.open(f"sqlite:///{b}", clock=clock, embedder=emb)
    mine = mem_b.episodes.append(ALICE, text="the llama sanctuary opened on Tuesday",
                                 actor="user", source="chat:b")
    mem_b.close()
    shutil.rmtree(b.with_name("b.db-vectors"))
    shutil.copytree(a.with_name("a.db-vectors"), b.with_name("b.db-vectors"))  # A's files
    mem_b = Memory.open(f"sqlite:///{b}", clock=clock, embedder=emb)
    refs = mem_b.recall(ALICE, "llama sanctuary", layers=["episodes"], k=10).refs
    assert refs == [mine.ref]  # nothing of store A, and B's own episode found
    mem_b.close()


def test_a_small_store_keeps_its_vectors_in_memory(tmp_path: Path, clock: ManualClock) -> None:
    db = tmp_path / "s.db"
    mem = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=128))
    eps = mem.episodes.append_many(_texts(20))
    assert mem.recall(ALICE, "nightly backup", layers=["episodes"]).items
    mem.close()
    assert not db.with_name(db.name + "-vectors").exists()
    again = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=128))
    again.forget(ALICE, record_ids=[eps[4].ref])
    assert eps[4].ref not in again.recall(ALICE, "nightly backup", layers=["episodes"],
                                          k=20).refs
    again.close()


def test_the_sampled_selection_finds_the_same_largest_values_as_a_full_partition() -> None:
    """The re-rank candidates: a threshold read off a strided sample, or the full partition
    when the sample misleads (the large values sit exactly on the stride, or are few)."""
    import numpy as np

    from memstrata.store.sqlite_vectors import largest

    rng = np.random.default_rng(7)
    n, count = 200_000, 1_000
    step = n // (32 * count)
    cases = {"random": rng.standard_normal(n).astype(np.float32)}
    cases["sorted"] = np.sort(cases["random"])
    on_stride = np.zeros(n, np.float32)
    on_stride[::step] = 1.0 + rng.random(on_stride[::step].size, dtype=np.float32)
    cases["large values on the stride"] = on_stride
    off_stride = np.zeros(n, np.float32)
    off_stride[1::step] = 1.0 + rng.random(off_stride[1::step].size, dtype=np.float32)
    cases["large values between it"] = off_stride
    cases["ties"] = np.ones(n, np.float32)
    for name, values in cases.items():
        got = largest(values, count)
        assert got.size == count == np.unique(got).size, name
        want = np.argpartition(values, n - count)[n - count:]
        assert np.array_equal(np.sort(values[got]), np.sort(values[want])), name
    assert np.array_equal(np.sort(largest(cases["random"][:50], 100)), np.arange(50))


def _needle_store(db: Path, clock: ManualClock) -> tuple[Memory, str, bytes]:
    """A store with files and one episode to find (its id and vector returned)."""
    mem = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=64))
    mem.episodes.append_many(_texts(30))
    needle = mem.episodes.append(ALICE, text="the vault code for project Albatross is 7-7-3",
                                 actor="user", source="chat:z/1")
    assert needle.ref in mem.recall(ALICE, "Albatross vault code", layers=["episodes"]).refs
    mem.close()
    vec = _stored_vector(db, needle.id)
    assert vec in b"".join(p.read_bytes() for p in _vector_files(db))
    return mem, needle.ref, vec


@pytest.mark.parametrize("how", ["forget", "sweep"])
def test_a_process_without_an_embedder_still_scrubs_the_files(
        tmp_path: Path, clock: ManualClock, small_files: None, how: str) -> None:
    """The CLI opens the store without an embedder for a forget or a sweep: the deleted
    vector still leaves the index's own files, not only the table."""
    db = tmp_path / "p.db"
    _, ref, vec = _needle_store(db, clock)
    if how == "sweep":
        mem = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=64))
        short = mem.episodes.append(ALICE, text="the door code for the Albatross lab is 4-4-1",
                                    actor="user", source="chat:z/2",
                                    expires_at=clock.now() + timedelta(days=1))
        mem.close()
        ref, vec = short.ref, _stored_vector(db, short.id)
        clock.advance(days=2)
    plain = Memory.open(f"sqlite:///{db}", clock=clock, embedder=None)
    if how == "forget":
        report = plain.forget(ALICE, record_ids=[ref])
        assert report.counts["vectors"] == 1 and report.compacted and not report.notes
    else:
        assert plain.sweep()["episodes"] == 1
    blob = b"".join(p.read_bytes() for p in _vector_files(db))
    assert vec not in blob and ref.removeprefix("episode:").encode() not in blob
    assert plain.doctor() == []
    plain.close()


def test_a_forget_that_cannot_write_the_files_says_so(tmp_path: Path, clock: ManualClock,
                                                      small_files: None) -> None:
    """The files cannot be written (here their lock is a folder, which stops root too): the
    forget commits in the database and its report says the files still hold the vector."""
    db = tmp_path / "r.db"
    _, ref, vec = _needle_store(db, clock)
    (lock,) = db.with_name(db.name + "-vectors").glob("*.lock")
    lock.unlink()
    lock.mkdir()
    mem = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=64))
    report = mem.forget(ALICE, record_ids=[ref])
    assert report.counts["episodes"] == 1 and not report.compacted
    assert any("vector files" in n and "could not be updated" in n for n in report.notes)
    assert ref not in mem.recall(ALICE, "Albatross vault code", layers=["episodes"]).refs
    mem.close()
    assert vec in b"".join(p.read_bytes() for p in _vector_files(db))  # as the note says
    lock.rmdir()
    again = Memory.open(f"sqlite:///{db}", clock=clock, embedder=None)
    assert any("alive in the files but gone from the table" in p for p in again.doctor())
    again.close()


def test_broken_or_restored_files_are_rebuilt_and_doctor_sees_what_it_cannot_fix(
        tmp_path: Path, clock: ManualClock, small_files: None) -> None:
    import json
    import shutil

    db = tmp_path / "b.db"
    _, ref, _ = _needle_store(db, clock)
    folder = db.with_name(db.name + "-vectors")
    (head,) = folder.glob("*.json")
    (vec_file,) = folder.glob("*.vec")
    for damage in ("truncate", "header"):
        if damage == "truncate":  # a file shorter than its header says: never zero-filled
            with vec_file.open("r+b") as f:
                f.truncate(vec_file.stat().st_size // 2)
        else:  # a header missing a field: no header
            h = json.loads(head.read_text())
            del h["n"]
            head.write_text(json.dumps(h))
        mem = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=64))
        assert mem.recall(ALICE, "Albatross vault code", layers=["episodes"]).refs[:1] == [ref]
        mem.close()
        # closed before the restore below deletes the WAL (a live connection would keep
        # the old shared-memory index and see the restored file torn)
        with Memory.open(f"sqlite:///{db}", clock=clock, embedder=None) as checked:
            assert checked.doctor() == []
    # the database restored from a backup behind the files: rebuilt, so a later forget
    # scrubs (before, the files' delete counter was ahead and nothing was scrubbed)
    shutil.copy(db, tmp_path / "backup.db")
    mem = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=64))
    first = mem.episodes.log(ALICE, limit=1)[0]
    mem.forget(ALICE, record_ids=[first.ref])
    mem.close()
    shutil.copy(tmp_path / "backup.db", db)
    for suffix in ("-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    mem = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=64))
    assert first.ref in mem.recall(ALICE, first.text, layers=["episodes"], k=40).refs
    vec = _stored_vector(db, ref.removeprefix("episode:"))
    mem.forget(ALICE, record_ids=[ref])
    mem.close()
    assert vec not in b"".join(p.read_bytes() for p in _vector_files(db))
    # what no rebuild can see by itself, doctor does: vectors garbled in place
    with vec_file.open("r+b") as f:
        f.write(b"\x01" * 4096)
    problems = Memory.open(f"sqlite:///{db}", clock=clock, embedder=None).doctor()
    assert any("vectors sampled differ from the table" in p and "reindex" in p
               for p in problems)


def test_a_process_refuses_vectors_once_another_re_embedded_the_store(
        tmp_path: Path, clock: ManualClock) -> None:
    db = tmp_path / "m.db"
    old = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=64))
    old.episodes.append_many(_texts(10))
    assert old.recall(ALICE, "nightly backup", layers=["episodes"]).items
    new = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=32))
    new.reindex()
    new.close()
    with pytest.raises(ConfigError, match="reindex"):
        old.recall(ALICE, "nightly backup", layers=["episodes"])
    with pytest.raises(ConfigError, match="reindex"):
        old.episodes.append(ALICE, text="the nightly backup failed", actor="user",
                            source="chat:late")
    old.close()
    again = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=32))
    assert again.doctor() == [] and len(again.episodes.log(ALICE, limit=100)) == 10
    again.close()


def test_two_stage_search_keeps_a_rare_text_among_many_alike(
        tmp_path: Path, clock: ManualClock, minilm: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The projection is fitted to what the store mostly holds; a text unlike the rest is
    poorly seen by it, and among many alike, its coarse score lost to theirs: its query
    found nothing. (At 12k log lines and 64 dimensions, 3 of 10 such texts were lost; a
    16-dimensional projection shows it at 2,000.)"""
    from memstrata.store import sqlite_vectors as vmod
    from memstrata.store import vector_segment as segment

    monkeypatch.setattr(segment, "PROJECT_ABOVE", 1000)
    monkeypatch.setattr(segment, "PROJECT_DIMS", 16)
    monkeypatch.setattr(vmod, "RERANK", 50)
    words = ["budget", "spreadsheet", "row", "quarterly", "meeting", "agenda", "minutes",
             "ticket", "status", "update"]
    rare = {"The database migration dropped the invoices table by mistake":
            "schema change accidentally deleted billing records",
            "The violin teacher said my vibrato is improving":
            "string instrument lessons progress",
            "We adopted a golden retriever puppy named Biscuit": "new dog joined the family",
            "Solar panels were installed on the garage roof":
            "photovoltaic array put up on the house"}
    items = [{"scope": ALICE, "text": f"routine log entry {i}: {words[i % 10]} "
              f"{words[i * 7 % 10]} {words[i * 3 % 10]} reviewed item {i * 13 % 1000}",
              "actor": "tool", "source": f"ci:{i}"} for i in range(2000)]
    for j, text in enumerate(rare):
        items.insert(j * 397, {"scope": ALICE, "text": text, "actor": "user",
                               "source": f"chat:{j}"})
    mem = Memory.open(f"sqlite:///{tmp_path / 'r.db'}", clock=clock, embedder=minilm)
    ids = {e.text: e.id for e in mem.episodes.append_many(items)}
    index = mem.index.vectors
    assert isinstance(index, vmod.SQLiteVectorIndex)
    for text, query in rare.items():
        qvec = mem.index.embed_query(query)
        assert qvec is not None
        with mem.db.transaction("default", write=False) as tx:
            found = [i for i, _ in index.search(tx, ALICE, "alice", qvec, 10, now=clock.now())]
        assert found[:1] == [ids[text]], query
    block = next(iter(index._segments.values()))
    assert block.proj is not None and block.proj.shape[1] == 16  # two stages really ran
    mem.close()


def test_a_prepared_search_is_the_search_of_its_transaction(tmp_path: Path,
                                                           clock: ManualClock) -> None:
    """The search a recall hands to the query embedding's worker (prepare_search) finds
    what ``search`` finds in the same transaction, and only that transaction's rows: a row
    written after it was prepared is not in it, nor a row hidden from the caller."""
    from memstrata.store import sqlite_vectors as vmod

    mem = Memory.open(f"sqlite:///{tmp_path / 'w.db'}", clock=clock,
                      embedder=HashingEmbedder(dims=128))
    bob = Scope(user="bob", project="docs-site")
    mem.episodes.append_many(
        [{"scope": ALICE, "text": f"deploy note {i} about the billing worker", "actor": "tool",
          "source": f"ci:{i}"} for i in range(40)]
        + [{"scope": bob, "text": "deploy note about the billing worker, bob's own",
            "actor": "tool", "source": "ci:bob"}])
    index = mem.index.vectors
    assert isinstance(index, vmod.SQLiteVectorIndex)
    qvec = mem.index.embed_query("billing worker deploy note")
    assert qvec is not None
    with mem.db.transaction("default", write=False) as tx:
        prepared = index.prepare_search(tx, ALICE, "alice", 50, now=clock.now())
        assert prepared(qvec) == index.search(tx, ALICE, "alice", qvec, 50, now=clock.now())
    before = {i for i, _ in prepared(qvec)}
    assert len(before) == 40  # alice's rows, not bob's
    late = mem.episodes.append(ALICE, text="deploy note about the billing worker, late",
                               actor="tool", source="ci:late")
    assert {i for i, _ in prepared(qvec)} == before  # the prepared view stays its own
    assert late.id in {h.ref.removeprefix("episode:") for h in
                       mem.recall(ALICE, "billing worker deploy note late", k=50).items}
    mem.close()
