"""Every CLI command has --help and is documented (README.md or docs/*.md)."""

from __future__ import annotations

import re
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


# -- docs/cli.md documents every command and option where the command is described ------

CLI_MD = (ROOT / "docs" / "cli.md").read_text("utf-8")
#: The options every store command shares (docs/cli.md's opening paragraph documents them).
SHARED = ("--url", "--tenant", "--user", "--project", "--agent", "--json", "--help")


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def _shared_help() -> dict[str, str | None]:
    """Each shared option's help as `store_options`/`json_option` give it: an option of that
    name with another help (bench's own --url, eval's --json) is the command's own."""
    stats = {o.opts[0]: o.help for o in _command(("stats",)).params if isinstance(o, click.Option)}
    return {name: stats.get(name) for name in SHARED}


def _entries(doc: str) -> list[str]:
    """The bullets of ``doc``: a bullet runs on over its blank and more-indented lines
    (nested bullets and code blocks included)."""
    lines = doc.splitlines()
    out = []
    for i, line in enumerate(lines):
        marker = re.match(r"^(\s*)- ", line)
        if not marker:
            continue
        indent = len(marker.group(1))
        body = [line]
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            body.append(nxt)
        out.append("\n".join(body))
    return out


ENTRIES = _entries(CLI_MD)
INTRO = CLI_MD.split("\n## ", 1)[0]


def _names(path: tuple[str, ...]) -> re.Pattern[str]:
    command = _command(path)
    subs = sorted(command.commands) if isinstance(command, click.Group) else []
    after = f"(?! (?:{'|'.join(map(re.escape, subs))})\\b)" if subs else ""
    return re.compile(rf"memstrata {re.escape(' '.join(path))}(?![\w-]){after}")


def _mentions(text: str, option: click.Option) -> bool:
    return any(re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text)
               for o in (*option.opts, *option.secondary_opts))


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_cli_md_documents_the_command_and_its_options(path: tuple[str, ...]) -> None:
    """README: "Every command and option is documented in docs/cli.md" — each command has a
    bullet naming it, and each of its own options is in that bullet."""
    command = _command(path)
    shared = _shared_help()
    own = [o for o in command.params if isinstance(o, click.Option) and not o.hidden
           and not (o.opts[0] in shared and o.help == shared[o.opts[0]])]
    if isinstance(command, click.Group) and not command.invoke_without_command and not own:
        return  # a plain group (`memstrata facts`): its commands have their bullets
    entries = [e for e in ENTRIES if _names(path).search(e)]
    assert entries, f"docs/cli.md has no bullet for `memstrata {' '.join(path)}`"
    missing = [o.opts[0] for o in own if not any(_mentions(e, o) for e in entries)]
    assert not missing, (f"docs/cli.md's bullet for `memstrata {' '.join(path)}` does not "
                         f"mention {', '.join(missing)}")


def test_cli_md_documents_the_shared_and_root_options() -> None:
    root = [o for o in cli.params if isinstance(o, click.Option)]
    assert root and all(_mentions(INTRO, o) for o in root)
    assert all(re.search(rf"`{re.escape(name)}`", INTRO) for name in SHARED[:-1])


def test_the_docs_check_sees_a_missing_option() -> None:
    """The check above can fail: a bullet without an option of its command is caught."""
    option = next(o for o in _command(("procedures", "activate")).params
                  if isinstance(o, click.Option) and o.opts == ["--by"])
    assert not _mentions("- `memstrata procedures activate NAME VERSION` — only if ...", option)
    assert _mentions("- `memstrata procedures activate NAME VERSION --by NAME`", option)
    assert not _names(("review",)).search("`memstrata review list`")
    assert _names(("review",)).search("`memstrata review` — go through")


# -- every command line shown to people carries the options it requires ----------------

def _resolve(words: list[str], parent: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """The longest command path ``words`` start with, under ``parent``."""
    path = parent
    command = _command(parent)
    for word in words:
        if not isinstance(command, click.Group) or word not in command.commands:
            break
        path, command = (*path, word), command.commands[word]
    return path if path != parent else None


def _shown_command_lines() -> list[tuple[str, tuple[str, ...], str]]:
    """(where, command path, the line) for every command line docs/cli.md shows in a code
    span and every line of the help texts that shows one (`memstrata --help` and each
    command's help); a span that only names a command (nothing after its name) is skipped."""
    shown: list[tuple[str, tuple[str, ...], str]] = []
    for span in re.findall(r"`(memstrata [^`]+)`", CLI_MD):
        path = _resolve(span.split()[1:])
        if path is not None and len(span.split()) > len(path) + 1:
            shown.append(("docs/cli.md", path, span))
    for path in [(), *COMMANDS]:
        text = re.sub(r"\s*\\\n\s*", " ", _command(path).help or "")  # continued lines
        for span in re.findall(r"`(memstrata [^`]+)`", text):
            found = _resolve(span.split()[1:])
            if found is not None and len(span.split()) > len(found) + 1:
                shown.append((f"help of {' '.join(path) or 'memstrata'}", found, span))
        for raw in text.splitlines():
            line = re.split(r"\s{2,}", raw.strip())[0]
            if not line.startswith("memstrata "):
                continue
            segments = line.removeprefix("memstrata ").split(" / ")
            first = _resolve(segments[0].split())
            if first is None:
                continue
            shown.append((f"help of {' '.join(path) or 'memstrata'}", first, segments[0]))
            for segment in segments[1:]:
                found = _resolve(segment.split(), first[:-1])
                if found is not None:
                    shown.append((f"help of {' '.join(path) or 'memstrata'}", found, segment))
    return shown


SHOWN = _shown_command_lines()


def test_the_shown_command_lines_are_found() -> None:
    paths = {p for _, p, _ in SHOWN}
    assert {("procedures", "activate"), ("procedures", "rollback"), ("facts", "propose"),
            ("review", "reject")} <= paths


@pytest.mark.parametrize(("where", "path", "line"), SHOWN,
                         ids=[f"{w}: {' '.join(p)}" for w, p, _ in SHOWN])
def test_a_shown_command_line_has_its_required_options(where: str, path: tuple[str, ...],
                                                       line: str) -> None:
    """Run as shown, a command line must not stop at "Missing option": the docs and the
    help show every required option (`procedures activate ... --by NAME`)."""
    missing = [o.opts[0] for o in _command(path).params
               if isinstance(o, click.Option) and o.required and not _mentions(line, o)]
    assert not missing, f"{where} shows `{line}` without {', '.join(missing)}"


# -- the MCP tool list in docs/cli.md is the list the server serves ----------------------

def test_cli_md_lists_the_mcp_tools_the_server_serves() -> None:
    from memstrata.interfaces.mcp_server import tool_names

    start = CLI_MD.index("Tools: `")
    paragraph = CLI_MD[start:CLI_MD.index(";", start)]
    documented = re.findall(r"`([a-z_]+)`", paragraph)
    assert len(documented) == len(set(documented))
    assert set(documented) == set(tool_names())
