"""Every CLI command has --help and is documented (README.md or docs/*.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from memstrata.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def _walk(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if path:
        yield path
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _walk(sub, (*path, name))


COMMANDS = list(_walk(cli))
DOCS = "\n".join(p.read_text("utf-8") for p in [ROOT / "README.md",
                                                  *sorted((ROOT / "docs").glob("*.md"))])


def test_the_walk_finds_the_commands() -> None:
    names = {" ".join(p) for p in COMMANDS}
    assert {"mcp", "export", "import", "migrate", "lint", "demo", "config show", "tools",
            "facts propose", "review approve"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_command_has_help_and_is_documented(path: tuple[str, ...]) -> None:
    res = CliRunner().invoke(cli, [*path, "--help"], env={"COLUMNS": "100"},
                             prog_name="memstrata")
    assert res.exit_code == 0, res.output
    assert f"Usage: memstrata {' '.join(path)}" in " ".join(res.output.split())
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    assert (command.help or "").strip(), f"memstrata {' '.join(path)} has no docstring"
    assert f"memstrata {' '.join(path)}" in DOCS, \
        f"document `memstrata {' '.join(path)}` in README.md or docs/cli.md"


def test_top_level_help_works() -> None:
    res = CliRunner().invoke(cli, ["--help"], prog_name="memstrata")
    assert res.exit_code == 0 and "Usage: memstrata" in res.output
