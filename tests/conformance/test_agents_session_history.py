"""The Agents SDK session's history stays one the Responses API accepts, on every backend:
large items are shrunk instead of refused, items come back in write order whatever the
writers' clocks, an expired call takes its output out of the history, and
``session_settings`` is taken as the SDK takes it (memstrata.interfaces.agents_session).
Runs go through ``Runner.run`` with the SDK's ``ScriptedModel`` (no network)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memstrata import ManualClock, Memory, Scope
from memstrata.errors import ValidationError

pytest.importorskip("agents")

from agents import Agent, Runner, set_tracing_disabled
from agents.memory import SQLiteSession
from agents.testing import ScriptedModel, assistant_message
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

import memstrata
from memstrata.interfaces import agents_session
from memstrata.interfaces.agents_session import MemstrataSession

ALICE = Scope(user="alice", project="docs-site")
INPUT_ITEM = TypeAdapter(ResponseInputItemParam)
PHOTO = "data:image/jpeg;base64,/9j/" + "A" * 400_000  # a ~300 KB photo, inline
SCREEN = "data:image/png;base64,iVBOR" + "B" * 500_000  # a computer-use screenshot

set_tracing_disabled(True)


def _stored_size(item: dict[str, Any]) -> int:
    return len(json.dumps(item, sort_keys=True, ensure_ascii=False))


def _run(agent: Agent[Any], turn: Any, session: MemstrataSession) -> Any:
    return asyncio.run(Runner.run(agent, turn, session=session))


def test_a_turn_with_a_large_image_runs_and_replays_valid_items(mem: Memory) -> None:
    session = MemstrataSession("photo", mem, ALICE)
    model = ScriptedModel([[assistant_message("A cat on a sofa.", item_id="m1")],
                           [assistant_message("It was a cat.", item_id="m2")]])
    agent = Agent(name="a", instructions="Describe images.", model=model)
    turn = [{"role": "user", "content": [
        {"type": "input_text", "text": "what is this?"},
        {"type": "input_image", "image_url": PHOTO, "detail": "auto"}]}]
    assert _run(agent, turn, session).final_output == "A cat on a sofa."
    assert model.calls[0].input[0]["content"][1]["image_url"] == PHOTO  # this turn: whole
    assert _run(agent, "And what was it?", session).final_output == "It was a cat."
    replayed = model.calls[1].input  # the next turn replays the stored history
    question = replayed[0]["content"]
    assert question[0] == {"type": "input_text", "text": "what is this?"}
    assert question[1]["type"] == "input_text" and "image omitted by memstrata" in \
        question[1]["text"] and "image/jpeg" in question[1]["text"]
    for item in session.items():
        INPUT_ITEM.validate_python(item)  # a shape the Responses API takes
        assert _stored_size(item) <= agents_session.ITEM_BUDGET


def test_large_binary_payloads_and_texts_are_shrunk_not_refused(mem: Memory) -> None:
    session = MemstrataSession("cua", mem, ALICE, observation_cap=1_000_000)
    small = "data:image/png;base64," + "C" * 50_000
    document = "INTRO " + "lorem ipsum dolor sit amet " * 12_000 + "THE-END"
    session.add([
        {"type": "computer_call", "call_id": "c1", "id": "cu1", "status": "completed",
         "action": {"type": "screenshot"}, "pending_safety_checks": []},
        {"type": "computer_call_output", "call_id": "c1",
         "output": {"type": "computer_screenshot", "image_url": SCREEN}},
        # two images: only the larger goes, the smaller then fits
        {"role": "user", "content": [{"type": "input_image", "image_url": PHOTO,
                                      "detail": "auto"},
                                     {"type": "input_image", "image_url": small,
                                      "detail": "auto"}]},
        {"role": "user", "content": [{"type": "input_file", "filename": "scan.pdf",
                                      "file_data": "JVBERi0" + "D" * 300_000}]},
        {"role": "user", "content": document},  # a pasted document, no binary in it
        {"type": "image_generation_call", "id": "ig1", "status": "completed",
         "result": "iVBOR" + "E" * 300_000},
    ])
    call, shot, photos, pdf, pasted, generated = session.items()
    assert call["action"] == {"type": "screenshot"}
    assert shot["output"] == {"type": "computer_screenshot", "image_url": agents_session.BLANK_PNG}
    assert photos["content"][0]["type"] == "input_text"
    assert photos["content"][1] == {"type": "input_image", "image_url": small, "detail": "auto"}
    assert pdf["content"] == [{"type": "input_text", "text": pdf["content"][0]["text"]}]
    assert "scan.pdf" in pdf["content"][0]["text"]
    text = pasted["content"]
    assert text.startswith("INTRO lorem") and "truncated by memstrata" in text
    assert "THE-END" not in text and len(text) > agents_session.ITEM_BUDGET // 2
    assert generated["result"] is None
    for item in (call, shot, photos, pdf, pasted, generated):
        INPUT_ITEM.validate_python(item)
        assert _stored_size(item) <= agents_session.ITEM_BUDGET
    # an item that fits is stored as given
    session.clear()
    session.add([{"role": "user", "content": [{"type": "input_image", "image_url": small,
                                               "detail": "low"}]}])
    assert session.items()[0]["content"][0]["image_url"] == small


WORKER = r"""
import asyncio, sys, time
skew = float(sys.argv[4])
_ns = time.time_ns
time.time_ns = lambda: _ns() + int(skew * 1e9)  # this worker's clock is off by `skew` s
from memstrata import ManualClock, Memory, Scope
from memstrata.interfaces.agents_session import MemstrataSession
store, scratch, turn = sys.argv[1], sys.argv[2] or None, sys.argv[3]
mem = Memory.open(store, scratch_url=scratch, embedder=None, clock=ManualClock(sys.argv[5]))
s = MemstrataSession("chat", mem, Scope(user="alice", project="docs-site"))
asyncio.run(s.add_items([{"role": "user", "content": f"{turn} question"},
                         {"role": "assistant", "content": f"{turn} answer"}]))
mem.close()
"""


def test_items_keep_write_order_when_a_writers_clock_is_behind(
        mem: Memory, store_url: str, scratch_url: str | None, clock: ManualClock) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(memstrata.__file__).parents[1]))
    for turn, skew in (("turn1", "0"), ("turn2", "-2"), ("turn3", "-5")):  # later, behind
        subprocess.run([sys.executable, "-c", WORKER, store_url, scratch_url or "", turn, skew,
                        clock.now().isoformat()], check=True, env=env, timeout=120)
    session = MemstrataSession("chat", mem, ALICE)
    assert [i["content"] for i in session.items()] == [
        f"turn{n} {part}" for n in (1, 2, 3) for part in ("question", "answer")]
    assert session.pop() == {"role": "assistant", "content": "turn3 answer"}
    session.add([{"role": "user", "content": "turn4 question"}])  # this clock: right again
    assert [i["content"] for i in session.items(3)] == [
        "turn2 answer", "turn3 question", "turn4 question"]


def test_an_expired_call_takes_its_output_out_of_the_history(
        mem: Memory, clock: ManualClock) -> None:
    session = MemstrataSession("approve", mem, ALICE)
    call = {"type": "function_call", "call_id": "call_1", "name": "delete_file",
            "arguments": '{"path": "/tmp/x"}'}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "deleted"}
    session.add([{"role": "user", "content": "delete /tmp/x"}, call])  # waits for approval
    clock.advance(days=2)  # approved two days later
    session.add([output, {"role": "assistant", "content": "Done."}])
    clock.advance(days=27)
    assert session.items()[1:] == [call, output, {"role": "assistant", "content": "Done."}]
    clock.advance(days=2)  # the call has expired, its output not yet
    assert session.items() == [{"role": "assistant", "content": "Done."}]
    model = ScriptedModel([[assistant_message("Hello again.", item_id="m1")]])
    agent = Agent(name="a", instructions="x", model=model)
    assert _run(agent, "hi", session).final_output == "Hello again."
    assert [i.get("type", "message") for i in model.calls[0].input] == ["message", "message"]
    # an output written without its call is never replayed either, whichever tool it is
    session.add([{"type": "computer_call_output", "call_id": "gone",
                  "output": {"type": "computer_screenshot", "image_url": "https://x.test/s.png"}},
                 {"type": "mcp_approval_response", "approval_request_id": "mcpr_1",
                  "approve": True}])
    kinds = [i.get("type", "message") for i in session.items()]
    assert "computer_call_output" not in kinds and "mcp_approval_response" not in kinds


def test_session_settings_are_taken_as_the_sdk_takes_them(mem: Memory, tmp_path: Path) -> None:
    mine = MemstrataSession("s", mem, ALICE, session_settings={"limit": 2})
    ref = SQLiteSession("s", str(tmp_path / "ref.db"), session_settings={"limit": 2})

    async def both() -> tuple[Any, Any]:
        for session in (mine, ref):
            await session.add_items([{"role": "user", "content": str(i)} for i in range(5)])
        return await mine.get_items(), await ref.get_items()

    got, expected = asyncio.run(both())
    assert got == expected == [{"role": "user", "content": "3"}, {"role": "user", "content": "4"}]
    model = ScriptedModel([[assistant_message("ok", item_id="m1")]])
    agent = Agent(name="a", instructions="x", model=model)
    _run(agent, "next", mine)  # the SDK resolves the run's settings over the session's
    assert [i["content"] for i in model.calls[0].input] == ["3", "4", "next"]
    for bad in ({"limt": 2}, {"limit": "many"}, ["limit", 2]):
        with pytest.raises(ValidationError):
            MemstrataSession("s", mem, ALICE, session_settings=bad)  # type: ignore[arg-type]
