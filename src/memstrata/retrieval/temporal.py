"""Time expressions in a query, resolved against the clock.

``window(query, now)`` finds the first expression that names a period —
"today", "yesterday", "last week", "this month", "last year", "in May 2023",
"May 2023", "in 2023", "on 2023-05-08", "3 days ago", "past 2 weeks" — and
returns it with the UTC interval it covers. The gate uses the interval to
prefer (not require) records observed inside it, so a date-anchored question
ranks the right period first without hiding undated facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})
MONTHS["sept"] = 9
_MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))
_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30, "year": 365,
          "years": 365}
_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
        "seven": 7, "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "few": 3}


@dataclass(frozen=True)
class Window:
    """An interval named in a query: [since, until)."""

    phrase: str
    since: datetime
    until: datetime

    def contains(self, when: datetime) -> bool:
        return self.since <= when < self.until


def _day(d: datetime) -> datetime:
    return d.replace(hour=0, minute=0, second=0, microsecond=0)


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def window(query: str, now: datetime) -> Window | None:
    """The first period named in ``query``, or None."""
    q = query.lower()
    today = _day(now.astimezone(UTC))
    m = re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", q)
    if m:
        try:
            d = datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC)
            return Window(m[0], d, d + timedelta(days=1))
        except ValueError:
            pass
    m = re.search(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", q)
    if m:
        try:
            d = datetime(int(m[3]), MONTHS[m[1]], int(m[2]), tzinfo=UTC)
            return Window(m[0], d, d + timedelta(days=1))
        except ValueError:
            pass
    m = re.search(rf"\b(?:in\s+|during\s+)?({_MONTH_RE})\.?,?\s+(\d{{4}})\b", q)
    if m:
        start, end = _month(int(m[2]), MONTHS[m[1]])
        return Window(m[0].strip(), start, end)
    m = re.search(r"\b(?:in|during)\s+((?:19|20)\d{2})\b", q)
    if m:
        y = int(m[1])
        return Window(m[0], datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC))
    if re.search(r"\btoday\b", q):
        return Window("today", today, today + timedelta(days=1))
    if re.search(r"\byesterday\b", q):
        return Window("yesterday", today - timedelta(days=1), today)
    m = re.search(r"\b(this|last|past|previous)\s+(week|month|year)\b", q)
    if m:
        which, unit = m[1], m[2]
        if unit == "week":
            start = today - timedelta(days=today.weekday())
            span = (start, start + timedelta(days=7))
            if which != "this":
                span = (start - timedelta(days=7), start)
        elif unit == "month":
            span = _month(today.year, today.month)
            if which != "this":
                prev = span[0] - timedelta(days=1)
                span = _month(prev.year, prev.month)
        else:
            span = (datetime(today.year, 1, 1, tzinfo=UTC),
                    datetime(today.year + 1, 1, 1, tzinfo=UTC))
            if which != "this":
                span = (datetime(today.year - 1, 1, 1, tzinfo=UTC), span[0])
        return Window(m[0], *span)
    num = "|".join(sorted((re.escape(k) for k in _NUM), key=len, reverse=True))
    m = re.search(rf"\b(\d+|{num})\s+(days?|weeks?|months?|years?)\s+ago\b", q)
    if m:
        n = int(m[1]) if m[1].isdigit() else _NUM[m[1]]
        center = today - timedelta(days=n * _UNITS[m[2]])
        slack = timedelta(days=max(1, _UNITS[m[2]] // 2))
        return Window(m[0], center - slack, center + slack + timedelta(days=1))
    m = re.search(rf"\b(?:past|last)\s+(\d+|{num})\s+(days|weeks|months|years)\b", q)
    if m:
        n = int(m[1]) if m[1].isdigit() else _NUM[m[1]]
        return Window(m[0], today - timedelta(days=n * _UNITS[m[2]]), now + timedelta(seconds=1))
    return None


__all__ = ["Window", "window"]
