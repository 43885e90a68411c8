"""Time for memstrata: timezone-aware UTC only, behind an injectable clock.

Every layer asks ``clock.now()`` instead of calling ``datetime.now`` so that
TTL, expiry and freshness can be tested by moving a :class:`ManualClock`.
Naive datetimes are refused at the boundary (:func:`ensure_utc`).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol

from .errors import ValidationError


class Clock(Protocol):
    """Anything with ``now() -> aware UTC datetime``."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to; for tests, demos and evals."""

    def __init__(self, start: datetime | str | None = None) -> None:
        self._now = ensure_utc(start) if start is not None else datetime.now(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, when: datetime | str) -> None:
        with self._lock:
            self._now = ensure_utc(when)

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        """Move forward by ``delta`` or by ``timedelta(**kwargs)``; returns the new time."""
        if delta is not None and (kwargs or not isinstance(delta, timedelta)):
            raise ValidationError("advance takes a timedelta or keyword units, not "
                                  f"{type(delta).__name__}", hint="e.g. advance(hours=1)")
        try:
            step = delta if delta is not None else timedelta(**kwargs)
            with self._lock:
                self._now = self._now + step
                return self._now
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValidationError(f"cannot advance the clock by {kwargs or delta}: {exc}",
                                  hint="e.g. advance(hours=1)") from None


def ensure_utc(value: datetime | str, *, field: str = "datetime") -> datetime:
    """Parse/normalise to an aware UTC datetime; naive input is a ValidationError."""
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            value = datetime.fromisoformat(text)
        except ValueError as exc:
            raise ValidationError(
                f"{field}: {value!r} is not an ISO-8601 date or datetime",
                hint="use e.g. 2026-05-01 or 2026-05-01T09:30:00+00:00",
            ) from exc
        if value.tzinfo is None:
            # A bare date/time string is read as UTC: it names a day, not a local wall time.
            value = value.replace(tzinfo=UTC)
    if not isinstance(value, datetime):
        raise ValidationError(f"{field}: expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(
            f"{field}: naive datetime {value.isoformat()} has no timezone",
            hint="pass an aware datetime, e.g. datetime(..., tzinfo=UTC)",
        )
    return value.astimezone(UTC)


def to_text(value: datetime) -> str:
    """Fixed-width ISO text that sorts lexicographically in time order."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def from_text(value: str | datetime | None) -> datetime | None:
    """Inverse of :func:`to_text`; passes datetimes (from PostgreSQL) through."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime.fromisoformat(value).astimezone(UTC)


__all__ = ["Clock", "ManualClock", "SystemClock", "ensure_utc", "from_text", "to_text"]
