"""Latency benchmark (issue: retrieval): recall at scale with embeddings.

On a fresh store (embedded SQLite by default, or ``--url``), appends ``n``
synthetic episodes in one scope in batches (embedding included), then runs
the recall gate (query embedding included) over a fixed query set. Reports
write throughput, recall p50/p95, peak RSS and database size; writes JSON.
"""

from __future__ import annotations

import json
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..memory import Memory
from ..models import Scope
from .store import percentile
from .synthetic import QUERIES, episodes

Progress = Callable[[str, int, int], None]


def run(n: int = 100_000, *, url: str | None = None, embedder: str = "minilm",
        batch: int = 512, repeats: int = 3, progress: Progress | None = None) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="memstrata-latency-"))
    target = url or f"sqlite:///{tmp / 'latency.db'}"
    mem = Memory.open(target, embedder=embedder)
    scope = Scope(user="bench", project="latency")
    t_write = 0.0
    done = 0
    chunk: list[dict[str, Any]] = []
    for e in episodes(n, seed=3):
        chunk.append({"scope": scope, "text": e.text, "event": e.event, "actor": "tool",
                      "source": e.source, "observed_at": e.observed_at})
        if len(chunk) == batch:
            t0 = time.perf_counter()
            mem.episodes.append_many(chunk)
            t_write += time.perf_counter() - t0
            done += len(chunk)
            chunk = []
            if progress:
                progress("append (with embeddings)", done, n)
    if chunk:
        t0 = time.perf_counter()
        mem.episodes.append_many(chunk)
        t_write += time.perf_counter() - t0
        done += len(chunk)
    mem.recall(scope, "warm up the index")  # loads the vector block once
    lat: list[float] = []
    empty = 0
    for _ in range(repeats):
        for q in QUERIES:
            t0 = time.perf_counter()
            res = mem.recall(scope, q, k=10)
            lat.append((time.perf_counter() - t0) * 1000)
            empty += not res.items
    stats = mem.stats()
    mem.close()
    return {
        "benchmark": "latency", "backend": target.split(":", 1)[0], "episodes": done,
        "embedder": embedder, "write_per_s": round(done / t_write, 1) if t_write else None,
        "recall_p50_ms": round(percentile(lat, 0.5), 2),
        "recall_p95_ms": round(percentile(lat, 0.95), 2),
        "recall_mean_ms": round(statistics.fmean(lat), 2), "queries": len(lat),
        "empty_results": empty,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "db_bytes": stats.get("bytes"),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--url", default=None)
    p.add_argument("--out", default="bench-results/latency.json")
    a = p.parse_args(argv)
    res = run(a.n, url=a.url)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    return res


__all__ = ["main", "run"]


if __name__ == "__main__":
    main()
