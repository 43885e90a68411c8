"""Print the figures of the last reliability run (``build/reliability/*.json``) as tables.

Usage: ``python tests/reliability/report.py [--json]``. ``make reliability`` runs it after
the suite; RELIABILITY.md publishes its output with the command that produced it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "build" / "reliability"


def main(argv: list[str]) -> int:
    files = sorted(OUT.glob("*.json"))
    if not files:
        print(f"no figures in {OUT}: run `make reliability` first", file=sys.stderr)
        return 1
    data = {f.stem: json.loads(f.read_text()) for f in files}
    if "--json" in argv:
        print(json.dumps(data, indent=2, sort_keys=True))
        return 0
    for module, tests in data.items():
        print(f"\n## {module}")
        for test, values in sorted(tests.items()):
            shown = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
            print(f"- {test}: {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
