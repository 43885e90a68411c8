"""Shared CLI plumbing: scope/store options, opening the store, output.

Output for people fits the width it is printed at (:func:`console_width`): identifiers,
dates, statuses and scores print whole, a table whose columns cannot fit becomes one card
per row, and stored text is never read as rich markup. ``--json`` output does not depend on
the width.
"""

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
#: Columns of short values that read wrong when folded (a date one digit per line).
WHOLE = frozenset({"date", "since", "updated", "score", "status", "actor", "layer", "tier"})


def console_width() -> int | None:
    """The width people's output is laid out for: ``$COLUMNS``, else the terminal's; piped
    output (logs, CI) gets 160 columns rather than rich's 80-column default."""
    import sys

    return int(os.environ.get("COLUMNS", "0") or 0) or (None if sys.stdout.isatty() else 160)


def _console() -> Any:
    from rich.console import Console

    return Console(width=console_width())


def _cell(value: Any) -> Any:
    """A cell's text, never read as rich markup: a memory that says ``[x] done`` or
    ``[bold]`` prints those characters, not a style."""
    from rich.text import Text

    return Text("" if value is None else str(value))


#: The narrowest a folding column gets in a table; below it a row becomes a card.
FOLD_MIN = 12


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print a readable table (rich), or a note when there are no rows. Identifier columns
    (``id``, ``ref``, ``key``) and short values (dates, statuses, scores) never wrap; the
    others fold, never narrower than :data:`FOLD_MIN` (or their longest value): where the
    columns do not fit the width so, each row prints as a card instead (the identifier and
    short values on its first line, every other value labelled on a line of its own). Cell
    text is printed as it is (no markup)."""
    from rich.table import Table
    from rich.text import Text

    cells = [["" if v is None else str(v) for v in r] for r in rows]
    console = _console()
    if not cells:
        console.print(f"[dim]{title + ': ' if title else ''}nothing to show[/dim]")
        return
    whole = [c in NO_WRAP or c in WHOLE for c in columns]
    longest = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    narrowest = [n if w else min(n, FOLD_MIN) for n, w in zip(longest, whole, strict=True)]
    if sum(narrowest) + 3 * len(columns) + 1 <= console.width:
        t = Table(title=title, show_lines=False, expand=False)
        for c, w, n in zip(columns, whole, narrowest, strict=True):
            t.add_column(c, no_wrap=w, overflow="ellipsis" if w else "fold", min_width=n)
        for r in cells:
            t.add_row(*(_cell(v) for v in r))
        console.print(t)
        return
    if title:
        console.print(Text(title, style="bold"))
    for r in cells:
        console.print()
        first = [v if c in NO_WRAP else f"{c}: {v}"
                 for c, w, v in zip(columns, whole, r, strict=True) if w and v]
        if first:
            console.print(Text("  ".join(first)))
        for c, w, v in zip(columns, whole, r, strict=True):
            if not w and v:
                console.print(Text(f"  {c}: {v}"))


#: Hit columns printed whole (identifiers and short values); every other column is elastic:
#: it takes what the width leaves, down to this many characters, and ends in an ellipsis
#: rather than wrapping, so each hit stays one line of the table.
_HIT_WHOLE = ("ref", "date", "actor", "status", "score")
_HIT_MIN = {"what": 8, "excerpt": 24, "source": 10, "outcome": 9, "project": 8, "verify": 10}
#: Cell values that say "none here"; a card leaves them out.
_NOTHING = frozenset({"", "-"})


def hits_table(title: str, hits: Sequence[Any]) -> None:
    """Search and recall results for people, one layout for every command: what each item
    is, its date, excerpt, source, actor and status, the score on the 0..1 scale of every
    search path, and, where any hit has one, how an episode ended (``outcome``: an
    abandoned plan must not read like an approved decision) and what to verify before acting
    on it; where the hits' projects differ, each one's project ("-" for a user-wide record).

    Where the columns fit the width (their whole values, the elastic ones at their minimum)
    it is a table of one line per hit; narrower (an 80- or 100-column terminal: a ref alone
    is 34 characters) each hit is a short card: ref, date, what, status and score; the
    excerpt; the rest, labelled. Long values end in an ellipsis rather than wrap; ``--json``
    and ``memstrata get REF`` give them whole."""
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
    cells = [[" ".join(("" if v is None else str(v)).split()) for v in row] for row in rows]
    console = _console()
    if not cells:
        console.print(f"[dim]{title}: nothing to show[/dim]")
        return
    widths = _hit_widths(console.width, columns, cells)
    if widths is not None:
        _hits_rows(console, title, columns, cells, widths)
    else:
        _hits_cards(console, title, columns, cells)


def _hit_widths(width: int, columns: Sequence[str],
                rows: Sequence[Sequence[str]]) -> list[int] | None:
    """Each column's width when one line per hit fits ``width``, else None: whole columns
    at their longest value, elastic ones at their minimum; what is left goes first to the
    short values of the other elastic columns (up to 16 characters: an event, a project),
    then to the excerpt, then to the rest, each up to its longest value."""
    longest = [max([len(name), *(len(r[i]) for r in rows)]) for i, name in enumerate(columns)]
    widths = [n if name in _HIT_WHOLE else min(n, _HIT_MIN[name])
              for name, n in zip(columns, longest, strict=True)]
    spare = width - (3 * len(columns) + 1) - sum(widths)  # borders, a space each side
    if spare < 0:
        return None
    others = [i for i, name in enumerate(columns) if name not in _HIT_WHOLE
              and name != "excerpt"]
    excerpt = [columns.index("excerpt")]
    for chosen, cap in ((others, 16), (excerpt, None), (others, None)):
        for i in chosen:
            grow = max(0, min(spare, (longest[i] if cap is None else min(longest[i], cap))
                              - widths[i]))
            widths[i] += grow
            spare -= grow
    return widths


def _hits_rows(console: Any, title: str, columns: Sequence[str],
               rows: Sequence[Sequence[str]], widths: Sequence[int]) -> None:
    from rich.table import Table

    t = Table(title=title, show_lines=False, expand=False)
    for name, width in zip(columns, widths, strict=True):
        t.add_column(name, no_wrap=True, overflow="ellipsis", width=width,
                     justify="right" if name == "score" else "left")
    for r in rows:
        t.add_row(*(_cell(v) for v in r))
    console.print(t)


def _hits_cards(console: Any, title: str, columns: Sequence[str],
                rows: Sequence[Sequence[str]]) -> None:
    from rich.text import Text

    def line(text: str, style: str = "") -> None:
        console.print(Text(text, style=style), no_wrap=True, overflow="ellipsis", crop=True)

    line(title, "bold")
    for row in rows:
        hit = dict(zip(columns, row, strict=True))
        console.print()
        # the ref, date, score and status print whole; what the hit is ends the line
        line("  ".join(v for v in (hit["ref"], hit["date"], f"score {hit['score']}",
                                   hit["status"], hit["what"]) if v))
        line("  " + hit["excerpt"])
        rest = [f"{name}: {hit[name]}" for name in ("source", "actor", "outcome", "verify")
                if name in hit and hit[name] not in _NOTHING]
        if "project" in hit:
            rest.insert(2, f"project: {hit['project']}")
        line("  " + "  ".join(rest), "dim")


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
    "FOLD_MIN",
    "NO_WRAP",
    "WHOLE",
    "cli_config",
    "console_width",
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
