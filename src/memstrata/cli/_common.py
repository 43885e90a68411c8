"""Shared CLI plumbing: scope/store options, opening the store, output."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

F = Callable[..., Any]


def store_options(fn: F) -> F:
    """--url plus the scope flags every command shares."""

    @click.option("--url", envvar="MEMSTRATA_URL", default=None,
                  help="Store URL (sqlite:///path or postgresql://...); default: the "
                       "embedded file under $MEMSTRATA_HOME.")
    @click.option("--tenant", envvar="MEMSTRATA_TENANT", default="default", show_default=True,
                  help="Tenant the request belongs to.")
    @click.option("--user", "user", envvar="MEMSTRATA_USER", default=None, help="User scope.")
    @click.option("--project", envvar="MEMSTRATA_PROJECT", default=None, help="Project scope.")
    @click.option("--agent", envvar="MEMSTRATA_AGENT", default=None, help="Agent scope.")
    @functools.wraps(fn)
    def wrapper(*args: Any, url: str | None, tenant: str, user: str | None,
                project: str | None, agent: str | None, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        ctx.meta["memstrata.url"] = url
        ctx.meta["memstrata.scope"] = {"tenant": tenant, "user": user, "project": project,
                                       "agent": agent}
        return fn(*args, **kwargs)

    return wrapper


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")(fn)


def cli_config() -> Any:
    """The effective configuration: flags given on the command line > environment >
    ``$MEMSTRATA_HOME/config.toml`` > defaults (:mod:`memstrata.config`)."""
    from click.core import ParameterSource

    from ..config import load_config

    flags: dict[str, Any] = {}
    ctx: click.Context | None = click.get_current_context()
    while ctx is not None:  # a group's flags (`review --url X list`), the command's first
        for name in ("url", "tenant", "user", "project", "agent"):
            if name not in flags and ctx.get_parameter_source(name) == \
                    ParameterSource.COMMANDLINE:
                flags[name] = ctx.params.get(name)
        ctx = ctx.parent
    return load_config(flags)


def current_scope() -> Any:
    return cli_config().scope()


def open_memory(*, create: bool = False, **kwargs: Any) -> Any:
    """Open the configured store (--url, $MEMSTRATA_URL, config file, or the embedded default).

    A SQLite file named by --url, ``$MEMSTRATA_URL`` or the config file that does not
    exist is created only by a command that writes something into it (``create=True``:
    init, propose, append, save...); any other command refuses it with a ConfigError: a
    mistyped URL would otherwise show an empty new store as the answer ("nothing to show")
    and leave the file behind. The default store under ``$MEMSTRATA_HOME`` is created on
    first use by any command (a fresh install's memory is empty, truly)."""
    from ..memory import Memory

    ctx = click.get_current_context()
    cfg = cli_config()
    if not create and cfg.url and cfg.sources.get("url", "default") != "default":
        _refuse_missing_file(cfg.url)
    mem = Memory.from_config(cfg, **kwargs)
    ctx.call_on_close(mem.close)
    return mem


def _refuse_missing_file(url: str | None) -> None:
    from ..errors import ConfigError
    from ..store.engines import resolve_url

    resolved = resolve_url(url)
    if not resolved.startswith("sqlite:"):
        return
    from pathlib import Path

    from ..store.sqlite import url_file

    path, _ = url_file(resolved)
    if isinstance(path, Path) and not path.exists():
        raise ConfigError(f"no memstrata store at {path}",
                          hint="create it with `memstrata init` (or a command that writes, "
                               "e.g. `memstrata episodes append`), or point --url or "
                               "$MEMSTRATA_URL at the store you meant")


def to_jsonable(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    return obj


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False, default=str))


#: Columns whose values are identifiers: printed whole on one line (copy-pasteable).
NO_WRAP = frozenset({"id", "ref", "key"})


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print a readable table (rich), or a note when there are no rows. Identifier columns
    (``id``, ``ref``, ``key``) never wrap; the others fold."""
    from rich.console import Console
    from rich.table import Table

    rows = list(rows)
    import sys

    # piped output (logs, CI) is not squeezed into rich's 80-column default
    width = int(os.environ.get("COLUMNS", "0")) or (None if sys.stdout.isatty() else 160)
    console = Console(width=width)
    if not rows:
        console.print(f"[dim]{title + ': ' if title else ''}nothing to show[/dim]")
        return
    t = Table(title=title, show_lines=False, expand=False)
    for c in columns:
        if c in NO_WRAP:
            t.add_column(c, no_wrap=True, min_width=26)
        else:
            t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r))
    console.print(t)


def hits_table(title: str, hits: Sequence[Any]) -> None:
    """Search and recall results for people, one layout for every command: what each item
    is, its date, excerpt, source, actor and status, the score on the 0..1 scale of every
    search path, and, where any hit has one, how an episode ended (``outcome``: an
    abandoned plan must not read like an approved decision) and what to verify before acting
    on it; where the hits' projects differ, each one's project ("-" for a user-wide record)."""
    columns = ["ref", "date", "what", "excerpt", "source", "actor", "status"]
    rows = [[h.ref, short_date(h.date), h.what, h.excerpt, h.source, h.actor, h.status]
            for h in hits]
    optional: tuple[tuple[str, Callable[[Any], str | None]], ...] = (
        ("outcome", lambda h: h.outcome),
        ("project", lambda h: h.scope.project if h.scope is not None else None),
        ("verify", lambda h: h.verify_reason))
    for name, value in optional:
        values = [value(h) for h in hits]
        if any(values) and (name != "project" or len(set(values)) > 1):
            columns.append(name)
            for row, v in zip(rows, values, strict=True):
                row.append(v if v is not None else "-")
    columns.append("score")
    for row, h in zip(rows, hits, strict=True):
        row.append(f"{h.score:.2f}")
    table(title, columns, rows)


def login_name() -> str:
    """Who is at the keyboard: the person a review is attributed to by default."""
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return os.environ.get("USER") or "reviewer"


def short_date(value: Any) -> str:
    return value.date().isoformat() if value is not None else ""


__all__ = [
    "NO_WRAP",
    "cli_config",
    "current_scope",
    "emit_json",
    "hits_table",
    "json_option",
    "login_name",
    "open_memory",
    "short_date",
    "store_options",
    "table",
    "to_jsonable",
]
