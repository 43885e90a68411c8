"""The reliability suite: faults, fuzzing, crashes, concurrency, isolation and forgetting.

Every module here runs on CI at the ``ci`` size (part of ``make test``, inside the
15-minute budget) and at the ``full`` size through ``make reliability``
(``MEMSTRATA_RELIABILITY=full``). A module reads its sizes from the ``size`` fixture and
records the figures it measured with the ``figures`` fixture; the figures land in
``build/reliability/<module>.json`` (one object per test, merged), and
``tests/reliability/report.py`` prints them as the table that RELIABILITY.md publishes.
A figure is something the test counted (records lost, typed errors, injected faults),
never a constant: the assertions are on the same numbers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SIZES = ("ci", "full")
ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "reliability"


def reliability_size() -> str:
    size = os.environ.get("MEMSTRATA_RELIABILITY", "ci")
    if size not in SIZES:
        raise pytest.UsageError(f"MEMSTRATA_RELIABILITY must be one of {SIZES}, got {size!r}")
    return size


@pytest.fixture(scope="session")
def size() -> str:
    """``ci`` (default) or ``full`` (``make reliability``)."""
    return reliability_size()


class Figures:
    """The figures one test measured, written to ``build/reliability/<module>.json``."""

    def __init__(self, module: str, test: str) -> None:
        self.module, self.test = module, test
        self.values: dict[str, Any] = {}

    def __setitem__(self, key: str, value: Any) -> None:
        self.values[key] = value

    def update(self, **values: Any) -> None:
        self.values.update(values)

    def save(self) -> None:
        if not self.values:
            return
        OUT.mkdir(parents=True, exist_ok=True)
        path = OUT / f"{self.module}.json"
        data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        data[self.test] = {"size": reliability_size(), **self.values}
        path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[Figures]:
    """Record measured figures: ``figures["lost"] = 0``; saved when the test ends."""
    fig = Figures(request.module.__name__.rpartition(".")[2], request.node.name)
    yield fig
    fig.save()
