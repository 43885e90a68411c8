"""The SQLite vector index: a model change is refused until reindex; the two-stage search
of a large block agrees with the exact one; the memory-mapped files beside the store are
opened by a new process instead of loaded, lose a forgotten vector at once (and the names
of a forgotten user, while everyone else's rows still decode to theirs), and are rebuilt
when they do not match the store. (PostgreSQL's HNSW counterparts are in
``test_postgres.py``.)"""

from __future__ import annotations

import textwrap
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


CAROL = Scope(user="carol.smith@example.com", project="proj-carol-secret", agent="carol-agent")
CAROL_SHARED = Scope(user="carol.smith@example.com", project="proj-shared")
DAVE = Scope(user="dave", project="proj-shared", agent="dave-agent")
BOB = Scope(user="bob", project="p")
#: What carol's records name, and what the files must no longer hold once she is gone.
CAROLS_NAMES = (b"carol.smith", b"proj-carol-secret", b"carol-agent", b"carol-principal-xyz")
#: The vector search of each (scope, principal, query): by the index itself, so the scope
#: codes in the files decide what passes, not a filter in SQL after them.
SEARCHES = [(BOB, None, "bob filler 17"), (DAVE, "dave", "dave note"),
            (DAVE, "dave-reader", "dave note"),
            (Scope(user="bob", project="p", agent="dave-agent"), None, "bob filler 3"),
            (Scope(user="dave", project="proj-shared", agent="bob"), "dave-reader", "dave")]
SEARCH = textwrap.dedent("""
    import json, sys
    from memstrata import ManualClock, Memory, Scope
    from memstrata.providers.embeddings import HashingEmbedder
    mem = Memory.open("sqlite:///" + sys.argv[1], clock=ManualClock(sys.argv[2]),
                      embedder=HashingEmbedder(dims=64))
    out = []
    for scope, principal, query in json.loads(sys.argv[3]):
        qvec = mem.index.embed_query(query)
        with mem.db.transaction("default", write=False) as tx:
            out.append([i for i, _ in mem.index.vectors.search(
                tx, Scope(**scope), principal, qvec, 10, now=mem.clock.now())])
    print(json.dumps({"hits": out, "doctor": mem.doctor()}))
    mem.close()
""")


def _vector_hits(mem: Memory) -> list[list[str]]:
    out = []
    for scope, principal, query in SEARCHES:
        qvec = mem.index.embed_query(query)
        with mem.db.transaction("default", write=False) as tx:
            out.append([i for i, _ in mem.index.vectors.search(  # type: ignore[union-attr]
                tx, scope, principal, qvec, 10, now=mem.clock.now())])
    return out


def _decoded(db: Path) -> tuple[dict[int, tuple[Any, ...]], dict[int, tuple[Any, ...]]]:
    """(user, project, agent, readers) of every live row by rowid: as the vector files
    decode them, and as the table holds them."""
    import json

    import numpy as np

    from memstrata.store.sqlite_driver import sqlite3
    from memstrata.store.vector_segment import Segment, segment_name

    conn = sqlite3.connect(str(db))
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        table = {int(r[0]): (r[1], r[2], r[3], json.loads(r[4]) if r[4] else None)
                 for r in conn.execute(
                     "SELECT v.rowid, e.s_user, e.s_project, e.s_agent, e.readers FROM vectors "
                     "v JOIN episodes e ON e.tenant = v.tenant AND e.id = v.record_id")}
    finally:
        conn.close()
    model = meta["embedding_model"]
    seg = Segment.open(int(model.rpartition(":")[2]), db.with_name(db.name + "-vectors") /
                       segment_name("default", "episodes"), store=meta["store_id"], model=model)
    assert seg is not None
    alive = np.flatnonzero(seg.rows["alive"][: seg.n] == 1)
    return dict(zip(seg.rows["rowid"][alive].tolist(), seg.scopes(alive), strict=True)), table


def _in_a_new_process(db: Path, clock: ManualClock) -> dict[str, Any]:
    import json
    import subprocess
    import sys

    searches = json.dumps([(s.model_dump(exclude_none=True), p, q) for s, p, q in SEARCHES])
    done = subprocess.run([sys.executable, "-c", SEARCH, str(db), clock.now().isoformat(),
                           searches], capture_output=True, text=True, check=True, timeout=300)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("how", ["forget", "sweep"])
def test_a_forgotten_or_expired_user_leaves_no_name_in_the_files(
        tmp_path: Path, clock: ManualClock, how: str, small_files: None) -> None:
    """With the index in files (past FILES_ABOVE vectors; here from the first), forgetting
    a whole user (or her records expiring and being swept) leaves none of her user,
    project, agent or reader names in them, while the codes of everyone else's rows still
    decode to their names: the same vector hits, here and in a new process (which opens
    the files whatever their size), and doctor finds nothing."""
    db = tmp_path / "u.db"
    folder = db.with_name(db.name + "-vectors")
    mem = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=64))
    lapse = {"expires_at": clock.now() + timedelta(days=1)} if how == "sweep" else {}
    items: list[dict[str, Any]] = [
        {"scope": BOB, "text": f"bob filler {i}", "actor": "user", "source": f"b/{i}",
         "thread": f"b{i // 10}"} for i in range(200)]
    # carol's names get codes before dave's: his must stay valid past the erased ones
    items += [{"scope": CAROL if i < 20 else CAROL_SHARED, "text": f"carol note {i} kumquat",
               "actor": "user", "source": f"c/{i}", "thread": "c",
               "readers": ["carol-principal-xyz"] if i % 2 else None, **lapse}
              for i in range(25)]
    items += [{"scope": DAVE, "text": f"dave note {i}", "actor": "user", "source": f"d/{i}",
               "thread": "d", "readers": ["dave-reader"] if i % 2 else None}
              for i in range(20)]
    for start in range(0, len(items), 1000):
        mem.episodes.append_many(items[start:start + 1000])
    before = _vector_hits(mem)
    blob = b"".join(p.read_bytes() for p in folder.iterdir() if p.is_file())
    assert all(name in blob for name in CAROLS_NAMES)  # the files really held them
    assert all(before[:4]) and not before[4]
    assert set(before[2]) - set(before[1])  # dave's reader sees his restricted notes too

    if how == "forget":
        assert mem.forget(Scope(user=CAROL.user)).counts["vectors"] == 25
    else:
        clock.advance(days=2)
        assert mem.sweep()["episodes"] == 25
    blob = b"".join(p.read_bytes() for p in folder.iterdir() if p.is_file())
    assert [name for name in CAROLS_NAMES if name in blob] == []
    assert all(name in blob for name in (b'"bob"', b'"proj-shared"', b"dave-agent",
                                         b"dave-reader"))
    assert _vector_hits(mem) == before  # carol's were never among them
    mem.close()
    in_files, in_table = _decoded(db)
    assert in_files == in_table and len(in_table) == len(items) - 25

    fresh = _in_a_new_process(db, clock)  # decodes the codes from the files alone
    assert fresh == {"hits": before, "doctor": []}
    again = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=64))
    assert _vector_hits(again) == before and again.doctor() == []
    if how == "forget":  # carol comes back: her names get new codes, her filters work
        back = again.episodes.append(CAROL, text="carol note again kumquat", actor="user",
                                     source="c/new", readers=["carol-principal-xyz"])
        qvec = again.index.embed_query("carol note again kumquat")
        with again.db.transaction("default", write=False) as tx:
            search = again.index.vectors.search  # type: ignore[union-attr]
            assert back.id in [i for i, _ in search(tx, CAROL, "carol-principal-xyz", qvec, 5,
                                                    now=clock.now())]
            assert back.id not in [i for i, _ in search(tx, DAVE, "carol-principal-xyz", qvec,
                                                        5, now=clock.now())]
            assert back.id not in [i for i, _ in search(tx, CAROL, None, qvec, 5,
                                                        now=clock.now())]
        assert _vector_hits(again) == before and again.doctor() == []
    again.close()
    in_files, in_table = _decoded(db)
    assert in_files == in_table
    blob = b"".join(p.read_bytes() for p in folder.iterdir() if p.is_file())
    assert (b"carol.smith" in blob) == (how == "forget")
    assert _in_a_new_process(db, clock) == {"hits": before, "doctor": []}


def _rows(rowids: range, users: list[str], readers: dict[int, list[str]]) -> list[Any]:
    from memstrata.store.vector_segment import NewRow

    return [NewRow(rowid=r, record_id=f"r{r}", vec=bytes(16), user=users[i],
                   project=f"{users[i]}-project", agent=None, expires=float("inf"),
                   observed=0.0, readers=readers.get(r)) for i, r in enumerate(rowids)]


def test_an_erased_name_leaves_every_process_and_may_come_back(tmp_path: Path) -> None:
    """The scrub overwrites a name in place (codes keep their numbers); another process
    holding the files reads them anew before it writes, so a name that comes back gets a
    new code that every process decodes alike; the overwritten lines keep the files'
    length, so a reader that never saw the header move still reads whole lines."""
    import numpy as np

    from memstrata.store.vector_segment import Segment

    prefix = tmp_path / "seg"
    kw: dict[str, Any] = {"store": "s", "model": "m:4"}
    one = Segment.create(4, prefix, tenant="t", layer="episodes", **kw)
    with one.locked():
        one.append(_rows(range(1, 4), ["ann", "carol", "ben"], {2: ["carol-reader"]}))
    two = Segment.open(4, prefix, **kw)
    assert two is not None and two.codes == one.codes
    lines = [tmp_path / "seg.codes", tmp_path / "seg.readers"]
    sizes = [p.stat().st_size for p in lines]
    with one.locked():
        one.scrub(np.array([1]), 1)  # carol's row
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"carol" not in blob and b"ann-project" in blob and b"ben-project" in blob
    assert [p.stat().st_size for p in lines] == sizes
    assert one.unused() == ({}, [])
    with two.locked():  # reads the overwritten files anew, then writes carol back
        assert "carol" not in two.codes and not any(two.restricted.values())
        two.append(_rows(range(4, 5), ["carol"], {4: ["carol-reader"]}))
    assert two.codes["carol"] == 7  # a new code: 3 stays carol's old, unnamed
    one.refresh()
    three = Segment.open(4, prefix, **kw)
    assert three is not None
    for seg in (one, two, three):
        assert seg.scopes(np.array([0, 2, 3])) == [
            ("ann", "ann-project", None, None), ("ben", "ben-project", None, None),
            ("carol", "carol-project", None, ["carol-reader"])]
        assert seg.scope_mask("carol", "carol-project", None, "carol-reader").tolist() == \
            [False, False, False, True]
        assert not seg.scope_mask("carol", "carol-project", None, None).any()
        assert seg.scope_mask("ann", "ann-project", None, None).tolist() == \
            [True, False, False, False]


def test_a_name_too_short_for_its_code_has_the_files_rebuilt(tmp_path: Path) -> None:
    """A one-letter name at code 1000 or above cannot be overwritten by its code in place:
    the files go (SegmentGone), and the caller rebuilds them from the database."""
    import numpy as np

    from memstrata.store.vector_segment import Segment, SegmentGone

    prefix = tmp_path / "seg"
    seg = Segment.create(4, prefix, store="s", model="m:4", tenant="t", layer="episodes")
    users = [f"user{i:04d}" for i in range(499)] + ["z"]  # with projects: z is code 999
    with seg.locked():
        seg.append(_rows(range(1, 501), users, {}))
        seg.append(_rows(range(501, 502), ["y"], {}))  # y: code 1001
    assert seg.codes["z"] == 999 and seg.codes["y"] == 1001
    with seg.locked():
        seg.scrub(np.array([499]), 1)  # z's row: "z" becomes 999, same length
    assert b'"z"' not in (tmp_path / "seg.codes").read_bytes()
    with pytest.raises(SegmentGone), seg.locked():
        seg.scrub(np.array([500]), 2)  # y's row: 1001 is longer than "y"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seg.lock"]


def test_doctor_sees_names_left_behind_and_rows_that_decode_to_other_names(
        tmp_path: Path, clock: ManualClock, small_files: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from memstrata.store.vector_segment import Segment

    db = tmp_path / "d.db"
    mem = Memory.open(f"sqlite:///{db}", clock=clock, embedder=HashingEmbedder(dims=64))
    mem.episodes.append_many(_texts(20))
    mem.episodes.append_many([{"scope": CAROL, "text": f"carol note {i}", "actor": "user",
                               "source": f"c/{i}", "readers": ["carol-principal-xyz"]}
                              for i in range(3)])
    assert mem.recall(ALICE, "nightly backup", layers=["episodes"]).items
    with monkeypatch.context() as patch:  # a scrub of an earlier version: names stay
        patch.setattr(Segment, "_erase", lambda self, dying: None)
        mem.forget(Scope(user=CAROL.user))
    mem.close()
    folder = db.with_name(db.name + "-vectors")
    assert b"carol.smith" in b"".join(p.read_bytes() for p in folder.iterdir() if p.is_file())
    with Memory.open(f"sqlite:///{db}", clock=clock, embedder=None) as plain:
        assert any("3 names of users, projects or agents and the readers of 3 removed rows "
                   "are still in the files" in p for p in plain.doctor())
    # a name changed in place (the file's length kept): alice's rows decode to another user
    (codes,) = folder.glob("*.codes")
    codes.write_bytes(codes.read_bytes().replace(b'"alice"', b'"bobby"'))
    with Memory.open(f"sqlite:///{db}", clock=clock, embedder=None) as plain:
        assert any("rows sampled have another scope or readers than the table" in p
                   for p in plain.doctor())
