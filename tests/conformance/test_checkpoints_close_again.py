"""Closing a closed task again (:meth:`memstrata.layers.checkpoints.Checkpoints.close`).

Before: ``memstrata checkpoint close T --outcome X`` on a task already closed with another
outcome exited 0 ("closed task T") and silently kept the old outcome; the library and the
``close_task`` tool answered the old closing version the same way.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from memstrata import Conflict, Memory, Scope, ToolDispatcher
from memstrata.cli import cli


def test_another_outcome_for_a_closed_task_is_a_conflict(mem: Memory, alice: Scope) -> None:
    mem.checkpoints.save(alice, "migrate-db", objective="Move to Postgres")
    first = mem.checkpoints.close(alice, "migrate-db", outcome="abandoned: we stay on MySQL")
    with pytest.raises(Conflict) as info:
        mem.checkpoints.close(alice, "migrate-db", outcome="done: moved to Postgres")
    assert "abandoned: we stay on MySQL" in str(info.value)
    assert "done: moved to Postgres" in str(info.value)
    assert "reopens" in info.value.hint
    [closing] = [v for v in mem.checkpoints.versions(alice, "migrate-db") if v.status == "closed"]
    assert closing.version == first.version and closing.outcome == first.outcome
    assert len(mem.episodes.search(alice, "moved Postgres done")) == 0
    # the same outcome (whitespace aside), or none, answers the closing version
    assert mem.checkpoints.close(alice, "migrate-db",
                                 outcome=" abandoned:  we stay on MySQL").version == 2
    assert mem.checkpoints.close(alice, "migrate-db").outcome == "abandoned: we stay on MySQL"
    assert len(mem.checkpoints.versions(alice, "migrate-db")) == 2
    # to record another ending: save (reopens), then close
    mem.checkpoints.save(alice, "migrate-db", notes="we moved after all")
    assert mem.checkpoints.close(alice, "migrate-db",
                                 outcome="done: moved to Postgres").outcome == \
        "done: moved to Postgres"


def test_a_closed_task_without_outcome_refuses_one_later(mem: Memory, alice: Scope) -> None:
    mem.checkpoints.save(alice, "offsite", objective="Plan the offsite")
    mem.checkpoints.close(alice, "offsite")
    with pytest.raises(Conflict):
        mem.checkpoints.close(alice, "offsite", outcome="postponed")
    cp = mem.checkpoints.current(alice, "offsite")
    assert cp is not None and cp.status == "closed" and cp.outcome is None


def test_the_cli_and_the_tool_report_a_second_close(mem: Memory, alice: Scope,
                                                    store_url: str) -> None:
    mem.checkpoints.save(alice, "release-v17", objective="Ship v17 notes")
    flags = ["--url", store_url, "--user", "alice", "--project", "docs-site"]
    runner = CliRunner()
    res = runner.invoke(cli, ["checkpoint", "close", "release-v17", "--outcome", "published",
                              *flags])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["checkpoint", "close", "release-v17", "--outcome", "abandoned",
                              *flags])
    assert res.exit_code != 0
    assert "already closed" in res.output and "published" in res.output
    res = runner.invoke(cli, ["checkpoint", "close", "release-v17", "--outcome", "published",
                              *flags])
    assert res.exit_code == 0 and "published" in res.output
    with ToolDispatcher(mem, alice, task="release-v17") as tools:
        out = tools.dispatch("close_task", {"outcome": "cancelled"})
        assert out["type"] == "Conflict" and "published" in out["error"]
    cp = mem.checkpoints.current(alice, "release-v17")
    assert cp is not None and cp.outcome == "published"
