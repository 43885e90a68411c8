"""The OpenAI Agents SDK session on memstrata (memstrata.interfaces.agents_session), on every
backend: the SDK's own ``SQLiteSession`` is the reference for the protocol, and
``Runner.run`` drives the session with recorded model outputs (no network)."""

from __future__ import annotations

import asyncio
import copy
import json
import random
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from backends import StoreProbe, open_store
from memstrata import ManualClock, Memory, Scope
from memstrata.errors import ValidationError

pytest.importorskip("agents")

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.memory import SessionABC, SQLiteSession
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage

from memstrata.interfaces.agents_session import MemstrataSession

ALICE = Scope(user="alice", project="docs-site")
CALLS = json.loads((Path(__file__).parents[1] / "data" / "agents_session_turns.json")
                   .read_text("utf-8"))["calls"]
TOKEN = "ghp_Zq8x4LmN2vB7cR1tY6uI0oP3aS5dF7gH9jK1"

set_tracing_disabled(True)


class RecordedModel(Model):
    """Replays recorded Responses-API outputs, one call at a time, and keeps each input."""

    def __init__(self, calls: list[list[dict[str, Any]]]) -> None:
        self.calls = list(calls)
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: str | None, input: Any,
                           *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(copy.deepcopy(input))
        output = []
        for item in self.calls.pop(0):
            cls = ResponseFunctionToolCall if item["type"] == "function_call" else \
                ResponseOutputMessage
            output.append(cls.model_validate(item))
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def test_operations_agree_with_the_sdks_sqlite_session(mem: Memory, tmp_path: Path) -> None:
    mine = MemstrataSession("conv-1", mem, ALICE, observation_cap=100_000)
    ref = SQLiteSession("conv-1", str(tmp_path / "ref.db"))
    assert isinstance(mine, SessionABC)
    rng = random.Random(3)

    async def run() -> None:
        for step in range(60):
            roll = rng.random()
            if roll < 0.45:
                items = [{"role": rng.choice(["user", "assistant"]),
                          "content": f"message {step}.{i}"} for i in range(rng.randint(1, 3))]
                if rng.random() < 0.3:  # a call and its output (alone, an output is dropped)
                    items += [{"type": "function_call", "call_id": f"c{step}", "name": "f",
                               "arguments": "{}"},
                              {"type": "function_call_output", "call_id": f"c{step}",
                               "output": "result " * rng.randint(1, 20)}]
                await mine.add_items(copy.deepcopy(items))
                await ref.add_items(copy.deepcopy(items))
            elif roll < 0.6:
                assert await mine.pop_item() == await ref.pop_item(), step
            elif roll < 0.95:
                limit = rng.choice([None, 0, 1, 3, 50])
                assert await mine.get_items(limit) == await ref.get_items(limit), (step, limit)
            else:
                await mine.clear_session()
                await ref.clear_session()
        assert await mine.get_items() == await ref.get_items()

    asyncio.run(run())


def test_runner_replays_the_session_with_capped_observations(
        mem: Memory, store: StoreProbe, scratch_url: str | None) -> None:
    tail = "END-OF-A-VERY-LONG-CHANGELOG"

    @function_tool
    def fetch_release_notes(version: str) -> str:
        """Fetch the release notes of a version."""
        return f"{version}: " + "merged PR: fix a typo in the docs. " * 300 + tail

    model = RecordedModel(CALLS)
    agent = Agent(name="docs", instructions="Help with release notes.", model=model,
                  tools=[fetch_release_notes])
    session = MemstrataSession("release-chat", mem, ALICE)

    async def run() -> tuple[Any, Any]:
        first = await Runner.run(agent, "Summarise the v17 release notes for me.",
                                 session=session)
        second = await Runner.run(agent, "What did I ask you about before?", session=session)
        return first, second

    first, second = asyncio.run(run())
    assert "42 merged PRs" in first.final_output and "v17" in second.final_output
    replayed = model.inputs[2]  # the third model call: the second run, history first
    kinds = [i.get("type", "message") for i in replayed]
    assert kinds == ["message", "function_call", "function_call_output", "message", "message"]
    assert replayed[0]["content"] == "Summarise the v17 release notes for me."
    output = replayed[2]["output"]
    assert len(output) <= 4000 and "truncated by memstrata" in output and tail not in output
    if scratch_url is None:  # the scratch lives in the database the probe reads
        assert not store.contains(tail)
    stored = session.items()
    assert len(stored) == 6 and stored[-1]["role"] == "assistant"
    # the same session id in another scope is another conversation
    assert MemstrataSession("release-chat", mem, Scope(user="bob")).items() == []


def test_items_are_screened_expire_and_are_forgotten(
        mem: Memory, clock: ManualClock, store: StoreProbe, scratch_url: str | None) -> None:
    session = MemstrataSession("s1", mem, ALICE)
    session.add([{"role": "user", "content": f"deploy with {TOKEN} please"}])
    [item] = session.items()
    assert TOKEN not in item["content"] and "deploy with" in item["content"]
    if scratch_url is None:  # the scratch lives in the database the probe reads
        assert not store.contains(TOKEN)
    clock.advance(days=31)
    assert session.items() == []
    session.add([{"role": "user", "content": "Quimperlé office opens on Monday"}])
    report = mem.forget(ALICE, force=True)
    assert report.counts.get("scratch", 0) >= 1 and session.items() == []


def test_bad_input_is_typed_and_stores_nothing(mem: Memory) -> None:
    session = MemstrataSession("s2", mem, ALICE)
    for bad in ([{"role": "user", "content": "ok"}, "not an item"],
                [{"role": "user", "content": object()}], "a string",
                # too large even with its text cut: the bulk is in 40,000 parts
                [{"role": "user", "content": [{"type": "input_text", "text": "x"}] * 40_000}]):
        with pytest.raises(ValidationError):
            session.add(bad)  # type: ignore[arg-type]
    assert session.items() == []
    with pytest.raises(ValidationError):
        session.items(limit="3")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        MemstrataSession("s3", mem, ALICE, observation_cap=0)


def test_sessions_of_two_scopes_never_touch_each_other(mem: Memory) -> None:
    a = MemstrataSession("chat", mem, Scope(user="alice"))
    b = MemstrataSession("chat", mem, Scope(user="bob"))
    a.add([{"role": "user", "content": "hi from alice"}])
    b.add([{"role": "user", "content": "hi from bob"}])
    a.clear()
    assert a.items() == [] and b.items() == [{"role": "user", "content": "hi from bob"}]
    assert b.pop() == {"role": "user", "content": "hi from bob"} and a.pop() is None


def test_quoted_secrets_are_redacted_and_items_stay_readable(mem: Memory) -> None:
    s = MemstrataSession("s4", mem, ALICE)
    s.add([{"role": "user", "content": 'export PGPASSWORD="Tr0ub4dor&3x"'},
           {"role": "user", "content": 'AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG/bPxRfi'
                                       'CYzq9R3tKLm2"'}])
    items = s.items()
    assert len(items) == 2
    assert "Tr0ub4dor" not in str(items) and "wJalrXUtnFEMI" not in str(items)
    assert s.items(5) == items and s.items(1) == items[1:]
    with pytest.raises(ValidationError):
        s.add([{"role": "user", "content": "fine"}, {"role": "user", "content": "\ud800"}])
    assert len(s.items()) == 2


class _RivalPopsFirst:
    """The session's scratch store, with a rival (another process's session) popping the
    newest item right after the first read: the interleaving that made two pops return one
    item. Everything else is the real store."""

    def __init__(self, inner: Any, rival: MemstrataSession) -> None:
        self._inner = inner
        self._rival = rival
        self.rival_got: list[Any] = []

    def entries(self, *args: Any) -> list[tuple[str, str]]:
        found = self._inner.entries(*args)
        if not self.rival_got:
            self.rival_got.append(self._rival.pop())
        return found  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_pop_that_loses_the_newest_item_takes_the_next(mem: Memory) -> None:
    rival = MemstrataSession("race", mem, ALICE)
    rival.add([{"role": "user", "content": f"m{i}"} for i in range(5)])
    store = _RivalPopsFirst(mem.scratch_store, rival)
    # the same database, another store object: as a second process sees it
    other = Memory(mem.db, clock=mem.clock, scratch_store=store)  # type: ignore[arg-type]
    popped = MemstrataSession("race", other, ALICE).pop()
    assert store.rival_got == [{"role": "user", "content": "m4"}]
    assert popped == {"role": "user", "content": "m3"}
    assert [i["content"] for i in rival.items()] == ["m0", "m1", "m2"]


def test_racing_pops_take_each_item_exactly_once(
        mem: Memory, store_url: str, scratch_url: str | None, clock: ManualClock) -> None:
    session = MemstrataSession("busy", mem, ALICE)
    items = [{"role": "user", "content": f"m{i}"} for i in range(40)]
    session.add(items)

    async def gather() -> list[Any]:  # the SDK's own route: pop_item in worker threads
        return list(await asyncio.gather(*(session.pop_item() for _ in range(20))))

    popped = asyncio.run(gather())
    assert sorted(p["content"] for p in popped) == sorted(f"m{i}" for i in range(20, 40))
    # and from another connection too, as a second process would, thread against thread
    second = open_store(store_url, scratch_url, clock)
    try:
        sessions = [session, MemstrataSession("busy", second, ALICE)]
        with ThreadPoolExecutor(8) as pool:
            popped += pool.map(lambda n: sessions[n % 2].pop(), range(25))
    finally:
        second.close()
    got = [p["content"] for p in popped if p is not None]
    assert sorted(got) == sorted(i["content"] for i in items)  # each once, none left behind
    assert popped.count(None) == 5 and session.items() == []
