"""Load benchmark of ``memstrata serve``: concurrent clients over real HTTP, on any store URL.

``run(url, clients=16, ...)`` seeds the store (episodes and facts in ``users`` scopes, through
the library), starts ``memstrata serve`` on it as a separate process (its own interpreter,
as in production), creates one agent key per user, then runs ``clients`` concurrent
clients (threads with their own HTTP connection), each sending ``requests`` requests that
alternate ``/v1/recall`` and ``/v1/facts/propose`` for its user. Reported per operation:
requests per second over the whole run, p50/p95/p99 latency as the client saw it, the
status codes; and the server's peak RSS (``VmHWM`` from ``/proc``). Prints and writes
JSON; asserts nothing.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ..memory import Memory
from ..models import Scope
from .synthetic import episodes

_QUERIES = ("what failed in the last deploy?", "which database did we pick?",
            "who owns the billing service?", "how do we roll back a release?",
            "what does the user prefer for standups?")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _peak_rss_mb(pid: int) -> float | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"VmHWM:\s+(\d+) kB", text)
    return round(int(found.group(1)) / 1024, 1) if found else None


def _seed(url: str, users: int, per_user: int, embedder: str | None) -> None:
    with Memory.open(url, embedder=embedder) as mem:
        for u in range(users):
            scope = Scope(tenant="bench", user=f"u{u}")
            mem.episodes.append_many([
                {"scope": scope, "text": e.text, "event": e.event, "actor": "tool",
                 "source": e.source, "observed_at": e.observed_at}
                for e in episodes(per_user, seed=u)])
            for i in range(20):
                mem.facts.propose(scope, claim=f"Service s{i} of u{u} is owned by team t{i % 4}",
                                  kind="system_fact", subject=f"s{i}", attribute="owner",
                                  actor="user", source="bench")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(url: str, *, clients: int = 16, requests: int = 200, users: int = 4,
        per_user: int = 2000, embedder: str | None = "minilm",
        out: str | Path | None = None) -> dict[str, Any]:
    """Measure (see the module docstring); returns the figures."""
    import httpx

    from ..interfaces.service.keys import KeyStore

    _seed(url, users, per_user, embedder)
    with Memory.open(url, embedder=None) as mem:
        keys = KeyStore(mem.db, mem.clock)
        tokens = [keys.create("bench", role="agent", users=[f"u{u}"], label="bench",
                              rate_per_minute=1_000_000)[1] for u in range(users)]
    port = _free_port()
    env = {**os.environ, "MEMSTRATA_URL": url, "MEMSTRATA_EMBEDDER": embedder or "none"}
    server = subprocess.Popen(
        [sys.executable, "-c", "from memstrata.cli import main; main()", "serve", "--port",
         str(port), "--tenant", "bench", "--no-admin-key", "--log-level", "warning",
         "--rate", "1000000"], env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("memstrata serve did not start")
            time.sleep(0.2)
        # one warm-up recall per user (model load, first query of the vector index)
        for u, token in enumerate(tokens):
            httpx.post(f"{base}/v1/recall", json={"query": _QUERIES[u % len(_QUERIES)]},
                       headers={"Authorization": f"Bearer {token}"}, timeout=300)
        latencies: dict[str, list[float]] = {"recall": [], "propose": []}
        codes: dict[str, Counter[int]] = {"recall": Counter(), "propose": Counter()}
        lock = threading.Lock()
        start = threading.Barrier(clients + 1)

        def client(c: int) -> None:
            token = tokens[c % users]
            with httpx.Client(base_url=base, timeout=120,
                              headers={"Authorization": f"Bearer {token}"}) as http:
                start.wait()
                for i in range(requests):
                    if i % 2 == 0:
                        op, path = "recall", "/v1/recall"
                        body: dict[str, Any] = {"query": _QUERIES[(c + i) % len(_QUERIES)]}
                    else:
                        op, path = "propose", "/v1/facts/propose"
                        body = {"claim": f"Client {c} noted item {i} is done",
                                "kind": "system_fact", "subject": f"c{c}",
                                "attribute": f"item{i}", "source": "bench"}
                    t0 = time.perf_counter()
                    res = http.post(path, json=body)
                    dt = (time.perf_counter() - t0) * 1000
                    with lock:
                        latencies[op].append(dt)
                        codes[op][res.status_code] += 1

        threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
        for t in threads:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        rss = _peak_rss_mb(server.pid)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    result: dict[str, Any] = {
        "bench": "serve", "url": url.split("@")[-1], "clients": clients,
        "requests_per_client": requests, "users": users, "episodes_per_user": per_user,
        "embedder": embedder, "wall_s": round(wall, 2),
        "total_rps": round(sum(len(v) for v in latencies.values()) / wall, 1),
        "server_peak_rss_mb": rss, "ops": {}}
    for op, values in latencies.items():
        result["ops"][op] = {
            "requests": len(values), "rps": round(len(values) / wall, 1),
            "p50_ms": round(statistics.median(values), 1),
            "p95_ms": round(_percentile(values, 0.95), 1),
            "p99_ms": round(_percentile(values, 0.99), 1),
            "status": {str(k): v for k, v in sorted(codes[op].items())}}
    if out is not None:
        import json

        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2))
    return result


__all__ = ["run"]
