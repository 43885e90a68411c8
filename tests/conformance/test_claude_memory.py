"""Claude's memory tool on memstrata, driven through the Anthropic SDK's own tool class
with a recorded session of tool-use turns, on every backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends import StoreProbe
from memstrata import Memory, Scope

anthropic = pytest.importorskip("anthropic")

DATA = Path(__file__).parents[1] / "data" / "claude_memory_session.json"
ALICE = Scope(user="alice", project="docs-site")


def test_a_recorded_session_leaves_governed_writes(mem: Memory, store: StoreProbe) -> None:
    from anthropic.lib.tools import BetaAbstractMemoryTool

    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    tool = MemstrataMemoryTool(mem, ALICE)
    assert isinstance(tool, BetaAbstractMemoryTool)
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
    turns = json.loads(DATA.read_text("utf-8"))["turns"]
    replies = {t["id"]: str(tool.call(t["input"])) for t in turns}

    assert "/memories/identity.md" in replies["toolu_01"]
    assert "Identity" in replies["toolu_02"]
    # an identity edit is a pending proposal, never current
    assert "wait for a person" in replies["toolu_03"]
    [pending] = mem.review.pending(ALICE)
    assert pending.tier == "identity" and pending.attribute == "role"
    assert mem.facts.current(ALICE) == []
    # working context overwritten: the task's checkpoint
    cp = mem.checkpoints.current(ALICE, "release-v17")
    assert cp is not None and cp.next_action == "collect the merged PRs"
    assert cp.plan == ["collect PRs", "draft notes"]
    # the episodic log: appended, dated and sourced; never changed, deleted or undated
    assert "Appended 1 entry" in replies["toolu_05"]
    [ep] = mem.episodes.log(ALICE)
    assert ep.text == "Agreed to ship v17 on Friday" and ep.event == "decision"
    assert ep.provenance.source == "chat:2026-08-03" and ep.observed_at.day == 3
    assert replies["toolu_06"].startswith("Error:") and "append-only" in replies["toolu_06"]
    assert replies["toolu_07"].startswith("Error:") and "append-only" in replies["toolu_07"]
    assert replies["toolu_08"].startswith("Error:") and "dated and sourced" in replies["toolu_08"]
    # a pasted token is refused before anything is written
    assert replies["toolu_09"].startswith("Error:") and "secret" in replies["toolu_09"]
    assert mem.checkpoints.current(ALICE, "deploy") is None
    assert not store.contains("ghp_Zq8x4LmN2vB7cR1tY6uI0oP3aS5dF7gH9jK1")
    # paths outside /memories, and renames, are refused
    for key in ("toolu_10", "toolu_11", "toolu_12"):
        assert replies[key].startswith("Error:"), key
    assert "Agreed to ship v17 on Friday" in replies["toolu_13"]
    assert len(mem.episodes.log(ALICE)) == 1


def test_the_views_are_the_store_for_this_scope_only(mem: Memory) -> None:
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    mem.episodes.append(Scope(user="bob", project="docs-site"), text="Bob's private note",
                        actor="user", source="chat")
    mem.episodes.append(ALICE, text="Alice's standup moved", actor="user", source="cal")
    view = str(MemstrataMemoryTool(mem, ALICE).call({"command": "view",
                                                      "path": "/memories/episodic.md"}))
    assert "Alice's standup moved" in view and "Bob" not in view


def test_editing_one_fact_line_leaves_the_tasks_checkpoints_alone(mem: Memory) -> None:
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    mem.checkpoints.save(ALICE, "release-v17", objective="Ship notes", next_action="collect PRs")
    mem.facts.propose(ALICE, claim="Docs deploy from main", kind="system_fact", subject="docs",
                      attribute="deploy_branch", actor="user", source="chat")
    tool = MemstrataMemoryTool(mem, ALICE, actor="user")
    reply = str(tool.call({"command": "str_replace", "path": "/memories/working-context.md",
                           "old_str": "Docs deploy from main",
                           "new_str": "Docs deploy from the release branch"}))
    assert "docs/deploy_branch" in reply and "checkpoint" not in reply, reply
    assert [cp.version for cp in mem.checkpoints.versions(ALICE, "release-v17")] == [1]
    assert [f.claim for f in mem.facts.current(ALICE)] == ["Docs deploy from the release branch"]
