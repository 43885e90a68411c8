"""Named schema migrations, recorded in a ``migrations`` table: one registry type for every
engine.

Each engine's schema module builds one :class:`Migrations` and decorates its migration
functions with it, in order (``@MIGRATIONS.register``); the engine applies
:meth:`Migrations.pending` ones inside one transaction on open and records each name. A
name is never reused or re-applied; a migration is never edited once released (add a new
one instead).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

F = TypeVar("F", bound=Callable[..., None])


class Migrations(Generic[F]):
    """An ordered list of named migration functions of one engine."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self._items: list[tuple[str, F]] = []

    def register(self, fn: F) -> F:
        """Decorator: append ``fn`` under its function name (``m001_initial``, ...)."""
        name = fn.__name__
        if any(n == name for n, _ in self._items):
            raise ValueError(f"{self.engine} migration {name} is registered twice")
        if self._items and name <= self._items[-1][0]:
            raise ValueError(f"{self.engine} migration {name} sorts before "
                             f"{self._items[-1][0]}: names must increase")
        self._items.append((name, fn))
        return fn

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self._items]

    def pending(self, done: Iterable[str]) -> list[tuple[str, F]]:
        """The migrations not in ``done``, in order."""
        applied = set(done)
        return [(n, f) for n, f in self._items if n not in applied]

    def __iter__(self) -> Iterator[tuple[str, F]]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


__all__ = ["Migrations"]
