"""The SQLite vector index: a model change is refused until reindex; the two-stage search
of a large block agrees with the exact one. (PostgreSQL's HNSW counterparts are in
``test_postgres.py``.)"""

from __future__ import annotations

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
    monkeypatch.setattr(vmod, "PROJECT_ABOVE", 1000)
    monkeypatch.setattr(vmod, "RERANK", 200)
    index.invalidate()
    approx = {q: top(q) for q in QUERIES}
    block = next(iter(index._blocks.values()))
    assert block.proj is not None  # the two-stage path really ran
    overlap = sum(len(set(exact[q]) & set(approx[q])) for q in QUERIES) / (10 * len(QUERIES))
    assert overlap >= 0.9
    mem.close()
