"""Bad input to a public method is a typed ValidationError and changes nothing, on every
backend; through the tool dispatcher it is an error dict, never an exception."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from backends import StoreProbe
from memstrata import ArgumentError, Memory, Scope, ToolDispatcher, ValidationError

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
        ("recall k=0", lambda: mem.recall(S, "x", k=0)),
        ("search k=10**9", lambda: mem.episodes.search(S, "x", k=10**9)),
        ("recall layers=[]", lambda: mem.recall(S, "x", layers=[])),
        ("recall layers=['nope']", lambda: mem.recall(S, "x", layers=["nope"])),
        ("recall decision='x'", lambda: mem.recall(S, "x", decision="x")),
        ("recall budget=-1", lambda: mem.recall(S, "x", budget_tokens=-1)),
        ("recall since > until", lambda: mem.recall(S, "x", since="2026-03-01",
                                                    until="2026-02-01")),
        ("search since > until", lambda: mem.episodes.search(S, "x", since="2026-03-01",
                                                             until="2026-02-01")),
        ("log since > until", lambda: mem.episodes.log(S, since="2026-03-01",
                                                       until="2026-02-01")),
        ("search scope='alice'", lambda: mem.episodes.search("alice", "x")),  # type: ignore[arg-type]
        ("append thread=5", lambda: mem.episodes.append(S, text="t", actor="user", source="s",
                                                        thread=5)),  # type: ignore[arg-type]
        ("append thread=''", lambda: mem.episodes.append(S, text="t", actor="user", source="s",
                                                         thread="")),
        ("run.log thread=5", lambda: run.log("t", source="s", thread=5)),
        ("forget match=''", lambda: mem.forget(S, "")),
        ("get checkpoint:x", lambda: mem.get("checkpoint:x", scope=S)),
        ("get checkpoint:x@y", lambda: mem.get("checkpoint:x@y", scope=S)),
    ]


def test_every_bad_argument_is_a_validation_error(mem: Memory, store: StoreProbe) -> None:
    mem.episodes.append(S, text="one episode", actor="user", source="s")
    before = store.counts()
    raised = {}
    for label, call in calls(mem):
        try:
            call()
        except ValidationError as exc:  # with a message, and a hint saying what to do
            raised[label] = "ValidationError" if exc.hint and exc.message else \
                f"no hint: {exc.message}"
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
    ("log_episode", {"text": "t", "source": "s", "thread": ""}),  # as the API refuses it
    ("recall", {"query": "x", "layers": []}),
    ("search_history", {"query": "x", "since": "2026-03-01", "until": "2026-02-01"}),
])
def test_the_dispatcher_returns_a_typed_error_dict(mem: Memory, store: StoreProbe, tool: str,
                                                  arguments: dict[str, Any]) -> None:
    with ToolDispatcher(mem, S) as tools:
        before = store.counts()  # after the session's own run began
        out = tools.dispatch(tool, arguments)
        assert store.counts() == before
    assert out["type"] == "ValidationError" and out["error"] and out["hint"]


def misfit_calls(mem: Memory) -> list[tuple[str, Callable[[], Any]]]:
    """Calls whose arguments do not fit the method: Python itself would raise TypeError."""
    run = mem.run(S)
    bad: Any = {"bogus": 1}
    return [
        ("recall unknown keyword", lambda: mem.recall(S, "x", **bad)),
        ("context unknown keyword", lambda: mem.context(S, "t", **bad)),
        ("forget unknown keyword", lambda: mem.forget(S, "x", **bad)),
        ("append without text", lambda: mem.episodes.append(S, **{"actor": "user",
                                                                   "source": "s"})),
        ("append unknown keyword", lambda: mem.episodes.append(S, text="t", actor="user",
                                                               source="s", **bad)),
        ("search too many positional", lambda: mem.episodes.search(*[S, "x", 5, 6, 7])),
        ("propose unknown keyword", lambda: mem.facts.propose(
            S, claim="c", kind="preference", subject="alice", attribute="a", actor="user",
            source="s", **bad)),
        ("facts.current unknown keyword", lambda: mem.facts.current(S, **bad)),
        ("checkpoint save no task", lambda: mem.checkpoints.save(*[S], objective="o")),
        ("ledger begin without intent", lambda: mem.ledger.begin(*[S, "k"])),
        ("run.log no source", lambda: run.log(*["t"])),
        ("run.scratch.write no value", lambda: run.scratch.write(*["k"])),
        ("procedures unknown keyword", lambda: mem.procedures.list(S, **bad)),
        ("Memory.open unknown keyword", lambda: Memory.open(**bad)),
        ("ToolDispatcher unknown keyword", lambda: ToolDispatcher(mem, S, **bad)),
        ("static method, no argument", lambda: mem.facts.embed_text(*[])),
        ("run.checkpoint.save by=", lambda: mem.run(S, task="t").checkpoint.save(
            objective="o", by="me")),
    ]


def test_a_call_that_does_not_fit_the_signature_is_an_argument_error(
        mem: Memory, store: StoreProbe) -> None:
    """An unknown keyword, a missing argument or too many positional ones: an
    ArgumentError (a ValidationError, and a TypeError as Python raises for such calls) whose
    hint shows the signature; nothing is written."""
    before = store.counts()
    raised = {}
    for label, call in misfit_calls(mem):
        try:
            call()
        except ArgumentError as exc:
            ok = isinstance(exc, ValidationError) and isinstance(exc, TypeError)
            raised[label] = "ArgumentError" if ok and "(" in exc.hint else f"bad: {exc!r}"
        except Exception as exc:
            raised[label] = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
        else:
            raised[label] = "accepted"
    assert raised == {label: "ArgumentError" for label, _ in misfit_calls(mem)}
    assert store.counts() == {**before, "runs": store.counts().get("runs", 0)}
    # the class the caller holds is named (get is defined on Facts' base class)
    with pytest.raises(ArgumentError, match=r"^Facts\.get\(\)") as raised_get:
        mem.facts.get(*[])
    assert raised_get.value.hint.startswith("call it as Facts.get(fact_id")


def test_a_type_error_inside_a_fitting_call_is_not_relabelled() -> None:
    """Only the call's shape is judged: a TypeError the method raises itself stays one."""
    from memstrata.calls import checked_calls

    @checked_calls
    class Thing:
        def act(self, x: int) -> int:
            return x + "1"  # type: ignore[operator,no-any-return]

    with pytest.raises(TypeError) as raised:
        Thing().act(1)
    assert not isinstance(raised.value, ArgumentError)
    with pytest.raises(ArgumentError, match=r"Thing\.act\(\)"):
        Thing().act(1, 2)  # type: ignore[call-arg]
