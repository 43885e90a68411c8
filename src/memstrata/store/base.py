"""The backend seam: a transactional SQL database with lexical and vector search.

Contract:
- ``transaction(tenant)`` yields a :class:`Tx`; everything inside commits
  together or not at all. SQLite opens it with ``BEGIN IMMEDIATE``;
  PostgreSQL sets ``app.tenant`` with ``SET LOCAL`` so row-level security
  applies. ``maintenance=True`` allows the deletes that the append-only
  guards otherwise refuse (forget and retention only).
- SQL is written with ``?`` placeholders; rows come back as dicts.
- ``text_search`` ranks rows of ``episodes`` or ``facts`` by BM25-like
  relevance *within* a caller-supplied filter (scope, readers, status), so
  filtering always happens before ranking.
- Lower-level driver errors are translated to :class:`BackendError`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigError

Row = dict[str, Any]


class Tx(Protocol):
    """One open transaction."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; returns the affected row count."""
        ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None: ...

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...


class Database(Protocol):
    """What a backend offers to the layers."""

    dialect: str
    url: str

    def transaction(
        self, tenant: str, *, write: bool = True, maintenance: bool = False
    ) -> AbstractContextManager[Tx]: ...

    def readers_clause(self, column: str) -> str:
        """SQL true when the principal (one ``?`` parameter) may read the row."""
        ...

    def text_search(
        self,
        tx: Tx,
        table: str,
        query: str,
        where: str,
        params: Sequence[Any],
        limit: int,
        drop: Sequence[str] = (),
    ) -> list[tuple[str, float]]:
        """(id, score) for rows of ``table`` matching ``query`` and ``where`` (alias ``r``);
        higher score is better."""
        ...

    def index_text(self, tx: Tx, table: str, record_id: str, tenant: str, text: str,
                   context: str = "") -> None:
        """Add or replace the lexical index entry of one row; ``context`` (neighbouring
        records of the same thread) is indexed in a second, lower-weighted column."""
        ...

    def compact(self) -> None:
        """After a forget: rewrite indexes and logs so deleted text leaves the files."""
        ...

    def stats(self) -> dict[str, Any]: ...

    def verify(self) -> list[str]:
        """Engine-level integrity problems (empty list when healthy)."""
        ...

    def close(self) -> None: ...


def default_home() -> Path:
    """``$MEMSTRATA_HOME`` or ``~/.memstrata``."""
    return Path(os.environ.get("MEMSTRATA_HOME") or Path.home() / ".memstrata")


def resolve_url(url: str | os.PathLike[str] | None) -> str:
    """The URL to open: explicit, else ``$MEMSTRATA_URL``, else the embedded default."""
    if url is None:
        url = os.environ.get("MEMSTRATA_URL") or None
    if url is None:
        return f"sqlite:///{default_home() / 'memory.db'}"
    text = os.fspath(url)
    if "://" not in text:
        return f"sqlite:///{Path(text).expanduser()}"
    return text


def open_database(url: str | os.PathLike[str] | None = None, **options: Any) -> Database:
    """Open the backend named by ``url`` (``sqlite:///path`` or ``postgresql://...``)."""
    resolved = resolve_url(url)
    if resolved.startswith("sqlite:"):
        from .sqlite import SQLiteDatabase

        return SQLiteDatabase.from_url(resolved, **options)
    if resolved.startswith(("postgresql:", "postgres:")):
        try:
            from .postgres import PostgresDatabase
        except ImportError as exc:
            raise ConfigError(
                "the PostgreSQL backend needs psycopg",
                hint="pip install 'memstrata[postgres]'",
            ) from exc
        db: Database = PostgresDatabase.from_url(resolved, **options)
        return db
    raise ConfigError(
        f"unknown database URL {resolved!r}",
        hint="use sqlite:///path/memory.db or postgresql://user@host/db",
    )


def iter_chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


__all__ = ["Database", "Row", "Tx", "default_home", "iter_chunks", "open_database", "resolve_url"]
