"""Store benchmark (issue: core): episode append throughput and search latency.

Measures, on fresh embedded SQLite files, over the same ``texts`` synthetic episodes:
- append throughput one by one (each append its own transaction, the first ``single``
  texts; default all of them) and batched (``append_many`` in batches of ``batch``, one
  transaction each), each into its own fresh store, and the peak RSS of the batched phase
  (``append_many_peak_rss_mb``: the high-water mark is reset before each batch on Linux);
- ``episodes.search`` latency p50/p95 at each requested size (default 10k and 100k
  episodes in one scope; past ``texts`` the batched store takes further texts, not
  timed);
- database size on disk and peak RSS of the process.
Prints a table and writes JSON. No embedder by default: the store on its own. With
``embedder=`` (``--embedder minilm``) every write embeds, and the result also gives:
- ``embed_batched_per_s``: the embedder's own batched rate on the same texts (the text
  each episode's vector is made from), so the write rates read as a share of what the
  embedder allows (``append_batched_vs_embedder``, ``append_batched_vs_single``);
- per size, ``recall_p50_ms`` (the gate, query embedding included) beside
  ``embed_query_p50_ms`` (embedding the same queries alone, interleaved with the
  recalls) and their ratio ``recall_vs_embed``.
"""

from __future__ import annotations

import json
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..layers.episodes import Episodes
from ..memory import Memory
from ..models import Scope
from .synthetic import QUERIES, SyntheticEpisode, episodes

Progress = Callable[[str, int, int], None]


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[idx]


def _reset_peak_rss() -> bool:
    """Reset this process's RSS high-water mark (Linux ``clear_refs``); False if not."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak_rss_mb() -> float:
    """The RSS high-water mark (since the last reset, on Linux) in MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _item(scope: Scope, e: SyntheticEpisode) -> dict[str, Any]:
    return {"scope": scope, "text": e.text, "event": e.event, "actor": "tool",
            "source": e.source, "observed_at": e.observed_at}


def _latencies(mem: Memory, scope: Scope, emb: Any, repeats: int) -> dict[str, Any]:
    """Search (and, with an embedder, recall and the query embedding alone) per query."""
    search: list[float] = []
    recall: list[float] = []
    alone: list[float] = []
    if emb is not None:
        mem.recall(scope, "warm up the index")  # maps (or builds) the vector files once
    for _ in range(repeats):
        for q in QUERIES:
            t0 = time.perf_counter()
            mem.episodes.search(scope, q, k=10)
            search.append((time.perf_counter() - t0) * 1000)
            if emb is None:
                continue
            t0 = time.perf_counter()
            emb.embed_query(q)
            alone.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            mem.recall(scope, q, k=10)
            recall.append((time.perf_counter() - t0) * 1000)
    out: dict[str, Any] = {
        "search_p50_ms": round(percentile(search, 0.5), 3),
        "search_p95_ms": round(percentile(search, 0.95), 3),
        "search_mean_ms": round(statistics.fmean(search), 3),
        "queries": len(search),
    }
    if emb is not None:
        out["recall_p50_ms"] = round(percentile(recall, 0.5), 3)
        out["recall_p95_ms"] = round(percentile(recall, 0.95), 3)
        out["embed_query_p50_ms"] = round(percentile(alone, 0.5), 3)
        out["recall_vs_embed"] = round(percentile(recall, 0.5) / percentile(alone, 0.5), 2)
    return out


def run(sizes: Sequence[int] = (10_000, 100_000), single: int | None = None,
        batch: int = 1_000, repeats: int = 5, workdir: Path | None = None,
        progress: Progress | None = None, embedder: str | None = None,
        texts: int = 10_000) -> dict[str, Any]:
    """Run the benchmark (see the module docstring); ``single`` defaults to ``texts``."""
    tmp = Path(workdir or tempfile.mkdtemp(prefix="memstrata-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    texts = max(1, texts)
    single = texts if single is None else max(0, min(single, texts))
    emb = None
    if embedder is not None:
        from ..providers.embeddings import get_embedder

        emb = get_embedder(embedder)
    scope = Scope(user="bench", project="p")
    # the same texts for every phase; later ones only grow the batched store past them
    stream: Iterator[SyntheticEpisode] = episodes(max([*sizes, texts]) + 10, seed=11)
    same = [next(stream) for _ in range(texts)]
    result: dict[str, Any] = {"benchmark": "store", "backend": "sqlite", "sizes": {},
                              "embedder": emb.model_name if emb is not None else None,
                              "texts": texts, "single": single, "batch_size": batch}

    if emb is not None:
        # what each vector is made from: these episodes have a thread each, so no
        # previous line (Episodes.embed_text)
        lines = [Episodes.embed_text([], Episodes.line(
            {"subject": None, "event": e.event, "text": e.text, "outcome": None}))
            for e in same]
        emb.embed(lines[:32])  # load the model outside the timing
        t0 = time.perf_counter()
        emb.embed(lines)
        result["embed_batched_per_s"] = round(texts / (time.perf_counter() - t0), 1)
        del lines

    # one by one, into a store of its own
    if single:
        one = Memory.open(f"sqlite:///{tmp / 'single.db'}", embedder=emb)
        t0 = time.perf_counter()
        for i, e in enumerate(same[:single]):
            one.episodes.append(scope, text=e.text, event=e.event, actor="tool",
                                source=e.source, observed_at=e.observed_at)
            if progress and i % 200 == 0:
                progress("append one by one", i, single)
        result["append_single_per_s"] = round(single / (time.perf_counter() - t0), 1)
        one.close()
    else:
        result["append_single_per_s"] = None

    # batched, into another; searched at each size on the way
    db = tmp / "bench.db"
    mem = Memory.open(f"sqlite:///{db}", embedder=emb)
    reset = _reset_peak_rss()
    phase_peak = 0.0
    t_batch = 0.0
    count = 0
    for size in sorted(sizes):
        while count < size:
            n = min(batch, size - count)
            if count < texts:
                n = min(n, texts - count)  # the rate covers exactly the same texts
                chunk = [_item(scope, e) for e in same[count:count + n]]
            else:
                chunk = [_item(scope, next(stream)) for _ in range(n)]
            timed = count < texts
            if timed:
                _reset_peak_rss()
            t0 = time.perf_counter()
            mem.episodes.append_many(chunk)
            if timed:
                t_batch += time.perf_counter() - t0
                phase_peak = max(phase_peak, _peak_rss_mb())
            count += len(chunk)
            if progress:
                progress(f"append batched to {size:,}", count, size)
        result["sizes"][str(size)] = {"episodes": count, **_latencies(mem, scope, emb, repeats),
                                      "db_bytes": mem.stats()["bytes"]}
    while count < texts:  # the rate covers all the texts even when every size is smaller
        chunk = [_item(scope, e) for e in same[count:count + batch]]
        _reset_peak_rss()
        t0 = time.perf_counter()
        mem.episodes.append_many(chunk)
        t_batch += time.perf_counter() - t0
        phase_peak = max(phase_peak, _peak_rss_mb())
        count += len(chunk)
    result["append_batched_per_s"] = round(min(count, texts) / t_batch, 1) if t_batch else None
    result["append_many_peak_rss_mb"] = round(phase_peak, 1)
    result["append_many_peak_rss_is_phase"] = reset
    if result["append_single_per_s"] and result["append_batched_per_s"]:
        result["append_batched_vs_single"] = round(
            result["append_batched_per_s"] / result["append_single_per_s"], 2)
    if result.get("embed_batched_per_s") and result["append_batched_per_s"]:
        result["append_batched_vs_embedder"] = round(
            result["append_batched_per_s"] / result["embed_batched_per_s"], 2)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    mem.close()
    if workdir is None:
        shutil.rmtree(tmp, ignore_errors=True)
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--texts", type=int, default=10_000)
    parser.add_argument("--single", type=int, default=None)
    parser.add_argument("--embedder", default=None)
    parser.add_argument("--out", default="bench-results/store.json")
    args = parser.parse_args(argv)
    res = run(sizes=[int(s) for s in args.sizes.split(",")], single=args.single,
              texts=args.texts, embedder=args.embedder)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    return res


__all__ = ["main", "percentile", "run"]


if __name__ == "__main__":
    main()
