"""Bad input to a public method is a typed ValidationError and changes nothing, on every
backend; through the tool dispatcher it is an error dict, never an exception."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from backends import StoreProbe
from memstrata import Memory, Scope, ToolDispatcher, ValidationError

S = Scope(user="alice", project="docs-site")


def calls(mem: Memory) -> list[tuple[str, Callable[[], Any]]]:
    run = mem.run(S)
    return [
        ("search since=yesterday", lambda: mem.episodes.search(S, "x", since="yesterday")),
        ("context facts_cap='5'", lambda: mem.context(S, facts_cap="5")),  # type: ignore[arg-type]
        ("recall principal surrogate", lambda: mem.recall(S, "x", principal="a\ud800")),
        ("scratch prefix surrogate", lambda: run.scratch.list("p\ud800")),
        ("scratch ttl=-1", lambda: run.scratch.write("k", "v", ttl=-1)),
        ("scratch ttl='1h'", lambda: run.scratch.write("k", "v", ttl="1h")),  # type: ignore[arg-type]
        ("recall decision={}", lambda: mem.recall(S, "x", decision={})),  # type: ignore[arg-type]
        ("recall layers=5", lambda: mem.recall(S, "x", layers=5)),  # type: ignore[arg-type]
        ("history(123)", lambda: mem.facts.history(123)),  # type: ignore[arg-type]
        ("retire(None)", lambda: mem.facts.retire(None, reason="r")),  # type: ignore[arg-type]
        ("feedback(1.5)", lambda: mem.feedback(1.5, "useful")),  # type: ignore[arg-type]
        ("append_many([1])", lambda: mem.episodes.append_many([1])),  # type: ignore[list-item]
        ("forget record_ids=5", lambda: mem.forget(S, record_ids=5)),  # type: ignore[arg-type]
        ("forget dry_run='maybe'", lambda: mem.forget(S, "x", dry_run="maybe")),  # type: ignore[arg-type]
        ("current limit=-1", lambda: mem.facts.current(S, limit=-1)),
        ("ledger list status", lambda: mem.ledger.list(S, status="done")),
        ("get not a ref", lambda: mem.get(42)),  # type: ignore[arg-type]
        ("checkpoint task None", lambda: mem.checkpoints.save(S, None, objective="x")),  # type: ignore[arg-type]
        ("run ttl", lambda: mem.run(S, ttl=timedelta(seconds=-5))),
    ]


def test_every_bad_argument_is_a_validation_error(mem: Memory, store: StoreProbe) -> None:
    mem.episodes.append(S, text="one episode", actor="user", source="s")
    before = store.counts()
    raised = {}
    for label, call in calls(mem):
        try:
            call()
        except ValidationError as exc:
            raised[label] = "ValidationError" if exc.hint or exc.message else "no message"
        except Exception as exc:
            raised[label] = f"{type(exc).__name__}: {exc}"
        else:
            raised[label] = "accepted"
    assert raised == {label: "ValidationError" for label, _ in calls(mem)}
    assert store.counts() == before


@pytest.mark.parametrize(("tool", "arguments"), [
    ("search_history", {"query": "x", "since": "yesterday"}),
    ("search_history", {"query": "x", "k": "five"}),
    ("recall", {"query": "x", "decision": {}}),
    ("scratch_list", {"prefix": 5}),
    ("forget", {"record_ids": 5}),
    ("log_episode", {"text": "t", "source": "s", "observed_at": "next week"}),
])
def test_the_dispatcher_returns_a_typed_error_dict(mem: Memory, tool: str,
                                                  arguments: dict[str, Any]) -> None:
    with ToolDispatcher(mem, S) as tools:
        out = tools.dispatch(tool, arguments)
    assert out["type"] == "ValidationError" and out["error"]
