"""Scale-out benchmark: concurrent writer processes, then recall latency, on any store URL.

``writers(url, n)`` starts ``n`` processes that open the store themselves (as separate
memstrata workers would), wait for a common start time, and append ``per_writer``
episodes each, one transaction per episode, into one scope. Reported: total episodes
per second from the common start to the last writer's finish, and the slowest and
fastest writer. ``run(url)`` measures 1 and 16 writers, then hands over to
:func:`memstrata.bench.latency.run` for batched writes with embeddings and recall
p50/p95 (``memstrata bench latency --url ...`` runs that part alone). Prints and
writes JSON; asserts nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..memory import Memory
from ..models import Scope
from .synthetic import episodes

_START_DELAY_S = 5.0  # time for every process to import memstrata and connect


def _writer(url: str, tag: str, per_writer: int, start: float) -> None:
    """One writer process: open the store, wait for the start, append, print timings."""
    mem = Memory.open(url, embedder=None)
    scope = Scope(user="bench", project="writers")
    items = list(episodes(per_writer, seed=int(tag.lstrip("w"))))
    time.sleep(max(0.0, start - time.time()))
    t0 = time.time()
    for e in items:
        mem.episodes.append(scope, text=f"{tag}: {e.text}", event=e.event, actor="tool",
                            source=e.source, observed_at=e.observed_at)
    print(json.dumps([tag, t0, time.time()]), flush=True)
    mem.close()


_WRITER = ("import sys; from memstrata.bench.pg_latency import _writer; "
           "_writer(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))")


def writers(url: str, n_writers: int, per_writer: int = 1000) -> dict[str, Any]:
    """Append throughput of ``n_writers`` processes, each with its own connection(s)."""
    start = time.time() + _START_DELAY_S + 0.2 * n_writers
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, url, f"w{i:02d}",
                               str(per_writer), str(start)], stdout=subprocess.PIPE, text=True)
             for i in range(n_writers)]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise RuntimeError(f"writer process exited with {p.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    first = min(r[1] for r in results)
    last = max(r[2] for r in results)
    per = [per_writer / (r[2] - r[1]) for r in results]
    return {"writers": n_writers, "episodes": n_writers * per_writer,
            "seconds": round(last - first, 2),
            "episodes_per_s": round(n_writers * per_writer / (last - first), 1),
            "per_writer_per_s_min": round(min(per), 1),
            "per_writer_per_s_max": round(max(per), 1)}


def run(url: str, *, n: int = 100_000, writer_counts: Sequence[int] = (1, 16),
        per_writer: int = 1000, embedder: str = "minilm") -> dict[str, Any]:
    """Writers first (no embedder: the store's own cost), then recall at ``n`` episodes."""
    from .latency import run as latency

    out: dict[str, Any] = {"benchmark": "scale-out", "backend": url.split(":", 1)[0],
                           "writers": [writers(url, w, per_writer) for w in writer_counts]}
    if n:
        out["latency"] = latency(n, url=url, embedder=embedder)
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    import argparse

    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("url")
    p.add_argument("--n", type=int, default=100_000, help="episodes for recall (0: skip)")
    p.add_argument("--writers", default="1,16")
    p.add_argument("--per-writer", type=int, default=1000)
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--out", default="bench-results/scale-out.json")
    a = p.parse_args(argv)
    res = run(a.url, n=a.n, writer_counts=[int(w) for w in a.writers.split(",")],
              per_writer=a.per_writer, embedder=a.embedder)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()


__all__ = ["main", "run", "writers"]
