"""Forget benchmark: the cost of forgetting one record as the store grows.

On a fresh store (embedded SQLite by default, or ``--url``) holding ``n`` episodes in
threads of ten turns (embedded with ``--embedder``, ``hash`` by default: the cost
measured is the store's, not the model's; vectors are stored either way), plus a fact per
hundred episodes, it forgets ``--trials`` single records, each a separate
``forget(record_ids=[...])`` (episodes in the middle of their thread, so a neighbour is
re-indexed, and facts with a superseded version), and a few ``forget(match=...)`` of a word
that occurs once. Each timing covers the whole call: the delete, the neighbours'
re-indexing, and the compaction that scrubs the bytes. Reports p50/p95/max ms per kind
and the split of one call (delete transaction vs compaction); writes JSON. With
``n=0`` and ``url`` it measures a store an earlier run filled at that URL, without the fill.
"""

from __future__ import annotations

import random
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..memory import Memory
from ..models import Scope
from .store import percentile
from .synthetic import episodes

Progress = Callable[[str, int, int], None]


def run(n: int = 100_000, *, url: str | None = None, embedder: str = "hash",
        trials: int = 20, batch: int = 1000, progress: Progress | None = None,
        seed: int = 7) -> dict[str, Any]:
    """Fill a store with ``n`` episodes, then time single-record forgets."""
    from ..providers.embeddings import get_embedder

    tmp = Path(tempfile.mkdtemp(prefix="memstrata-forget-"))
    target = url or f"sqlite:///{tmp / 'forget.db'}"
    mem = Memory.open(target, embedder=get_embedder(embedder))
    scope = Scope(user="bench", project="forget")
    rng = random.Random(seed)
    # n == 0 measures an existing store (--url) filled by an earlier run of this bench
    ids = [] if n else [e.id for e in mem.episodes.log(scope, limit=1_000_000)]
    chunk: list[dict[str, Any]] = []
    for i, e in enumerate(episodes(n, seed=seed)):
        chunk.append({"scope": scope, "text": f"{e.text} (marker m{i:07d})", "event": e.event,
                      "actor": "user", "source": f"{e.source}/t{i % 10}",
                      "thread": f"thread-{i // 10}", "observed_at": e.observed_at})
        if len(chunk) == batch or i + 1 == n:
            ids += [ep.id for ep in mem.episodes.append_many(chunk)]
            chunk = []
            if progress:
                progress("append", len(ids), n)
    facts: list[str] = []
    for j in range(max(1, (n or len(ids)) // 100)):
        for version in ("first", "second"):
            res = mem.facts.propose(scope, claim=f"Service s{j} is owned by team {version}",
                                    kind="system_fact", subject=f"s{j}", attribute="owner",
                                    actor="user", source=f"doc:{j}")
        if res.record is not None:
            facts.append(res.record.id)
    timings: dict[str, list[float]] = {"episode": [], "fact": [], "match": []}
    middle = [i for i in range(len(ids)) if i % 10 not in (0, 9)]
    for label, pool in (("episode", [ids[i] for i in middle]), ("fact", facts)):
        for k, rid in enumerate(rng.sample(pool, min(trials, len(pool)))):
            t0 = time.perf_counter()
            report = mem.forget(scope, record_ids=[rid])
            timings[label].append((time.perf_counter() - t0) * 1000)
            assert report.counts["episodes" if label == "episode" else "facts"] >= 1
            if progress:
                progress(f"forget one {label}", k + 1, trials)
    for i in rng.sample(range(len(ids)), min(5, len(ids))):
        t0 = time.perf_counter()
        mem.forget(scope, match=f"m{i:07d}")
        timings["match"].append((time.perf_counter() - t0) * 1000)
    # the split of one more call: the delete transaction alone, then the compaction
    db = mem.db
    rid = ids[middle[len(middle) // 2]]
    compact = db.compact
    spent: dict[str, float] = {}

    def timed_compact() -> list[str]:
        t0 = time.perf_counter()
        left = compact()
        spent["compact_ms"] = (time.perf_counter() - t0) * 1000
        return left

    db.compact = timed_compact  # type: ignore[method-assign]
    t0 = time.perf_counter()
    mem.forget(scope, record_ids=[rid])
    total = (time.perf_counter() - t0) * 1000
    db.compact = compact  # type: ignore[method-assign]
    stats = mem.stats()
    mem.close()
    shutil.rmtree(tmp, ignore_errors=True)
    out: dict[str, Any] = {"benchmark": "forget", "backend": target.split(":", 1)[0],
                           "episodes": len(ids), "facts": len(facts), "embedder": embedder}
    for label, lat in timings.items():
        if lat:
            out[f"forget_{label}_p50_ms"] = round(percentile(lat, 0.5), 2)
            out[f"forget_{label}_p95_ms"] = round(percentile(lat, 0.95), 2)
            out[f"forget_{label}_max_ms"] = round(max(lat), 2)
            out[f"forget_{label}_trials"] = len(lat)
    out["split_total_ms"] = round(total, 2)
    out["split_compact_ms"] = round(spent.get("compact_ms", 0.0), 2)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out["db_bytes"] = stats.get("bytes")
    return out


__all__ = ["run"]
