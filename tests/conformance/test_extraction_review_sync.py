"""An identity change that extraction listed in a task's checkpoint leaves that list when a
person approves or rejects it (memstrata.layers.review, "Task checkpoints follow the
decision"), so the session context and get_current_task never offer a decided claim as
pending. The proposal is a recorded Anthropic answer served by a real local HTTP server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llm_server import LLMTestServer
from memstrata import Memory, Scope, ToolDispatcher
from memstrata.extraction.proposers import LLMProposer
from memstrata.providers.llm import AnthropicClient

INTRO = [
    {"role": "system", "content": "You are the docs team's writing assistant."},
    {"role": "user", "content": "Quick intro since you're new: I'm the docs team lead, and I "
                                "own the style guide."},
    {"role": "assistant", "content": "Thanks, Alice. What should we start with?"},
]
CLAIM = "Alice is the docs team lead and owns the style guide."


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as srv:
        yield srv


def listed(mem: Memory, alice: Scope, server: LLMTestServer) -> str:
    """Extract the recorded identity proposal into task ``style-guide``; its fact ref."""
    mem.checkpoints.save(alice, "style-guide", objective="Revise the style guide")
    mem.checkpoints.save(alice, "onboarding", objective="Onboard Alice", notes="no identity")
    server.queue_recording("extraction_anthropic_identity")
    client = AnthropicClient("sk-ant-local-test", "claude-sonnet-4-5", base_url=server.url,
                             max_retries=0)
    report = mem.extract(alice, INTRO, LLMProposer(client), task="style-guide")
    [item] = report.pending
    assert item.ref is not None
    cp = mem.checkpoints.current(alice, "style-guide")
    assert cp is not None and [line.split(" ", 1)[0] for line in
                               cp.pending_identity_changes] == [item.ref]
    return item.ref


def assert_not_pending(mem: Memory, alice: Scope, ref: str) -> None:
    cp = mem.checkpoints.current(alice, "style-guide")
    assert cp is not None and cp.pending_identity_changes == []
    text = mem.context(alice, task="style-guide").text
    assert "Pending identity changes" not in text and "approve or reject" not in text
    tool = ToolDispatcher(mem, alice, task="style-guide").dispatch("get_current_task", {})
    assert tool["checkpoint"]["pending_identity_changes"] == []
    # the other task saw no new version
    assert len(mem.checkpoints.versions(alice, "onboarding")) == 1


def test_rejecting_an_identity_change_clears_it_from_the_task(
        mem: Memory, alice: Scope, server: LLMTestServer) -> None:
    ref = listed(mem, alice, server)
    before = mem.checkpoints.current(alice, "style-guide")
    assert before is not None
    mem.review.reject(ref, reason="Alice leads the API docs, not the whole team", by="bob")
    assert mem.facts.get(ref).status == "rejected"
    assert_not_pending(mem, alice, ref)
    after = mem.checkpoints.current(alice, "style-guide")
    assert after is not None and after.version == before.version + 1
    assert after.objective == "Revise the style guide"  # the rest carried forward


def test_approving_an_identity_change_clears_it_from_the_task(
        mem: Memory, alice: Scope, server: LLMTestServer) -> None:
    ref = listed(mem, alice, server)
    mem.review.approve(ref, by="bob")
    assert [f.claim for f in mem.facts.current(alice)] == [CLAIM]
    assert_not_pending(mem, alice, ref)


def test_a_closed_task_is_not_reopened_by_a_decision(
        mem: Memory, alice: Scope, server: LLMTestServer) -> None:
    ref = listed(mem, alice, server)
    closed = mem.checkpoints.close(alice, "style-guide")
    mem.review.reject(ref, reason="not true", by="bob")
    after = mem.checkpoints.current(alice, "style-guide")
    assert after is not None and after.status == "closed" and after.version == closed.version
