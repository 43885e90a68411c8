"""Claude's memory tool on memstrata, driven through the Anthropic SDK's own tool class
with a recorded session of tool-use turns, on every backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


WORKING_MD = "/memories/working-context.md"


def _file(tool: Any, path: str = WORKING_MD) -> str:
    """A memory file's text as the model reads it (the view without its line numbers)."""
    shown = str(tool.call({"command": "view", "path": path}))
    return "\n".join(ln.split("\t", 1)[1] for ln in shown.splitlines()) + "\n"


def test_removing_a_fact_line_retires_the_fact(mem: Memory) -> None:
    """A str_replace that deletes a fact line, or a create that leaves it out, retires that
    fact as the retire_fact tool would (before: "No change", and the line stayed)."""
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    editor = mem.facts.propose(ALICE, claim="Alice uses vim", kind="preference",
                               subject="alice", attribute="editor", actor="user", source="chat")
    shell = mem.facts.propose(ALICE, claim="Alice uses zsh", kind="preference",
                              subject="alice", attribute="shell", actor="user", source="chat")
    # a fact of alice's across projects: shared beyond this scope, never in its view
    everywhere = mem.facts.propose(Scope(user="alice"), claim="Alice writes British English",
                                   kind="preference", subject="alice", attribute="spelling",
                                   actor="user", source="chat")
    assert editor.record and shell.record and everywhere.record
    tool = MemstrataMemoryTool(mem, ALICE)
    text = _file(tool)
    [line] = [ln for ln in text.splitlines() if "Alice uses vim" in ln]
    reply = str(tool.call({"command": "str_replace", "path": WORKING_MD,
                           "old_str": line + "\n", "new_str": ""}))
    assert "alice/editor: retired" in reply and not reply.startswith("Error"), reply
    assert "Alice uses vim" not in _file(tool)
    assert mem.facts.get(editor.record.id).status == "retired"
    assert mem.facts.get(shell.record.id).status == "active"

    reply = str(tool.call({"command": "create", "path": WORKING_MD,
                           "file_text": "# Working context\n\n## Current facts\n\n_none_\n"}))
    assert "alice/shell: retired" in reply, reply
    assert "Alice uses zsh" not in _file(tool)
    assert mem.facts.get(shell.record.id).status == "retired"
    assert mem.facts.get(everywhere.record.id).status == "active"
    assert [f.claim for f in mem.facts.current(ALICE)] == ["Alice writes British English"]


def test_removing_task_lines_closes_the_task_or_clears_the_field(mem: Memory) -> None:
    """A removed ``## Task:`` section closes the task (as close_task does); a removed field
    line clears that field; writing the section again reopens the task (before: "No
    change", the task and the field stayed)."""
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    mem.checkpoints.save(ALICE, "release-v17", objective="Ship notes", next_action="collect PRs",
                         notes="ask Bob about the changelog", completed=["drafted intro"])
    mem.checkpoints.save(ALICE, "fix-links", objective="Fix broken links")
    tool = MemstrataMemoryTool(mem, ALICE)
    reply = str(tool.call({"command": "str_replace", "path": WORKING_MD,
                           "old_str": "- Notes: ask Bob about the changelog\n", "new_str": ""}))
    assert "task release-v17: checkpoint v2" in reply, reply
    cp = mem.checkpoints.current(ALICE, "release-v17")
    assert cp is not None and cp.notes is None and cp.objective == "Ship notes"
    reply = str(tool.call({"command": "str_replace", "path": WORKING_MD,
                           "old_str": "### Completed\n\n- drafted intro\n", "new_str": ""}))
    cp = mem.checkpoints.current(ALICE, "release-v17")
    assert cp is not None and cp.completed == [], reply

    text = _file(tool)
    section = text[text.index("## Task: fix-links"):text.index("## Task: release-v17")]
    reply = str(tool.call({"command": "str_replace", "path": WORKING_MD, "old_str": section,
                           "new_str": ""}))
    assert "task fix-links: closed" in reply and not reply.startswith("Error"), reply
    assert "fix-links" not in _file(tool)
    closed = mem.checkpoints.current(ALICE, "fix-links")
    assert closed is not None and closed.status == "closed"
    assert mem.checkpoints.tasks(ALICE) == ["release-v17"]

    reply = str(tool.call({"command": "create", "path": WORKING_MD,
                           "file_text": _file(tool) + "\n" + section}))
    assert "task fix-links: checkpoint" in reply, reply
    assert mem.checkpoints.tasks(ALICE) == ["fix-links", "release-v17"]
    # an empty new section names no state to save: refused, not a silent no-op
    reply = str(tool.call({"command": "str_replace", "path": WORKING_MD,
                           "old_str": "## Pending identity changes",
                           "new_str": "## Task: later\n\n## Pending identity changes"}))
    assert reply.startswith("Error:") and "no fields" in reply, reply


def test_pending_identity_lines_are_proposed_and_stay_until_a_person_decides(
        mem: Memory) -> None:
    """A line added under "Pending identity changes" is an identity proposal; removing one
    is a model's edit, not a person's review: the change stays pending and the reply says
    so (before: both were ignored with "No change")."""
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    tool = MemstrataMemoryTool(mem, ALICE)
    line = "- **alice / role** (profile): Alice leads the docs team. — source: chat:2"
    reply = str(tool.call({"command": "str_replace", "path": WORKING_MD,
                           "old_str": "## Pending identity changes\n\n_none_",
                           "new_str": f"## Pending identity changes\n\n{line}"}))
    assert "alice/role: pending" in reply and "memstrata review" in reply, reply
    [waiting] = mem.review.pending(ALICE)
    assert waiting.tier == "identity" and waiting.provenance.actor == "agent"

    reply = str(tool.call({"command": "str_replace", "path": WORKING_MD,
                           "old_str": line, "new_str": "_none_"}))
    assert reply.startswith("Error:") and "only a person" in reply, reply
    assert "nothing was written" in reply
    # with another change: that change is written, and the reply says the line stays
    text = _file(tool).replace(line, "_none_").replace(
        "## Pending identity changes", "## Task: docs\n\n- Objective: Tidy the docs\n\n"
                                       "## Pending identity changes")
    reply = str(tool.call({"command": "create", "path": WORKING_MD, "file_text": text}))
    assert "task docs: checkpoint v1" in reply and "alice/role: still a pending" in reply, reply
    assert [f.id for f in mem.review.pending(ALICE)] == [waiting.id]
    assert "Alice leads the docs team" in _file(tool)


def test_an_unchanged_write_says_why_nothing_changed(mem: Memory) -> None:
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    mem.checkpoints.save(ALICE, "release-v17", objective="Ship notes")
    tool = MemstrataMemoryTool(mem, ALICE)
    reply = str(tool.call({"command": "create", "path": WORKING_MD, "file_text": _file(tool)}))
    assert reply.startswith("No change") and "already holds" in reply, reply
    assert [cp.version for cp in mem.checkpoints.versions(ALICE, "release-v17")] == [1]


def test_a_create_removes_only_what_the_model_was_shown(mem: Memory) -> None:
    """A ``create`` is compared with the model's last view of the file, not with the store
    at write time: a fact a person added, a task another session opened or a fact that
    changed after the view are kept, and the reply names them (before: the model's file,
    which removed nothing, retired the fact and closed the task)."""
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    drink = mem.facts.propose(ALICE, claim="Alice drinks tea", kind="preference",
                              subject="alice", attribute="drink", actor="user", source="chat:1")
    assert drink.record is not None
    tool = MemstrataMemoryTool(mem, ALICE)
    seen = _file(tool)
    # meanwhile: a person states a fact, another session opens a task, a fact changes
    review = mem.facts.propose(ALICE, claim="Alice reviews docs on Fridays", kind="preference",
                               subject="alice", attribute="review_day", actor="user",
                               source="chat:2")
    assert review.record is not None
    mem.checkpoints.save(ALICE, "release-v18", by="other-session", objective="Ship v18")
    line = "- **alice / editor** (preference): Alice uses Vim — source: chat:3\n"
    reply = str(tool.call({"command": "create", "path": WORKING_MD, "file_text": seen.replace(
        "## Current facts\n\n", "## Current facts\n\n" + line)}))
    assert "alice/editor: pending" in reply and "retired" not in reply, reply
    assert "closed" not in reply and "alice/review_day, task release-v18: kept" in reply, reply
    assert mem.facts.get(review.record.id).status == "active"
    v18 = mem.checkpoints.current(ALICE, "release-v18")
    assert v18 is not None and v18.status == "open"

    # a str_replace in between carries forward only what it changed: the fact the model
    # was never shown is still kept by its next create
    seen = _file(tool)
    pet = mem.facts.propose(ALICE, claim="Alice has a cat", kind="profile", subject="alice",
                            attribute="pet", actor="user", source="chat:4")
    assert pet.record is not None
    reply = str(tool.call({"command": "str_replace", "path": WORKING_MD,
                           "old_str": "Alice reviews docs on Fridays",
                           "new_str": "Alice reviews docs on Thursdays"}))
    assert "alice/review_day" in reply, reply
    # the drink changes after the model saw it: its stale line neither writes the old
    # claim back nor, left out, retires the new one
    mem.facts.propose(ALICE, claim="Alice drinks coffee", kind="preference", subject="alice",
                      attribute="drink", actor="user", source="chat:5")
    text = seen.replace("Alice reviews docs on Fridays", "Alice reviews docs on Thursdays")
    reply = str(tool.call({"command": "create", "path": WORKING_MD, "file_text": text}))
    assert reply.startswith("No change") and "alice/pet: kept" in reply, reply
    text = "".join(ln + "\n" for ln in text.splitlines() if "alice / drink" not in ln)
    reply = str(tool.call({"command": "create", "path": WORKING_MD, "file_text": text}))
    assert "alice/drink: kept (changed since" in reply and "retired" not in reply, reply
    assert {f.attribute: f.claim for f in mem.facts.current(ALICE)} == {
        "drink": "Alice drinks coffee", "pet": "Alice has a cat",
        "review_day": "Alice reviews docs on Fridays"}  # Thursdays: the agent's, pending

    # a tool that never showed the file infers no removal from a create
    fresh = MemstrataMemoryTool(mem, ALICE)
    reply = str(fresh.call({"command": "create", "path": WORKING_MD,
                            "file_text": "# Working context\n\n## Current facts\n\n_none_\n"}))
    assert reply.startswith("No change") and "release-v18" in reply and "kept" in reply, reply
    assert len(mem.facts.current(ALICE)) == 3 and mem.checkpoints.tasks(ALICE) == ["release-v18"]
    # once shown, the same create removes what it leaves out
    _file(fresh)
    reply = str(fresh.call({"command": "create", "path": WORKING_MD,
                            "file_text": "# Working context\n\n## Current facts\n\n_none_\n"}))
    assert "alice/drink: retired" in reply and "task release-v18: closed" in reply, reply
    assert mem.facts.current(ALICE) == [] and mem.checkpoints.tasks(ALICE) == []


@pytest.mark.parametrize("section", [
    "## Task: t1\n\n- Objective: " + "x" * 20_000 + "\n",
    "## Task: " + "t" * 200 + "\n\n- Objective: ship it\n",
    "## Task: t1\n\n- Objective: ship it\n\n### Plan\n\n" + "- step\n" * 201,
])
def test_a_refused_edit_writes_nothing(mem: Memory, store: StoreProbe, section: str) -> None:
    """Every change of an edit is checked before the first write: a task field over its
    limit refuses the whole edit, and the fact line it removed stays (before: the fact was
    retired, then the save was refused)."""
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    drink = mem.facts.propose(ALICE, claim="Alice drinks tea", kind="preference",
                              subject="alice", attribute="drink", actor="user", source="chat:1")
    assert drink.record is not None
    tool = MemstrataMemoryTool(mem, ALICE)
    text = _file(tool)
    before = store.counts()
    [line] = [ln for ln in text.splitlines() if "Alice drinks tea" in ln]
    edited = text.replace(line + "\n", "").replace("## Pending identity changes",
                                                   section + "\n## Pending identity changes")
    reply = str(tool.call({"command": "create", "path": WORKING_MD, "file_text": edited}))
    assert reply.startswith("Error:") and "written before" not in reply, reply
    assert mem.facts.get(drink.record.id).status == "active"
    assert store.counts() == before and _file(tool) == text


def test_a_slash_in_a_subject_is_one_fact_line(mem: Memory) -> None:
    """A subject holding " / " is escaped in the view, so its line names its own fact:
    writing the view back changes nothing and removing the line retires the fact (before:
    it read back as another slot, "No change" on removal and a stray proposal)."""
    from memstrata.interfaces.claude_memory import MemstrataMemoryTool

    fact = mem.facts.propose(ALICE, claim="Deploys happen on Tuesdays", kind="preference",
                             subject="deploy / prod", attribute="window", actor="user",
                             source="chat:1")
    assert fact.record is not None
    tool = MemstrataMemoryTool(mem, ALICE)
    text = _file(tool)
    reply = str(tool.call({"command": "create", "path": WORKING_MD, "file_text": text}))
    assert reply.startswith("No change"), reply
    assert mem.review.pending(ALICE) == []
    [line] = [ln for ln in text.splitlines() if "Tuesdays" in ln]
    reply = str(tool.call({"command": "str_replace", "path": WORKING_MD,
                           "old_str": line + "\n", "new_str": ""}))
    assert "deploy / prod/window: retired" in reply, reply
    assert mem.facts.get(fact.record.id).status == "retired"


def test_a_tool_writes_only_as_a_tool_caller_may(mem: Memory) -> None:
    """The actor is one a tool dispatcher accepts: a reviewer is a person, never the model
    (before: the model's identity proposals were a reviewer's)."""
    from memstrata import ValidationError
    from memstrata.interfaces.claude_memory import AsyncMemstrataMemoryTool, MemstrataMemoryTool

    for make in (MemstrataMemoryTool, AsyncMemstrataMemoryTool):
        with pytest.raises(ValidationError):
            make(mem, ALICE, actor="reviewer")


def _message(n: int, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "claude-x",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10}}


def test_the_async_runner_drives_the_async_tool(mem: Memory) -> None:
    """``AsyncAnthropic().beta.messages.tool_runner`` takes the async tool (it refused the
    sync one with TypeError, and there was no other) and runs the model's commands through
    the same governed writes; the API is a recorded exchange on the SDK's own HTTP seam."""
    import asyncio
    import importlib

    from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient
    from anthropic.lib.tools import BetaAsyncAbstractMemoryTool

    from memstrata.interfaces.claude_memory import AsyncMemstrataMemoryTool

    mem.facts.propose(ALICE, claim="Alice uses vim", kind="preference", subject="alice",
                      attribute="editor", actor="user", source="chat")
    tool = AsyncMemstrataMemoryTool(mem, ALICE)
    assert isinstance(tool, BetaAsyncAbstractMemoryTool)
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
    line = _file(tool.tool).splitlines()
    [vim] = [ln for ln in line if "Alice uses vim" in ln]
    uses = [
        {"type": "tool_use", "id": "toolu_1", "name": "memory",
         "input": {"command": "str_replace", "path": WORKING_MD, "old_str": vim + "\n",
                   "new_str": ""}},
        {"type": "tool_use", "id": "toolu_2", "name": "memory",
         "input": {"command": "insert", "path": "/memories/episodic.md", "insert_line": 4,
                   "insert_text": "- 2026-08-03 (chat:3): Alice switched to helix [note]"}},
        {"type": "tool_use", "id": "toolu_3", "name": "memory",
         "input": {"command": "delete", "path": "/memories/episodic.md"}},
    ]
    replies = iter([_message(1, uses, "tool_use"),
                    _message(2, [{"type": "text", "text": "Noted."}], "end_turn")])
    sent: list[dict[str, Any]] = []
    # the HTTP package the SDK is built on (httpx, or httpx2 from anthropic 2.x)
    http = importlib.import_module(DefaultAsyncHttpxClient.__mro__[1].__module__.split(".")[0])

    def messages_api(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return http.Response(200, json=next(replies))

    async def run() -> str:
        client = AsyncAnthropic(api_key="test", http_client=DefaultAsyncHttpxClient(
            transport=http.MockTransport(messages_api)))
        runner = client.beta.messages.tool_runner(
            model="claude-x", max_tokens=64, tools=[tool],
            messages=[{"role": "user", "content": "I use helix now, not vim."}])
        final = await runner.until_done()
        return str(final.content[0].text)  # type: ignore[union-attr]

    assert asyncio.run(run()) == "Noted."
    assert sent[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = {r["tool_use_id"]: r for r in sent[1]["messages"][-1]["content"]}
    assert "alice/editor: retired" in str(results["toolu_1"]["content"])
    assert "Appended 1 entry" in str(results["toolu_2"]["content"])
    assert str(results["toolu_3"]["content"]).startswith("Error:")
    assert mem.facts.current(ALICE) == []
    assert [ep.text for ep in mem.episodes.log(ALICE)] == ["Alice switched to helix"]
    # the SDK's own command types, and a malformed input, as the sync tool answers them
    from anthropic.types.beta import BetaMemoryTool20250818ViewCommand

    shown = asyncio.run(tool.execute(BetaMemoryTool20250818ViewCommand(
        command="view", path="/memories/episodic.md")))
    assert "Alice switched to helix" in str(shown)
    assert str(asyncio.run(tool.call("view"))).startswith("Error: the input must be an object")
