"""Scratch, checkpoints and the ledger: run-scoped and resumable state."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from memstrata import (
    Conflict,
    ManualClock,
    Memory,
    NotFound,
    Scope,
    ToolDispatcher,
    ValidationError,
)


def test_scratch_receipts_listing_and_discard(mem: Memory, alice: Scope) -> None:
    with mem.run(alice, task="t") as run:
        assert run.scratch.write("plan/outline", "1. intro\n2. body") == \
            "wrote plan/outline (16 chars)"
        assert run.scratch.write("plan/refs", {"urls": ["a", "b"]}).startswith("wrote plan/refs")
        run.scratch.write("draft", "hello")
        assert run.scratch.read("plan/outline") == "1. intro\n2. body"
        assert run.scratch.read("missing") == "missing is not set"
        assert run.scratch.list("plan/") == ["plan/outline", "plan/refs"]
        assert run.scratch.list() == ["draft", "plan/outline", "plan/refs"]
        other = mem.run(alice)
        assert other.scratch.read("draft") == "draft is not set"  # runs do not share
        run_id = run.run_id
    # discarded on exit, never promoted
    again = mem.run(alice, run_id=run_id)
    assert again.scratch.list() == []
    assert mem.facts.list(alice) == []


def test_two_scopes_with_one_run_id_have_two_scratchpads(mem: Memory, clock: ManualClock) -> None:
    """A run id names a run of one scope, on every backend (Redis keyed its entries by scope
    already): bob's run "shared-run" neither overwrites, reads, lists nor discards alice's
    entries, and its end leaves hers (before, on SQL stores, bob's write replaced alice's
    value and read back as not set)."""
    alice, bob = Scope(user="alice"), Scope(user="bob")
    with mem.run(alice, run_id="shared-run") as hers:
        hers.scratch.write("plan", "alice's secret plan")
        with mem.run(bob, run_id="shared-run") as his:
            assert his.scratch.read("plan") == "plan is not set"
            assert his.scratch.write("plan", "bob was here") == "wrote plan (12 chars)"
            assert his.scratch.read("plan") == "bob was here"
            assert his.scratch.list() == ["plan"]
            assert hers.scratch.read("plan") == "alice's secret plan"
            assert his.scratch.delete("plan") == "deleted plan"
            his.scratch.write("other", "x")
        assert hers.scratch.items() == [("plan", "alice's secret plan")]
    assert mem.run(bob, run_id="shared-run").scratch.list() == []


def test_scratch_expires_by_ttl(mem: Memory, alice: Scope, clock: ManualClock) -> None:
    with mem.run(alice) as run:
        run.scratch.write("k", "v")
        clock.advance(hours=23, minutes=59)
        assert run.scratch.read("k") == "v"
        clock.advance(minutes=2)
        assert run.scratch.read("k") == "k is not set"
        assert run.scratch.list() == []
        assert mem.sweep()["scratch"] == 1


def test_checkpoint_overwrites_fields_and_keeps_versions(mem: Memory, alice: Scope,
                                                         clock: ManualClock) -> None:
    cp1 = mem.checkpoints.save(alice, "release-v17", objective="Ship v17 notes",
                               constraints=["no marketing tone"], next_action="collect PRs")
    clock.advance(hours=1)
    cp2 = mem.checkpoints.save(alice, "release-v17", completed=["collected 41 PRs"],
                               next_action="draft notes")
    assert (cp1.version, cp2.version) == (1, 2)
    cur = mem.checkpoints.current(alice, "release-v17")
    assert cur is not None
    assert cur.objective == "Ship v17 notes"          # carried forward
    assert cur.constraints == ["no marketing tone"]
    assert cur.completed == ["collected 41 PRs"]
    assert cur.next_action == "draft notes"           # exactly one current value
    assert [v.next_action for v in mem.checkpoints.versions(alice, "release-v17")] == [
        "collect PRs", "draft notes"]
    assert mem.checkpoints.current(Scope(user="bob", project="docs-site"), "release-v17") is None


def test_fresh_process_resumes_checkpoint_and_ledger(store_url: str, alice: Scope) -> None:
    mem = Memory.open(store_url, embedder=None)
    with mem.run(alice, task="release-v17") as run:
        run.checkpoint.save(objective="Ship", next_action="publish notes")
        op = run.ledger.begin("publish:release-notes:v17", intent="POST notes to CMS")
        assert op.status == "pending" and not op.resumed
    mem.close()
    code = textwrap.dedent(f"""
        from memstrata import Memory, Scope
        mem = Memory.open({store_url!r}, embedder=None)
        scope = Scope(user="alice", project="docs-site")
        with mem.run(scope, task="release-v17") as run:
            cp = run.checkpoint.load()
            op = run.ledger.begin("publish:release-notes:v17", intent="POST notes to CMS")
            print(cp.next_action, "|", op.key, op.status, op.intent, op.resumed, op.attempts)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == ("publish notes | publish:release-notes:v17 unknown POST notes to CMS "
                   "True 2")


def test_ledger_complete_fail_and_retry(mem: Memory, alice: Scope) -> None:
    with mem.run(alice) as run:
        run.ledger.begin("email:welcome:42", intent="send welcome mail")
        done = run.ledger.complete("email:welcome:42", external_ref="msg-123")
        assert done.status == "succeeded" and done.external_ref == "msg-123"
        again = run.ledger.begin("email:welcome:42", intent="send welcome mail")
        assert again.status == "succeeded" and again.resumed
        assert run.ledger.complete("email:welcome:42", external_ref="msg-123").status == \
            "succeeded"
        with pytest.raises(Conflict):
            run.ledger.complete("email:welcome:42", external_ref="msg-999")
        run.ledger.begin("charge:7", intent="charge card")
        failed = run.ledger.fail("charge:7", error="card declined")
        assert failed.status == "failed"
        retry = run.ledger.begin("charge:7", intent="charge card")
        assert retry.status == "pending" and retry.attempts == 2
        with pytest.raises(NotFound):
            run.ledger.complete("never-begun")
    assert mem.ledger.get(Scope(user="bob"), "charge:7") is None


def test_closing_a_task_ends_it_and_keeps_its_history(mem: Memory, alice: Scope,
                                                     store_url: str, tmp_path: Any) -> None:
    from click.testing import CliRunner

    from memstrata.cli import cli
    from memstrata.interfaces.memory_files import export_markdown

    mem.checkpoints.save(alice, "release-v17", objective="Ship v17 notes", next_action="draft")
    mem.checkpoints.save(alice, "offsite", objective="Plan the offsite")
    closed = mem.checkpoints.close(alice, "release-v17", outcome="published on the blog")
    assert closed.status == "closed" and closed.outcome == "published on the blog"
    assert closed.closed_at is not None and closed.version == 2
    assert mem.checkpoints.tasks(alice) == ["offsite"]
    assert mem.checkpoints.tasks(alice, include_closed=True) == ["offsite", "release-v17"]
    assert [v.status for v in mem.checkpoints.versions(alice, "release-v17")] == [
        "open", "closed"]
    # it leaves the session context and the working-context file
    ctx = mem.context(alice, task="release-v17")
    assert "Ship v17 notes" not in ctx.text
    assert any("was closed" in m.reason for m in ctx.manifest)
    export_markdown(mem, alice, tmp_path / "files")
    working = (tmp_path / "files" / "working-context.md").read_text("utf-8")
    assert "release-v17" not in working and "offsite" in working
    # the outcome is an episode of its own, found by search
    [hit] = mem.episodes.search(alice, "published blog")
    assert hit.event == "task_closed" and hit.source == closed.ref
    # closing twice changes nothing; saving again reopens
    assert mem.checkpoints.close(alice, "release-v17").version == 2
    assert mem.checkpoints.save(alice, "release-v17", next_action="fix a typo").status == "open"
    assert "release-v17" in mem.checkpoints.tasks(alice)
    # the CLI and the tool
    flags = ["--url", store_url, "--user", "alice", "--project", "docs-site"]
    res = CliRunner().invoke(cli, ["checkpoint", "close", "offsite", "--outcome",
                                   "postponed to spring", *flags])
    assert res.exit_code == 0 and "closed task offsite" in res.output
    with ToolDispatcher(mem, alice, task="release-v17") as tools:
        out = tools.dispatch("close_task", {"outcome": "done"})
        assert out["task"] == "release-v17" and out["outcome"] == "done"
    assert mem.checkpoints.tasks(alice) == []
    with pytest.raises(NotFound):
        mem.checkpoints.close(alice, "never-started")


def test_scratch_writes_many_at_once_and_screens_json_values(mem: Memory) -> None:
    with mem.run(Scope(user="alice"), task="t") as run:
        assert run.scratch.write_many([("a", {"cmd": 'export PGPASSWORD="Tr0ub4dor&3x"'}),
                                       ("b", "plain text")]) == 2
        items = dict(run.scratch.items())
        assert set(items) == {"a", "b"} and "Tr0ub4dor" not in items["a"]
        assert json.loads(items["a"])["cmd"].startswith("export PGPASSWORD=")
        with pytest.raises(ValidationError):
            run.scratch.write_many([("c", "fine"), ("d", {"bad": object()})])
        assert run.scratch.list() == ["a", "b"]
