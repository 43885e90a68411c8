"""People's tables of hits (`recall`, `episodes search`) read at 80, 100 and wide terminals:
refs, dates, statuses and scores whole, long text cut with an ellipsis, never a column
squeezed to a few characters; `--json` does not depend on the width."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memstrata import Memory, Scope
from memstrata.cli import cli

LONG = ("Deploy failed: stale build cache on the preview environment; purged the cache and "
        "re-ran the pipeline, which passed after twelve minutes of waiting on the runners")
SCOPE = ["--user", "alice", "--project", "docs-site"]
COMMANDS = [["recall", "deploy preview"], ["episodes", "search", "deploy preview"]]


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, dict[str, str]]:
    url = f"sqlite:///{tmp_path / 't.db'}"
    with Memory.open(url, embedder=None) as mem:
        alice = Scope(user="alice", project="docs-site")
        refs = [mem.episodes.append(alice, text=LONG, event="deploy_failed", actor="tool",
                                    source="ci:run/812", observed_at="2026-03-01").ref,
                mem.episodes.append(alice, text="Planned the deploy preview [x] checklist",
                                    event="plan", outcome="abandoned", actor="user",
                                    source="chat:s1/t4", observed_at="2026-03-02").ref]
    return url, {"ref0": refs[0], "ref1": refs[1]}


def _run(url: str, command: list[str], columns: int, *extra: str) -> str:
    env = {"COLUMNS": str(columns), "MEMSTRATA_EMBEDDER": "none", "MEMSTRATA_URL": None,
           "MEMSTRATA_CONFIG": None}
    res = CliRunner().invoke(cli, [*command, "--url", url, *SCOPE, *extra], env=env,
                             prog_name="memstrata")
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_hits_read_at_narrow_widths(store: tuple[str, dict[str, str]], command: list[str],
                                    columns: int) -> None:
    url, refs = store
    out = _run(url, command, columns)
    lines = out.splitlines()
    assert all(len(line) <= columns for line in lines), out
    for ref, date in ((refs["ref0"], "2026-03-01"), (refs["ref1"], "2026-03-02")):
        [head] = [line for line in lines if ref in line]  # the ref whole, on one line
        assert date in head and "score 0." in head, out
    assert "Deploy failed: stale build cache" in out  # words whole, not folded
    assert "…" in out  # the long excerpt is cut, not wrapped
    assert "[x] checklist" in out  # stored text is not rich markup
    assert "outcome: abandoned" in out and "source: ci:run/812" in out


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_hits_are_one_line_each_where_they_fit(store: tuple[str, dict[str, str]],
                                               command: list[str]) -> None:
    url, refs = store
    out = _run(url, command, 250)
    header = next(line for line in out.splitlines() if "excerpt" in line)
    columns = [c.strip() for c in header.strip("┃ ").split("┃")]
    assert columns[:4] == ["ref", "date", "what", "excerpt"] and columns[-1] == "score"
    assert "outcome" in columns
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 2 and all(len(line) <= 250 for line in out.splitlines())
    [plan] = [r for r in rows if refs["ref1"] in r]
    assert "2026-03-02" in plan and "abandoned" in plan and "[x] checklist" in plan


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_json_is_the_same_at_any_width(store: tuple[str, dict[str, str]],
                                       command: list[str]) -> None:
    url, _ = store
    def hits(columns: int) -> list[dict[str, object]]:
        out = json.loads(_run(url, command, columns, "--json"))
        found = out["items"] if isinstance(out, dict) else out
        for hit in found:
            del hit["score"]  # recency moves it between two runs
        return list(found)

    narrow = hits(80)
    assert narrow == hits(250)
    assert LONG in [h["excerpt"] for h in narrow]  # JSON keeps the text whole


@pytest.mark.parametrize("columns", [80, 100, 250])
def test_other_tables_read_at_any_width(tmp_path: Path, columns: int) -> None:
    """`facts list` (eight columns): a table where they fit, else one card per fact; never a
    column one character wide, and stored text printed as it is."""
    url = f"sqlite:///{tmp_path / 'f.db'}"
    claim = "Prefers async standups in Slack, written before 10am [x] always"
    with Memory.open(url, embedder=None) as mem:
        fact = mem.facts.propose(Scope(user="alice"), claim=claim, kind="preference",
                                 subject="alice", attribute="standup_format", actor="user",
                                 source="chat:2026-08-01").record
    assert fact is not None
    env = {"COLUMNS": str(columns), "MEMSTRATA_EMBEDDER": "none", "MEMSTRATA_URL": None,
           "MEMSTRATA_CONFIG": None}
    res = CliRunner().invoke(cli, ["facts", "list", "--url", url, "--user", "alice"], env=env)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert all(len(line) <= columns for line in lines), res.output
    [head] = [line for line in lines if fact.id in line]
    assert "active" in head and "standard" in head
    assert "alice/standup_format" in res.output and "user:chat:2026-08-01" in res.output
    assert ("[x] always" in res.output) and "Prefers async standups" in res.output
