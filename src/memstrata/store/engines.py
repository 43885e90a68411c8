"""Which engine serves a URL: a registry keyed by URL scheme.

``open_database(url)`` resolves the URL (explicit, ``$MEMSTRATA_URL``, or the embedded
default ``sqlite:///$MEMSTRATA_HOME/memory.db``) and calls the factory registered for its
scheme. The built-in engines (``sqlite``; ``postgresql``/``postgres``) are registered
through :func:`register_engine`, the hook a third-party engine uses too, so the seam is
exercised every day. An option the engine's factory does not take is an
:class:`~memstrata.errors.ArgumentError`. Factories import their driver lazily: a missing extra is a
:class:`~memstrata.errors.ConfigError` naming what to install, never an ImportError.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ArgumentError, ConfigError, MemstrataError
from .base import Database

EngineFactory = Callable[..., Database]
"""``factory(url, **options) -> Database``."""

_ENGINES: dict[str, EngineFactory] = {}


def register_engine(scheme: str, factory: EngineFactory, *, replace: bool = False) -> None:
    """Serve URLs ``SCHEME://...`` with ``factory(url, **options)``."""
    key = scheme.strip().lower().removesuffix(":")
    if not key or "/" in key:
        raise ConfigError(f"not a URL scheme: {scheme!r}")
    if key in _ENGINES and not replace:
        raise ConfigError(f"an engine for {key}:// is already registered",
                          hint="pass replace=True")
    _ENGINES[key] = factory


def engine_schemes() -> list[str]:
    """Registered URL schemes, sorted."""
    return sorted(_ENGINES)


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """``$MEMSTRATA_HOME`` or ``~/.memstrata``."""
    env = os.environ if env is None else env
    return Path(env.get("MEMSTRATA_HOME") or Path.home() / ".memstrata").expanduser().absolute()


def resolve_url(url: str | os.PathLike[str] | None) -> str:
    """The URL to open: explicit, else ``$MEMSTRATA_URL``, else the embedded default. A
    bare path (or ``sqlite:path``) means a SQLite file, relative to the working directory
    unless absolute: it becomes ``sqlite:///`` and the absolute path."""
    if url is None:
        url = os.environ.get("MEMSTRATA_URL") or None
    if url is None:
        return f"sqlite:///{default_home() / 'memory.db'}"
    text = os.fspath(url) if isinstance(url, str | os.PathLike) else None
    if not isinstance(text, str) or "\x00" in text or not text.strip():
        raise ConfigError(f"not a store URL: {url!r}",
                          hint="pass text: sqlite:///path/memory.db, a file path, or "
                               "postgresql://user@host/db")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError("the store URL is not valid UTF-8 (lone surrogate)",
                          hint="pass the URL or path as text that encodes to UTF-8") from None
    if "://" not in text:
        path = text.removeprefix("sqlite:") if text.startswith("sqlite:") else text
        if path == ":memory:":
            return "sqlite:///:memory:"
        return f"sqlite:///{Path(path).expanduser().absolute()}"
    return text


def open_database(url: str | os.PathLike[str] | None = None, **options: Any) -> Database:
    """Open the backend named by ``url`` (``sqlite:///path`` or ``postgresql://...``)."""
    resolved = resolve_url(url)
    scheme = resolved.split(":", 1)[0].lower()
    factory = _ENGINES.get(scheme)
    if factory is None:
        raise ConfigError(
            f"no engine serves {scheme}:// URLs",
            hint="use sqlite:///path/memory.db or postgresql://user@host/db"
                 + "".join(f", {s}://..." for s in engine_schemes()
                           if s not in ("sqlite", "postgresql", "postgres")),
        )
    try:
        return factory(resolved, **options)
    except TypeError as exc:  # an option the engine does not take: the caller's mistake
        unknown = [k for k in options if repr(k) in str(exc)]
        if not unknown or isinstance(exc, MemstrataError):
            raise
        raise ArgumentError(f"the {scheme}:// engine takes no option {unknown[0]!r}",
                            hint="pass only the options Memory.open and the engine name "
                                 "(help(Memory.open); SQLite: synchronous, busy_timeout_ms; "
                                 "PostgreSQL: min_size, max_size, migrate, app_role, "
                                 "timeout)") from None


def _sqlite(url: str, **options: Any) -> Database:
    from .sqlite import SQLiteDatabase

    return SQLiteDatabase.from_url(url, **options)


def _postgres(url: str, **options: Any) -> Database:
    try:
        from .postgres import PostgresDatabase
    except ImportError as exc:
        raise ConfigError("the PostgreSQL backend needs psycopg",
                          hint="pip install 'memstrata[postgres]'") from exc
    return PostgresDatabase.from_url(url, **options)


register_engine("sqlite", _sqlite)
register_engine("postgresql", _postgres)
register_engine("postgres", _postgres)


__all__ = ["EngineFactory", "default_home", "engine_schemes", "open_database", "register_engine",
           "resolve_url"]
