"""The ``memstrata`` command line: a thin adapter over the library.

Each command opens the store, makes one library call and prints the result:
a readable table for people, ``--json`` for machines. Library errors become
one-line messages with a hint at this boundary (exit status 1; 2 for usage).
Command modules in this package register themselves through a ``register``
function, so built-in commands use the same seam a plugin would. They must
not import heavy modules (models, servers) at import time: the CLI starts
in well under half a second.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import Any

import click

from ..errors import MemstrataError

HELP = """memstrata: layered, governed memory for LLM agents.

\b
Start here:
  memstrata demo                                  the multi-session story, step by step
  memstrata init                                  create the store ($MEMSTRATA_HOME)
\b
Write (every durable write goes through the write policy):
  memstrata facts propose "Prefers async standups" --kind preference \\
      --subject alice --attribute standup_format --actor user --source chat:2026-08-01 --user alice
  memstrata episodes append "Deploy failed: stale cache" --event deploy_failed \\
      --actor tool --source ci:run/812 --user alice
  memstrata checkpoint save release-v17 --objective "Ship notes" --next-action "collect PRs"
  memstrata extract session.json --user alice     end-of-session extraction
\b
Read (filtered by scope, readers, status and freshness before ranking):
  memstrata facts list --user alice               current facts (identity first)
  memstrata episodes search "deploy" --user alice
  memstrata recall "how do we deploy?" --decision side_effect --user alice
  memstrata context --task release-v17 --query "release notes" --user alice
\b
People in the loop:
  memstrata review list / approve ID --reviewer NAME / reject ID --reason WHY
  memstrata procedures add FILE.yaml / activate NAME VERSION --by NAME / rollback NAME --by NAME
  memstrata export --markdown DIR / import DIR / migrate MEMORY.md --to DIR / lint DIR
\b
Agents and operations:
  memstrata mcp --user alice --project docs-site  MCP server (stdio; --http for HTTP)
  memstrata serve                                 REST API + MCP + inspector, with API keys
  memstrata keys create --role agent --user alice / list / revoke ID
  memstrata tools --format openai                 tool schemas for function calling
  memstrata forget --match "peanut" --user alice  delete everywhere, reported
  memstrata doctor / stats / sweep / reindex / config show
  memstrata eval evals/starter / bench store|latency|locomo

Every command takes --user/--project/--tenant/--agent and --url; reads take --json.
The store is $MEMSTRATA_HOME/memory.db (default ~/.memstrata) unless --url or
$MEMSTRATA_URL names another (sqlite:///path or postgresql://...).
"""


class MemstrataGroup(click.Group):
    """A click group that turns library errors into clear one-line messages."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MemstrataError as exc:
            kind = type(exc).__name__
            msg = f"{kind}: {exc.message}"
            if exc.hint:
                msg += f"\n  hint: {exc.hint}"
            raise click.ClickException(msg) from exc


@click.group(cls=MemstrataGroup, help=HELP, context_settings={"max_content_width": 100})
@click.version_option(package_name="memstrata")
def cli() -> None:
    pass


def _register_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(cli)


_register_all()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv if argv is not None else sys.argv[1:], prog_name="memstrata")


__all__ = ["cli", "main"]
