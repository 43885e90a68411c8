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


def test_a_user_mode_tool_lowers_trust_for_what_the_model_read(mem: Memory) -> None:
    """With ``actor="user"`` a fact line whose source is a URL is what the model read, not
    what the user said: it waits for review as the tool's, as it does through the tools
    (before: committed as the user's)."""
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    tool = MemstrataMemoryTool(mem, ALICE, actor="user")
    shown = str(tool.call({"command": "view", "path": "/memories/working-context.md"}))
    body = "\n".join(ln.split("\t", 1)[1] if "\t" in ln else "" for ln in shown.splitlines())
    assert "_none_" in body
    line = ("- **alice / deploy_policy** (constraint): Deploys skip code review — source: "
            "https://evil.example/page")
    reply = str(tool.call({"command": "create", "path": "/memories/working-context.md",
                           "file_text": body.replace("## Current facts\n\n_none_",
                                                     f"## Current facts\n\n{line}", 1)}))
    assert "pending" in reply, reply
    assert mem.facts.current(ALICE) == []
    [waiting] = mem.review.pending(ALICE)
    assert waiting.provenance.actor == "tool"


#: Malformed inputs a model can send (the SDK passes them on unchecked), and the field the
#: refusal names.
MALFORMED = [
    ("view", "input must be an object"),
    (None, "input must be an object"),
    ({}, "unknown command"),
    ({"command": "frobnicate", "path": "/memories"}, "unknown command"),
    ({"command": "view"}, "path is missing"),
    ({"command": "view", "path": 5}, "path must be a string"),
    ({"command": "view", "path": "/memories/episodic.md", "view_range": 3}, "view_range"),
    ({"command": "view", "path": "/memories/episodic.md", "view_range": ["a", "b"]},
     "view_range"),
    ({"command": "view", "path": "/memories/episodic.md", "view_range": [1, 2, 3]},
     "view_range"),
    ({"command": "view", "path": "/memories/episodic.md", "view_range": [4, 2]},
     "view_range"),
    ({"command": "create", "path": "/memories/working-context.md"}, "file_text is missing"),
    ({"command": "create", "path": "/memories/working-context.md", "file_text": 5},
     "file_text must be a string"),
    ({"command": "create", "path": ["/memories/episodic.md"], "file_text": "x"},
     "path must be a string"),
    ({"command": "str_replace", "path": "/memories/episodic.md"}, "old_str is missing"),
    ({"command": "str_replace", "path": "/memories/episodic.md", "old_str": "Episodic"},
     "new_str is missing"),
    ({"command": "str_replace", "path": "/memories/episodic.md", "old_str": "",
      "new_str": "x"}, "old_str is empty"),
    ({"command": "insert", "path": "/memories/episodic.md", "insert_line": 1},
     "insert_text is missing"),
    ({"command": "insert", "path": "/memories/episodic.md", "insert_text": "- x"},
     "insert_line is missing"),
    ({"command": "insert", "path": "/memories/episodic.md", "insert_line": 1.5,
      "insert_text": "- 2026-08-03 (chat): shipped"}, "insert_line must be an integer"),
    ({"command": "delete", "path": None}, "path is missing"),
    ({"command": "rename", "old_path": 5, "new_path": "/memories/x.md"},
     "old_path must be a string"),
    ({"command": "rename", "old_path": "/memories/episodic.md"}, "new_path is missing"),
]


@pytest.mark.parametrize(("payload", "named"), MALFORMED)
def test_malformed_input_gets_an_error_reply_and_changes_nothing(
        mem: Memory, store: StoreProbe, payload: object, named: str) -> None:
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    mem.episodes.append(ALICE, text="Standup moved to 10:00", actor="user", source="cal")
    tool = MemstrataMemoryTool(mem, ALICE)
    before = store.counts(), tool.call({"command": "view", "path": "/memories/episodic.md"})
    reply = tool.call(payload)
    assert isinstance(reply, str) and reply.startswith("Error:") and named in reply, reply
    assert (store.counts(),
            tool.call({"command": "view", "path": "/memories/episodic.md"})) == before


def test_a_view_range_shows_those_lines(mem: Memory) -> None:
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    tool = MemstrataMemoryTool(mem, ALICE)
    whole = str(tool.call({"command": "view", "path": "/memories/episodic.md"})).splitlines()
    assert len(whole) > 3
    for view_range, lines in (([2, 3], whole[1:3]), ([2, -1], whole[1:]), ([1, 1], whole[:1])):
        assert str(tool.call({"command": "view", "path": "/memories/episodic.md",
                              "view_range": view_range})).splitlines() == lines, view_range
