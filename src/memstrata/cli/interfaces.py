"""CLI: the interfaces around the library — mcp, tools, export/import/migrate/lint, demo, config.

Each command stays an adapter: resolve the configuration (flags > env >
config file > defaults, :mod:`memstrata.config`), make one library call,
print. Heavy modules (the MCP SDK, rich progress) load inside the commands.
"""

from __future__ import annotations

import getpass
import importlib.util
import json
from pathlib import Path
from typing import Any

import click

from ._common import cli_config, emit_json, json_option, open_memory, store_options, table

# -- mcp ----------------------------------------------------------------------

def _need_mcp_extra(command: str, modules: tuple[str, ...] = ("mcp", "anyio")) -> None:
    """Exit 2 with the install line when the MCP extra is missing."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        click.echo(f"{command} needs the MCP extra ({', '.join(missing)} is not "
                   "installed).\n  install it with: pip install 'memstrata[mcp]'", err=True)
        raise SystemExit(2)


@click.command()
@store_options
@click.option("--task", default=None, help="Default task for get_current_task/save_checkpoint.")
@click.option("--http", "use_http", is_flag=True,
              help="Serve streamable HTTP on 127.0.0.1 instead of stdio.")
@click.option("--port", type=int, default=8765, show_default=True, help="Port for --http.")
@click.option("--actor", type=click.Choice(["agent", "user", "tool"]), default="agent",
              show_default=True, help="Who tool writes are attributed to.")
def mcp(task: str | None, use_http: bool, port: int, actor: str) -> None:
    """Run the MCP server for one scope (stdio by default).

    \b
    The scope comes from --tenant/--user/--project (or the configuration),
    never from tool arguments. Register it with an MCP client, e.g.:
      {"command": "memstrata", "args": ["mcp", "--user", "alice", "--project", "docs-site"]}
    """
    _need_mcp_extra("memstrata mcp", ("mcp", "anyio", *(("uvicorn",) if use_http else ())))
    import anyio

    from ..interfaces.mcp_server import build_server, serve_http, serve_stdio

    cfg = cli_config()
    mem = open_memory(create=True)
    server = build_server(mem, cfg.scope(), task=task, actor=actor)
    if use_http:
        click.echo(f"memstrata MCP on http://127.0.0.1:{port}/mcp for {cfg.scope()}", err=True)
        anyio.run(lambda: serve_http(server, port=port))
    else:
        anyio.run(serve_stdio, server)


# -- tools --------------------------------------------------------------------

#: The formats ``--strict`` applies to (``openai-responses`` is strict already).
STRICT_FORMATS = ("openai", "openai-responses")


def _served_mcp_tools() -> list[dict[str, Any]]:
    """The tools exactly as ``memstrata mcp`` lists them (``tools/list``), from the server's
    own listing (:func:`~memstrata.interfaces.mcp_server.tool_listing`), as JSON."""
    from ..interfaces.mcp_server import tool_listing

    return [t.model_dump(mode="json", by_alias=True, exclude_none=True)
            for t in tool_listing()]


@click.command("tools")
@click.option("--format", "fmt",
              type=click.Choice(["openai", "openai-responses", "anthropic", "mcp"]),
              default="openai", show_default=True,
              help="openai (Chat Completions), openai-responses (Responses API, strict), "
                   "anthropic (Messages API) or mcp (the Tool objects `memstrata mcp` lists: "
                   "title, inputSchema, outputSchema, annotations).")
@click.option("--strict", is_flag=True,
              help="OpenAI strict mode: every property required, optional ones nullable, "
                   "unsupported keywords dropped, strict: true (openai-responses is strict "
                   "by default; refused for anthropic and mcp).")
def tools_cmd(fmt: str, strict: bool) -> None:
    """Print the memory tools' JSON schemas for OpenAI or Anthropic function calling, or as
    the MCP server lists them."""
    if strict and fmt not in STRICT_FORMATS:
        # a usage error (exit 2), as the other option combinations that cannot go together
        raise click.UsageError(
            f"--strict is OpenAI's strict mode; it does not apply to --format {fmt}\n"
            "  hint: drop --strict, or use --format openai --strict (--format "
            "openai-responses is strict already)")
    from ..interfaces.tool_schemas import (
        anthropic_tools,
        openai_responses_tools,
        openai_tools,
    )

    out: list[dict[str, Any]]
    if fmt == "openai":
        out = openai_tools(strict=strict)
    elif fmt == "openai-responses":
        out = openai_responses_tools()
    elif fmt == "anthropic":
        out = anthropic_tools()
    else:
        _need_mcp_extra("memstrata tools --format mcp")
        out = _served_mcp_tools()
    click.echo(json.dumps(out, indent=2, ensure_ascii=False))


# -- markdown files -----------------------------------------------------------

@click.command("export")
@store_options
@json_option
@click.option("--markdown", "directory", type=click.Path(file_okay=False, path_type=Path),
              required=True, help="Write identity.md, working-context.md, episodic.md here.")
@click.option("--force", is_flag=True, help="Overwrite files that differ (edits are lost).")
def export_cmd(as_json: bool, directory: Path, force: bool) -> None:
    """Export exactly this scope's memory as Markdown files people can read."""
    from ..interfaces.memory_files import export_markdown

    cfg = cli_config()
    mem = open_memory(embedder=None)
    report = export_markdown(mem, cfg.scope(), directory, overwrite=force)
    if as_json:
        emit_json({"directory": str(report.directory), "counts": report.counts,
                   "files": [str(p) for p in report.files]})
        return
    click.echo(f"exported {cfg.scope()} to {directory}: " +
               ", ".join(f"{k} {v}" for k, v in report.counts.items()))


@click.command("import")
@store_options
@json_option
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--trust", is_flag=True,
              help="You vouch for these files: approve the facts they state (identity "
                   "entries, and anything else held for review) with you as the reviewer; "
                   "entries under 'Pending identity changes' stay pending.")
@click.option("--reviewer", default=None, help="Reviewer name for --trust (default: $USER).")
@click.option("--skip-invalid", is_flag=True,
              help="Import the valid entries and list the lines left out (default: a file "
                   "with any invalid line imports nothing and exits 2).")
def import_cmd(as_json: bool, directory: Path, trust: bool, reviewer: str | None,
               skip_invalid: bool) -> None:
    """Import identity.md, working-context.md and episodic.md through the write policy.

    Identity entries wait in the review queue unless you pass --trust. Every line that
    cannot be imported is listed with its line number and the reason; then nothing is
    imported (exit 2) unless you pass --skip-invalid.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ..errors import ValidationError
    from ..interfaces.memory_files import import_markdown

    cfg = cli_config()
    mem = open_memory(create=True)
    if trust and not reviewer:
        reviewer = getpass.getuser()
    with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(),
                  transient=True, disable=as_json) as bar:
        job = bar.add_task("import", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(job, completed=done, total=total)

        try:
            report = import_markdown(mem, cfg.scope(), directory, trust=trust,
                                     reviewer=reviewer, progress=progress,
                                     skip_invalid=skip_invalid)
        except ValidationError as exc:
            problems = exc.details.get("problems")
            if not problems:
                raise
            if as_json:
                emit_json({"imported": False, "error": exc.message, "problems": problems})
            else:
                click.echo(f"{exc.message}:", err=True)
                for line in problems:
                    click.echo(f"  {line}", err=True)
                click.echo("fix these lines, or pass --skip-invalid to import the rest",
                           err=True)
            raise SystemExit(2) from None
    if as_json:
        emit_json({"counts": report.counts, "pending": report.pending,
                   "rejected": report.rejected, "skipped": report.skipped,
                   "notes": report.notes})
        return
    click.echo(f"imported into {cfg.scope()}: " +
               (", ".join(f"{k} {v}" for k, v in sorted(report.counts.items())) or "nothing"))
    for line in report.skipped:
        click.echo(f"  skipped: {line}")
    for line in report.notes:
        click.echo(f"  note: {line}")
    for line in report.pending:
        click.echo(f"  pending review: {line}")
    for line in report.rejected:
        click.echo(f"  rejected: {line}")
    if report.pending:
        # with --trust, what still waits was listed as pending in the files themselves
        click.echo("  approve with `memstrata review approve ID --reviewer NAME`" + (
            " (the files list these as pending: --trust leaves them so)" if trust else
            ", or re-run with --trust if you vouch for the files"))


@click.command()
@json_option
@click.argument("memory_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--to", "directory", type=click.Path(file_okay=False, path_type=Path),
              required=True, help="Directory for identity.md, working-context.md, episodic.md.")
@click.option("--force", is_flag=True, help="Overwrite existing files that differ.")
@click.option("--llm", "llm_spec", default=None, metavar="SPEC",
              help="Let a model sort the lines: PROVIDER:MODEL[@BASE_URL] (as for extract), "
                   "or 'env'. Secrets are never sent; the files still go through the write "
                   "policy on import.")
def migrate(as_json: bool, memory_file: Path, directory: Path, force: bool,
            llm_spec: str | None) -> None:
    """Sort a single legacy MEMORY.md into the three files (review them, then import)."""
    from ..interfaces.migrate import migrate_memory_file

    if llm_spec is not None:
        from ..interfaces.migrate_llm import migrate_file_with_llm
        from ..providers.llm import client_from_env, client_from_spec

        client = client_from_env() if llm_spec == "env" else client_from_spec(llm_spec)
        result = migrate_file_with_llm(memory_file, directory, client, overwrite=force)
    else:
        result = migrate_memory_file(memory_file, directory, overwrite=force)
    if as_json:
        emit_json([{"line": r.line, "destination": r.destination, "text": r.text,
                    "note": r.note} for r in result.routes])
        return
    table(f"{memory_file} → {directory}", ["line", "to", "text", "note"],
          [[r.line, r.destination, r.text, r.note] for r in result.routes])
    counts: dict[str, int] = {}
    for r in result.routes:
        counts[r.destination] = counts.get(r.destination, 0) + 1
    click.echo(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) +
               ". Dates/sources starting with ~ are approximate. Next: "
               f"`memstrata lint {directory}`, then `memstrata import {directory}`.")


@click.command()
@json_option
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
def lint(as_json: bool, directory: Path) -> None:
    """Check the Markdown memory files' format and sizes (exit 1 on errors)."""
    from ..interfaces.markdown_read import lint_markdown

    issues = lint_markdown(directory)
    errors = [i for i in issues if i.severity == "error"]
    if as_json:
        emit_json({"ok": not errors, "issues": [
            {"file": i.file, "line": i.line, "severity": i.severity, "message": i.message}
            for i in issues]})
    elif not issues:
        click.echo(f"ok: {directory} is well-formed and within size limits")
    else:
        for i in issues:
            click.echo(str(i))
    if errors:
        raise SystemExit(1)


# -- demo ---------------------------------------------------------------------

@click.command()
@click.option("--fast", is_flag=True, help="Skip the embedder (lexical retrieval only).")
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the demo store in this directory (default: a temporary one).")
def demo(fast: bool, home: Path | None) -> None:
    """Run the scripted multi-session story on a fresh embedded store (under a minute)."""
    from ..config import load_config
    from ..interfaces.demo import run_demo

    embedder = "none" if fast else load_config().embedder
    result = run_demo(home=home, embedder=embedder)
    if not result.ok:
        raise SystemExit(1)


# -- config -------------------------------------------------------------------

@click.group()
def config() -> None:
    """Configuration: $MEMSTRATA_HOME/config.toml, environment and flags."""


@config.command("show")
@store_options
@json_option
def config_show(as_json: bool) -> None:
    """Print the effective configuration and where each value came from."""
    cfg = cli_config()
    if as_json:
        emit_json(cfg.as_dict())
    else:
        table("effective configuration (flags > env > file > defaults)",
              ["setting", "value", "source"], cfg.rows())


def register(group: click.Group) -> None:
    for cmd in (mcp, tools_cmd, export_cmd, import_cmd, migrate, lint, demo, config):
        group.add_command(cmd)
