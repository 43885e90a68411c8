"""Latency benchmark (issue: retrieval): recall at scale with embeddings.

On a fresh store (embedded SQLite by default, or ``--url``), appends ``n``
synthetic episodes in one scope in batches (embedding included), then runs
the recall gate (query embedding included) over a fixed query set. Reports
write throughput, recall p50/p95, peak RSS and database size; writes JSON.

``n=0`` measures a store an earlier run filled, in this new process: ``open_first_query_s``
is then the time from opening the store to the first answer (the embedding model's load,
the vector files' mapping and the token encoder included). ``query_embedder`` embeds every
query with a second model as well (e.g. a store filled with ``hash:384`` vectors, which a
1M run can afford, timed with MiniLM's real query cost); ``embed_query_p50_ms`` is that
embedding alone over the same queries, so recall reads against it. ``start`` begins at
that synthetic episode, so a second run grows a store the first filled (100k, then 900k
more to 1M) with texts that never repeat the first run's.
"""

from __future__ import annotations

import itertools
import json
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from ..memory import Memory
from ..models import Scope
from .store import percentile
from .synthetic import QUERIES, episodes

Progress = Callable[[str, int, int], None]


class _TextCache:
    """Wraps an embedder so a repeated text is embedded once (for the 1M runs built from
    fewer distinct texts); queries are never cached."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dims = inner.dims
        self.cache: dict[str, Any] = {}

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            for t, v in zip(missing, self.inner.embed(missing), strict=True):
                self.cache[t] = v
        return np.stack([self.cache[t] for t in texts])

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


class _AlsoEmbedQuery:
    """The store's embedder, whose queries are embedded by a second model too (only its
    cost counts: the vector searched is the store's own)."""

    def __init__(self, inner: Any, timed: Any) -> None:
        self.inner, self.timed = inner, timed
        self.model_name, self.dims = inner.model_name, inner.dims

    def embed(self, texts: Sequence[str]) -> Any:
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> Any:
        self.timed.embed_query(text)
        return self.inner.embed_query(text)


def run(n: int = 100_000, *, url: str | None = None, embedder: str = "minilm",
        distinct: int | None = None, batch: int = 512, repeats: int = 3,
        progress: Progress | None = None,
        query_embedder: str | None = None, start: int = 0) -> dict[str, Any]:
    """Fill a store with ``n`` episodes and time recall. With ``distinct`` < n, texts repeat
    (with new dates and sources) after ``distinct`` of them and each distinct text is
    embedded once; write throughput is then reported for the distinct phase only.
    Without ``url`` the store is a SQLite file in a temporary directory, removed however
    the run ends; a store a URL names is kept."""
    if start < 0:
        raise ValidationError(f"start must be >= 0, got {start}",
                              hint="the number of synthetic episodes already in the store")
    if url:
        return _measure(url, n, embedder, distinct, batch, repeats, progress, query_embedder,
                        start)
    # a store of its own when no URL names one, removed however the run ends
    with tempfile.TemporaryDirectory(prefix="memstrata-latency-") as tmp:
        return _measure(f"sqlite:///{Path(tmp) / 'latency.db'}", n, embedder, distinct,
                        batch, repeats, progress, query_embedder, start)


def _measure(target: str, n: int, embedder: str, distinct: int | None, batch: int,
             repeats: int, progress: Progress | None, query_embedder: str | None,
             start: int) -> dict[str, Any]:
    from ..providers.embeddings import get_embedder

    distinct = min(distinct or n, n) or 1
    emb: Any = _TextCache(get_embedder(embedder)) if distinct < n else get_embedder(embedder)
    timed = get_embedder(query_embedder) if query_embedder else None
    if timed is not None:
        emb = _AlsoEmbedQuery(emb, timed)
    t_open = time.perf_counter()
    mem = Memory.open(target, embedder=emb)
    scope = Scope(user="bench", project="latency")
    # n == 0 measures recall on an existing store (--url) without adding anything
    # distinct texts never repeat (each has its ticket reference): no text is embedded or
    # indexed twice unless ``distinct`` asks for it
    base = list(itertools.islice(episodes(start + distinct, seed=3, unique=True), start,
                                 None)) if n else []
    t_first = t_rest = 0.0
    done = 0
    chunk: list[dict[str, Any]] = []

    def flush() -> None:
        nonlocal done, chunk, t_first, t_rest
        t0 = time.perf_counter()
        mem.episodes.append_many(chunk)
        dt = time.perf_counter() - t0
        if done < distinct:
            t_first += dt
        else:
            t_rest += dt
        done += len(chunk)
        chunk = []
        if progress:
            progress("append (with embeddings)", done, n)

    for i in range(n):
        e = base[i % distinct]
        cycle = i // distinct
        chunk.append({"scope": scope, "text": e.text, "event": e.event, "actor": "tool",
                      "source": f"{e.source}:{cycle}" if cycle else e.source,
                      "observed_at": e.observed_at + timedelta(days=400 * cycle)})
        if len(chunk) == batch or (i + 1) == distinct:
            flush()
    if chunk:
        flush()
    t0 = time.perf_counter()
    mem.recall(scope, "warm up the index")  # maps (or builds) the vector files once
    warm_s = time.perf_counter() - t0
    first_s = time.perf_counter() - t_open
    lat: list[float] = []
    empty = 0
    for _ in range(repeats):
        for q in QUERIES:
            t0 = time.perf_counter()
            res = mem.recall(scope, q, k=10)
            lat.append((time.perf_counter() - t0) * 1000)
            empty += not res.items
    query_model = timed or (emb.inner if isinstance(emb, _TextCache) else emb)
    alone: list[float] = []
    for q in QUERIES * repeats:
        t0 = time.perf_counter()
        query_model.embed_query(q)
        alone.append((time.perf_counter() - t0) * 1000)
    stats = mem.stats()
    mem.close()
    return {
        "benchmark": "latency", "backend": target.split(":", 1)[0],
        "episodes": stats.get("rows", {}).get("episodes") or done, "added": done,
        "start": start,
        "distinct_texts": distinct if n else None, "embedder": embedder,
        "write_per_s": round(distinct / t_first, 1) if t_first else None,
        "write_per_s_repeated_texts": round((n - distinct) / t_rest, 1) if t_rest else None,
        "first_query_load_s": round(warm_s, 2),
        "open_first_query_s": round(first_s, 2) if not n else None,
        "query_embedder": query_embedder or embedder,
        "embed_query_p50_ms": round(percentile(alone, 0.5), 2),
        "recall_p50_ms": round(percentile(lat, 0.5), 2),
        "recall_p95_ms": round(percentile(lat, 0.95), 2),
        # the first pass meets every query word for the first time in this process (its
        # frequency is counted, then remembered); later passes repeat the same queries
        "recall_first_pass_p95_ms": round(percentile(lat[:len(QUERIES)], 0.95), 2),
        "recall_later_passes_p95_ms": (round(percentile(lat[len(QUERIES):], 0.95), 2)
                                       if repeats > 1 else None),
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
    p.add_argument("--distinct", type=int, default=None)
    p.add_argument("--query-embedder", default=None)
    p.add_argument("--out", default="bench-results/latency.json")
    a = p.parse_args(argv)
    res = run(a.n, url=a.url, distinct=a.distinct, query_embedder=a.query_embedder)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    return res


__all__ = ["main", "run"]


if __name__ == "__main__":
    main()
