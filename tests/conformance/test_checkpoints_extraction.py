"""Extraction keeps an open task's pending identity list; it never opens nor reopens a task
(``task=`` of :func:`memstrata.extraction.run.extract`).

Before: ``extract(..., task=T)`` on a closed (abandoned) task saved a new version, so the
task was back in ``tasks()`` and session context with its old next action, and the report
did not say so; a mistyped task name silently created a new task.
"""

from __future__ import annotations

from typing import Any

from memstrata import Memory, Scope
from memstrata.extraction.proposers import LLMProposer
from memstrata.providers.llm import RecordedClient

SESSION = [{"role": "user", "content": "By the way, I am the CTO now."}]


def _proposer() -> LLMProposer:
    return LLMProposer(RecordedClient([{"candidates": [{
        "claim": "Alice is the CTO", "kind": "profile", "subject": "alice",
        "attribute": "role", "turn": 0, "evidence": "I am the CTO now", "confidence": 0.95,
        "tier": "identity", "applies_to": "user"}]}]))


def _extract(mem: Memory, scope: Scope, task: str) -> Any:
    return mem.extract(scope, SESSION, _proposer(), task=task)


def test_extraction_never_reopens_a_closed_task(mem: Memory, alice: Scope) -> None:
    mem.checkpoints.save(alice, "migrate-db", objective="Move to Postgres",
                         next_action="drop the old tables")
    mem.checkpoints.close(alice, "migrate-db", outcome="abandoned: we stay on MySQL")
    report = _extract(mem, alice, "migrate-db")
    [item] = report.pending  # the fact is written all the same, and waits for review
    assert item.ref is not None
    assert report.checkpoint is None
    [error] = report.errors
    assert "migrate-db" in error and "closed" in error and "never reopens" in error
    cp = mem.checkpoints.current(alice, "migrate-db")
    assert cp is not None and cp.status == "closed" and cp.version == 2
    assert mem.checkpoints.tasks(alice) == []
    assert "drop the old tables" not in mem.context(alice, task="migrate-db").text


def test_extraction_creates_no_task(mem: Memory, alice: Scope) -> None:
    report = _extract(mem, alice, "migrate-dbb")  # a mistyped name
    assert len(report.pending) == 1 and report.checkpoint is None
    [error] = report.errors
    assert "migrate-dbb" in error and "no such task" in error
    assert mem.checkpoints.current(alice, "migrate-dbb") is None
    assert mem.checkpoints.tasks(alice, include_closed=True) == []


def test_extraction_lists_pending_identity_in_an_open_task(mem: Memory, alice: Scope) -> None:
    mem.checkpoints.save(alice, "onboarding", objective="Set up Alice's workspace")
    report = _extract(mem, alice, "onboarding")
    [item] = report.pending
    assert report.errors == []
    cp = mem.checkpoints.current(alice, "onboarding")
    assert cp is not None and cp.status == "open" and report.checkpoint == cp.ref
    [line] = cp.pending_identity_changes
    assert line.startswith(f"{item.ref} alice/role")
