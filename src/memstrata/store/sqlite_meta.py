"""The ``meta`` table of a SQLite store: its key-value settings, written only here.

Contract: :func:`write_meta` sets a key (insert or replace), :func:`clear_meta` removes it
(only while it holds ``value``, when one is given: a process clears only the value it
read). Each takes what runs SQL on the store: a transaction of
:class:`~memstrata.store.sqlite.SQLiteDatabase` or its own connection. Reads are plain
``SELECT value FROM meta WHERE key = ?``.
Keys in use: ``embedding_model``, ``vector_rowid``, ``vector_generation``, ``store_id``
(:mod:`.sqlite_vectors`) and ``compaction_due`` (:mod:`.sqlite`).
"""

from __future__ import annotations

from typing import Any, Protocol


class _Runs(Protocol):
    def execute(self, sql: str, params: Any = ..., /) -> Any: ...


def write_meta(runner: _Runs, key: str, value: str) -> None:
    """Set ``key`` to ``value``."""
    runner.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                   "SET value = excluded.value", (key, value))


def clear_meta(runner: _Runs, key: str, value: str | None = None) -> None:
    """Remove ``key`` (only while it holds ``value``, when one is given)."""
    if value is None:
        runner.execute("DELETE FROM meta WHERE key = ?", (key,))
    else:
        runner.execute("DELETE FROM meta WHERE key = ? AND value = ?", (key, value))


__all__ = ["clear_meta", "write_meta"]
