"""Speed of the sensitivity scanner and the injection detector: prints a summary and writes JSON.

Measures per-call latency (median, p95, mean, in CPU milliseconds) of
``sensitivity.scan`` and ``injection.detect_injection`` on 4,000-character
texts of three kinds:

- ``prose``: memory-like sentences (no secret, no injection), the common case,
- ``dense``: the harmless look-alikes of ``tests/data/secrets_corpus.yaml``
  concatenated (hashes, UUIDs, placeholders, key names: every pre-filter
  hint present, the worst realistic case),
- ``docs``: chunks of the Markdown/reST/text files installed in this
  interpreter's site-packages (real third-party documentation),
- ``runs``: long runs that make a careless pattern backtrack (a base64 blob, a
  letter-spaced line, a value after "password is") inside text that is not all
  ASCII, so the folded form is read too: each must cost what prose costs (a
  look-alike pattern with nested repetition took 30 s on 3,000 characters).

With ``--docs-scan`` it also runs both detectors over every such file (split
into chunks of about 1,500 characters, like tool observations) and reports
how many chunks raise a secret finding or an injection finding: on this
documentation both should be rare, and each one is worth reading.

Usage::

    python benchmarks/scan_speed.py [--out bench-results/scan_speed.json]
        [--repeats 200] [--docs-scan]

CPU time is used so that other processes on a shared machine distort the
figures less; the JSON records the CPU count and load average anyway.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
try:
    from memstrata.governance.injection import detect_injection
    from memstrata.governance.sensitivity import scan
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))
    from memstrata.governance.injection import detect_injection
    from memstrata.governance.sensitivity import scan

SIZE = 4000
SENTENCES = [
    "Alice prefers dark mode in the editor and British spelling in customer-facing pages.",
    "The billing service needs a second approval for refunds above 500 EUR.",
    "We deployed PostgreSQL 16 with pgvector on staging last week, ticket #4821.",
    "The release notes for v17 go out on Tuesday after the 10:00 standup.",
    "Our CI rejected the preview build because it ran out of memory again.",
    "Bob reviewed the onboarding flow after the incident review on 2024-05-02.",
    "The on-call rotation changes every Monday morning; Carol owns the schedule.",
    "Use the staging database for load tests and never the production one.",
]


def _prose(rng: random.Random) -> str:
    out = ""
    while len(out) < SIZE:
        out += rng.choice(SENTENCES) + " "
    return out[:SIZE]


def _dense() -> str:
    corpus = yaml.safe_load((ROOT / "tests/data/secrets_corpus.yaml").read_text("utf-8"))
    text = "\n".join(h["text"] for h in corpus["harmless"])
    return (text * (SIZE // len(text) + 1))[:SIZE]


def _doc_files() -> list[Path]:
    site = Path(sysconfig.get_paths()["purelib"])
    return sorted(p for ext in ("md", "rst", "txt") for p in site.rglob(f"*.{ext}"))


def _docs(files: list[Path], limit: int) -> list[str]:
    chunks: list[str] = []
    for path in files:
        text = path.read_text("utf-8", errors="replace")
        chunks.extend(text[i:i + SIZE] for i in range(0, len(text) - SIZE, SIZE))
        if len(chunks) >= limit:
            break
    return chunks[:limit]


def _latency(fn: Callable[[str], object], texts: list[str], repeats: int) -> dict[str, float]:
    for text in texts[:5]:
        fn(text)  # warm caches and compiled patterns
    samples = []
    for i in range(repeats):
        text = texts[i % len(texts)]
        t0 = time.process_time()
        fn(text)
        samples.append((time.process_time() - t0) * 1e3)
    samples.sort()
    return {
        "median_ms": round(statistics.median(samples), 4),
        "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 4),
        "mean_ms": round(statistics.fmean(samples), 4),
    }


def _docs_scan(files: list[Path]) -> dict[str, Any]:
    chunks = 0
    secret_chunks = 0
    injection_chunks = 0
    detectors: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    chars = 0
    t0 = time.process_time()
    for path in files:
        text = path.read_text("utf-8", errors="replace")
        chars += len(text)
        buf = ""
        paragraphs = [*re.split(r"\n\s*\n", text), ""]
        for para in paragraphs:
            if (len(buf) + len(para) > 1500 or not para) and buf.strip():
                chunks += 1
                report = scan(buf)
                found = detect_injection(buf)
                secret_chunks += report.has_secret
                injection_chunks += bool(found)
                detectors.update(f.detector for f in report.secrets)
                rules.update(f.rule for f in found)
                buf = ""
            buf += para + "\n\n"
    return {
        "files": len(files),
        "megabytes": round(chars / 1e6, 2),
        "cpu_seconds": round(time.process_time() - t0, 2),
        "chunks": chunks,
        "chunks_with_secret": secret_chunks,
        "chunks_with_injection": injection_chunks,
        "secret_detectors": dict(detectors),
        "injection_rules": dict(rules),
    }


def _runs() -> list[str]:
    """Texts of :data:`SIZE` characters that are one long run each (see the docstring)."""
    n = SIZE - 20
    return ["Café notes: " + "QUJD" * (n // 4), "Café: " + "a " * (n // 2),
            "Passwort, password is " + "x" * n, "Café " + "sk_live_" + "A1" * (n // 2)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench-results" / "scan_speed.json"))
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--docs-scan", action="store_true")
    args = parser.parse_args()

    rng = random.Random(7)
    files = _doc_files()
    inputs = {
        "prose": [_prose(rng) for _ in range(20)],
        "dense": [_dense()],
        "docs": _docs(files, 200) or [_prose(rng)],
        "runs": _runs(),
    }
    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "text_chars": SIZE,
        "scan": {k: _latency(scan, v, args.repeats) for k, v in inputs.items()},
        "detect_injection": {k: _latency(detect_injection, v, args.repeats)
                             for k, v in inputs.items()},
    }
    if args.docs_scan:
        results["docs_scan"] = _docs_scan(files)

    for name in ("scan", "detect_injection"):
        for kind, row in results[name].items():
            print(f"{name:17s} {kind:6s} 4,000 chars: median {row['median_ms']:.3f} ms, "
                  f"p95 {row['p95_ms']:.3f} ms, mean {row['mean_ms']:.3f} ms")
    if "docs_scan" in results:
        d = results["docs_scan"]
        print(f"docs scan: {d['files']} files, {d['megabytes']} MB, {d['chunks']} chunks, "
              f"{d['chunks_with_secret']} with a secret {d['secret_detectors']}, "
              f"{d['chunks_with_injection']} with an injection {d['injection_rules']}, "
              f"{d['cpu_seconds']} s CPU")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
