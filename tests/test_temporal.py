"""Time expressions in queries resolve to the right UTC interval."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memstrata.retrieval.temporal import window

NOW = datetime(2026, 11, 25, 15, 30, tzinfo=UTC)  # a Wednesday


@pytest.mark.parametrize(("query", "since", "until"), [
    ("what happened yesterday?", "2026-11-24", "2026-11-25"),
    ("deploys today", "2026-11-25", "2026-11-26"),
    ("what did we decide last week", "2026-11-16", "2026-11-23"),
    ("incidents this week", "2026-11-23", "2026-11-30"),
    ("budget talks last month", "2026-10-01", "2026-11-01"),
    ("what happened in May 2023", "2023-05-01", "2023-06-01"),
    ("the trip in sept 2024", "2024-09-01", "2024-10-01"),
    ("notes from 2023-05-08", "2023-05-08", "2023-05-09"),
    ("meeting on May 7, 2023", "2023-05-07", "2023-05-08"),
    ("what did we ship in 2025", "2025-01-01", "2026-01-01"),
    ("errors in the past 2 weeks", "2026-11-11", None),
])
def test_windows(query: str, since: str, until: str | None) -> None:
    w = window(query, NOW)
    assert w is not None
    assert w.since.date().isoformat() == since
    if until is not None:
        assert w.until.date().isoformat() == until
    else:
        assert w.until > NOW


def test_three_days_ago_is_centred_on_that_day() -> None:
    w = window("the outage three days ago", NOW)
    assert w is not None and w.contains(datetime(2026, 11, 22, 12, tzinfo=UTC))
    assert not w.contains(datetime(2026, 11, 15, tzinfo=UTC))


@pytest.mark.parametrize("query", ["how do we deploy", "May I deploy now?", "week numbers",
                                   "version 2023.1 release"])
def test_no_window(query: str) -> None:
    assert window(query, NOW) is None
