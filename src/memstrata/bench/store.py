"""Store benchmark (issue: core): episode append throughput and lexical search latency.

Measures, on a fresh embedded SQLite file:
- append throughput one by one (each append its own transaction) and batched
  (``append_many``, one transaction per batch);
- ``episodes.search`` latency p50/p95 at each requested size (default 10k and
  100k episodes in one scope);
- database size on disk and peak RSS.
Prints a table and writes JSON. No embedder by default: the store on its own. With
``embedder=`` (``--embedder minilm``) every write embeds, and the result also gives the
embedder's own batched rate on the same texts (``embed_batched_per_s``), so the write
rates read as a share of what the embedder allows.
"""

from __future__ import annotations

import json
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..memory import Memory
from ..models import Scope
from .synthetic import QUERIES, episodes


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[idx]


def _db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def run(sizes: Sequence[int] = (10_000, 100_000), single: int = 2_000, batch: int = 1_000,
        repeats: int = 5, workdir: Path | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        embedder: str | None = None) -> dict[str, Any]:
    tmp = Path(workdir or tempfile.mkdtemp(prefix="memstrata-bench-"))
    db = tmp / "bench.db"
    emb = None
    if embedder is not None:
        from ..providers.embeddings import get_embedder

        emb = get_embedder(embedder)
    mem = Memory.open(f"sqlite:///{db}", embedder=emb)
    scope = Scope(user="bench", project="p")
    gen = episodes(max(sizes) + single + 10, seed=11)
    result: dict[str, Any] = {"benchmark": "store", "backend": "sqlite", "sizes": {},
                              "embedder": emb.model_name if emb is not None else None}
    if emb is not None:
        sample = [e.text for e in episodes(min(2_000, max(sizes)), seed=11)]
        emb.embed(sample[:32])  # load the model outside the timing
        t0 = time.perf_counter()
        emb.embed(sample)
        result["embed_batched_per_s"] = round(len(sample) / (time.perf_counter() - t0), 1)

    # one by one
    t0 = time.perf_counter()
    for i in range(single):
        e = next(gen)
        mem.episodes.append(scope, text=e.text, event=e.event, actor="tool", source=e.source,
                            observed_at=e.observed_at)
        if progress and i % 200 == 0:
            progress("append one-by-one", i, single)
    dt = time.perf_counter() - t0
    result["append_single_per_s"] = round(single / dt, 1)
    count = single
    t_batch = 0.0
    n_batched = 0
    for size in sorted(sizes):
        while count < size:
            chunk = []
            for _ in range(min(batch, size - count)):
                e = next(gen)
                chunk.append({"scope": scope, "text": e.text, "event": e.event, "actor": "tool",
                              "source": e.source, "observed_at": e.observed_at})
            t0 = time.perf_counter()
            mem.episodes.append_many(chunk)
            t_batch += time.perf_counter() - t0
            n_batched += len(chunk)
            count += len(chunk)
            if progress:
                progress(f"append batched to {size:,}", count, size)
        lat: list[float] = []
        for _ in range(repeats):
            for q in QUERIES:
                t0 = time.perf_counter()
                mem.episodes.search(scope, q, k=10)
                lat.append((time.perf_counter() - t0) * 1000)
        result["sizes"][str(size)] = {
            "episodes": count,
            "search_p50_ms": round(percentile(lat, 0.5), 3),
            "search_p95_ms": round(percentile(lat, 0.95), 3),
            "search_mean_ms": round(statistics.fmean(lat), 3),
            "queries": len(lat),
            "db_bytes": _db_bytes(db),
        }
    result["append_batched_per_s"] = round(n_batched / t_batch, 1) if t_batch else None
    result["batch_size"] = batch
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    mem.close()
    if workdir is None:
        shutil.rmtree(tmp, ignore_errors=True)
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--single", type=int, default=2000)
    parser.add_argument("--out", default="bench-results/store.json")
    args = parser.parse_args(argv)
    res = run(sizes=[int(s) for s in args.sizes.split(",")], single=args.single)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    return res


__all__ = ["main", "percentile", "run"]


if __name__ == "__main__":
    main()
