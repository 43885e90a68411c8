"""Transcript rules (DESIGN §7): caps, failed calls, repeats, budget and summaries."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from llm_server import LLMTestServer, load_recording
from memstrata.errors import ProviderError, ValidationError
from memstrata.interfaces.transcript import (
    ExtractiveSummariser,
    LLMSummariser,
    Summariser,
    Transcript,
    render_messages,
)
from memstrata.providers.llm import OpenAICompatibleClient, RecordedClient
from memstrata.tokens import count_message_tokens, count_tokens

SYSTEM = "You are a release-notes agent for the docs site. Cite the changelog."
QUESTION = "Write the release notes for docs-site v17. Alice wants British spelling."
CHANGELOG = "https://example.com/docs-site/CHANGELOG.md"


def page(topic: str, sentences: int) -> str:
    """A tool observation of realistic texture: distinct sentences, ids, numbers."""
    return " ".join(
        f"{topic} change {i}: module m{i} was reworked in PR #{1200 + i}, "
        f"cutting p95 latency by {i % 7 + 3} ms."
        for i in range(sentences)
    )


class Recording:
    """A real summariser wrapper that remembers what it was asked to summarise."""

    def __init__(self, inner: Summariser | None = None) -> None:
        self.inner = inner or ExtractiveSummariser(max_tokens=150)
        self.inputs: list[list[dict[str, Any]]] = []

    def summarise(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.inputs.append([dict(m) for m in messages])
        return self.inner.summarise(messages)


class Agent:
    """Adds OpenAI-style call/result pairs the way an agent loop would."""

    def __init__(self, transcript: Transcript) -> None:
        self.t = transcript
        self.n = 0

    def call(self, name: str, result: str, *, ok: bool = True, **arguments: Any) -> dict[str, Any]:
        self.n += 1
        call_id = f"call_{self.n}"
        self.t.add(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": result}
        if not ok:
            message["ok"] = False
        self.t.add(message)
        return message


def fresh(**kwargs: Any) -> tuple[Transcript, Agent]:
    kwargs.setdefault("cap_unit", "tokens")  # these tests size observations in tokens
    transcript = Transcript(**kwargs)
    transcript.add(role="system", content=SYSTEM)
    transcript.add(role="user", content=QUESTION)
    return transcript, Agent(transcript)


def assert_valid_openai(messages: list[dict[str, Any]]) -> None:
    """Every tool result answers a call made just before it, and every call is answered."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "assistant":
            assert not open_calls, f"unanswered calls {open_calls}"
            open_calls = {c["id"] for c in message.get("tool_calls") or []}
        elif message["role"] == "tool" and "tool_call_id" in message:
            assert message["tool_call_id"] in open_calls, message
            open_calls.discard(message["tool_call_id"])
        else:
            assert not open_calls, f"unanswered calls {open_calls}"


def contents(transcript: Transcript) -> list[str]:
    return [str(m.get("content") or "") for m in transcript.messages()]


# -------------------------------------------------------------------------- caps


def test_long_observation_is_capped_with_an_honest_marker() -> None:
    transcript, agent = fresh(observation_cap=120, budget_tokens=100_000)
    original = page("search", 60)
    total = count_tokens(original)
    agent.call("fetch", original, url=CHANGELOG)

    capped = transcript.messages()[-1]["content"]
    assert count_tokens(capped) <= 120
    head, marker = capped.rsplit("\n", 1)
    assert original.startswith(head) and len(head) > 100
    match = re.fullmatch(r"\[… truncated by memstrata: (\d+) of (\d+) tokens cut\]", marker)
    assert match is not None
    assert int(match.group(2)) == total
    assert int(match.group(1)) == total - count_tokens(head)


def test_short_observations_and_non_tool_messages_are_not_capped() -> None:
    transcript, agent = fresh(observation_cap=50, budget_tokens=100_000)
    long_user = page("user", 20)
    transcript.add(role="user", content=long_user)
    agent.call("fetch", "200 OK, 3 entries", url=CHANGELOG)
    assert contents(transcript)[-3:] == [long_user, "", "200 OK, 3 entries"]


# ---------------------------------------------------------------- failed calls


def test_failed_call_dropped_once_same_tool_succeeds() -> None:
    transcript, agent = fresh(budget_tokens=100_000)
    agent.call("fetch", "HTTP 503 Service Unavailable", ok=False, url=CHANGELOG)
    agent.call("grep", "no match for 'export'", pattern="export")
    messages = transcript.messages()
    assert any(m.get("content") == "HTTP 503 Service Unavailable" for m in messages)

    agent.call("fetch", page("search", 3), url=CHANGELOG)

    messages = transcript.messages()
    assert not any("503" in str(m.get("content")) for m in messages)
    assert "call_1" not in json.dumps(messages)  # the assistant call went with its result
    assert "call_2" in json.dumps(messages) and "call_3" in json.dumps(messages)
    assert_valid_openai(messages)
    assert any("dropped failed fetch (a later call succeeded)" in e for e in transcript.events)


def test_recent_failure_is_kept_until_it_ages_out_of_the_last_turns() -> None:
    transcript, agent = fresh(budget_tokens=100_000, keep_last=3)
    agent.call("deploy_preview", "error: build step timed out after 600 s", ok=False)
    for i in range(2):
        agent.call("grep", f"{i} matches", pattern=f"p{i}")
        assert any("timed out" in c for c in contents(transcript))  # still within 3 turns
    agent.call("grep", "2 matches", pattern="p2")
    assert not any("timed out" in c for c in contents(transcript))
    assert_valid_openai(transcript.messages())


def test_failure_of_one_call_in_a_parallel_batch_keeps_the_other_call() -> None:
    transcript, _ = fresh(budget_tokens=100_000)
    transcript.add(
        {
            "role": "assistant",
            "content": "Fetching both sources.",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "fetch", "arguments": json.dumps({"url": CHANGELOG})},
                },
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q": "v17"}'},
                },
            ],
        }
    )
    transcript.add(role="tool", tool_call_id="a", content="HTTP 404", ok=False)
    transcript.add(role="tool", tool_call_id="b", content="3 issues labelled v17")
    Agent(transcript).call("fetch", "changelog text, 40 lines", url=CHANGELOG + "?raw=1")

    messages = transcript.messages()
    batch = next(m for m in messages if m.get("content") == "Fetching both sources.")
    assert [c["id"] for c in batch["tool_calls"]] == ["b"]
    assert "HTTP 404" not in json.dumps(messages)
    assert_valid_openai(messages)


def test_success_of_another_tool_does_not_drop_a_failure() -> None:
    transcript, agent = fresh(budget_tokens=100_000, keep_last=10)
    agent.call("deploy_preview", "error: quota exceeded", ok=False)
    agent.call("fetch", "ok page", url=CHANGELOG)
    assert "error: quota exceeded" in contents(transcript)


def test_generic_form_failures_and_annotations() -> None:
    transcript = Transcript(budget_tokens=100_000)
    transcript.add(role="system", content=SYSTEM)
    transcript.add(role="user", content=QUESTION)
    transcript.add(role="assistant", content="Fetching the changelog.")
    transcript.add(role="tool", name="fetch", url=CHANGELOG, ok=False, content="DNS failure")
    assert transcript.messages(annotations=True)[-1] == {
        "role": "tool",
        "name": "fetch",
        "url": CHANGELOG,
        "ok": False,
        "content": "DNS failure",
    }
    assert transcript.messages()[-1] == {"role": "tool", "name": "fetch", "content": "DNS failure"}
    transcript.add(role="tool", name="fetch", url=CHANGELOG, ok=True, content="v17: search")
    assert "DNS failure" not in contents(transcript)
    assert contents(transcript)[-2:] == ["Fetching the changelog.", "v17: search"]


# --------------------------------------------------------------------- repeats


def test_identical_results_keep_the_latest_and_stub_older_ones() -> None:
    transcript, agent = fresh(budget_tokens=100_000)
    body = page("search", 8)
    agent.call("search", body, q="v17 search")  # turn 2
    agent.call("grep", "7 matches", pattern="export")  # turn 3
    agent.call("search", body, q="v17 search rewrite")  # turn 4
    assert contents(transcript)[3] == "(same result as turn 4)"
    assert contents(transcript)[-1] == body

    agent.call("search", body, q="search v17")  # turn 5: every older copy points here
    texts = contents(transcript)
    assert texts.count(body) == 1 and texts[-1] == body
    assert texts.count("(same result as turn 5)") == 2
    assert_valid_openai(transcript.messages())


def test_same_url_refetched_supersedes_the_older_result() -> None:
    transcript, agent = fresh(budget_tokens=100_000)
    draft, final = page("draft", 3), page("final", 4)
    agent.call("fetch", draft, url=CHANGELOG)  # turn 2
    agent.call("fetch", final, url=CHANGELOG)  # turn 3
    texts = contents(transcript)
    assert texts[3] == "(superseded: same URL fetched again in turn 3)"
    assert texts[-1] == final


def test_tiny_identical_results_are_not_stubbed() -> None:
    transcript, agent = fresh(budget_tokens=100_000)
    agent.call("write_file", "ok", path="a.md")
    agent.call("write_file", "ok", path="b.md")
    assert contents(transcript).count("ok") == 2


# ---------------------------------------------------------------------- budget


def run_long_session(transcript: Transcript, agent: Agent, steps: int) -> None:
    for i in range(steps):
        agent.call("fetch", page(f"topic{i}", 12), url=f"https://example.com/pr/{i}")
        assert transcript.tokens() <= transcript.budget_tokens, (i, transcript.events)


def test_budget_is_respected_and_oldest_turns_become_one_summary() -> None:
    summariser = Recording()
    transcript, agent = fresh(
        budget_tokens=1500, observation_cap=400, summariser=summariser, keep_last=3
    )
    run_long_session(transcript, agent, 12)

    messages = transcript.messages()
    assert transcript.compactions >= 1
    assert messages[0] == {"role": "system", "content": SYSTEM}
    assert messages[1] == {"role": "user", "content": QUESTION}
    summaries = [m for m in messages if str(m["content"] or "").startswith("[Summary of turns")]
    assert len(summaries) == 1 and messages[2] is not None and messages[2] == summaries[0]
    # The newest turns are intact, the oldest are gone from the list.
    assert messages[-1]["content"] == page("topic11", 12)
    assert "topic0 change" not in json.dumps(messages[3:])
    assert_valid_openai(messages)
    # The summariser saw the oldest turns, never the pinned messages.
    first_input = summariser.inputs[0]
    assert any("topic0 change" in str(m.get("content")) for m in first_input)
    assert all(m.get("content") not in (SYSTEM, QUESTION) for m in first_input)
    assert transcript.tokens() == sum(count_message_tokens(m) for m in messages)


def test_second_compaction_folds_the_earlier_summary_in() -> None:
    summariser = Recording()
    transcript, agent = fresh(
        budget_tokens=1200, observation_cap=300, summariser=summariser, keep_last=2
    )
    run_long_session(transcript, agent, 14)
    assert transcript.compactions >= 2
    later_input = summariser.inputs[-1]
    assert str(later_input[0]["content"]).startswith("[Summary of turns 2-")
    summaries = [c for c in contents(transcript) if c.startswith("[Summary of turns")]
    assert len(summaries) == 1
    assert summaries[0].startswith("[Summary of turns 2-")  # covers from the first evicted turn


def test_keep_last_shrinks_when_the_last_turns_do_not_fit() -> None:
    transcript, agent = fresh(budget_tokens=900, observation_cap=350, keep_last=4)
    run_long_session(transcript, agent, 5)
    kept_results = [m for m in transcript.messages() if m["role"] == "tool"]
    assert 1 <= len(kept_results) < 4
    assert kept_results[-1]["content"] == page("topic4", 12)[: len(kept_results[-1]["content"])]


def test_a_single_oversized_turn_is_cut_to_fit() -> None:
    transcript, agent = fresh(budget_tokens=300, observation_cap=4000, keep_last=2)
    agent.call("fetch", page("huge", 80), url=CHANGELOG)
    assert transcript.tokens() <= 300
    last = transcript.messages()[-1]["content"]
    assert "tokens cut]" in last
    assert contents(transcript)[:2] == [SYSTEM, QUESTION]


def test_pinned_messages_over_budget_are_kept_and_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="memstrata")
    long_system = page("policy", 40)
    transcript = Transcript(budget_tokens=200)
    transcript.add(role="system", content=long_system)
    transcript.add(role="user", content=QUESTION)
    assert contents(transcript) == [long_system, QUESTION]
    assert "over its budget" in caplog.text


# ---------------------------------------------------------------- summarisers


def test_extractive_summariser_keeps_informative_sentences_in_order() -> None:
    messages = [
        {"role": "user", "content": "Okay, sounds good. The notes must use British spelling."},
        {"role": "assistant", "content": "Sure, I will do that now. Let me check."},
        {
            "role": "tool",
            "name": "fetch",
            "content": "Deploy preview failed with error E4031 on https://ci.example.com/run/88. "
            "Okay, sounds good. The export command ships in v17 behind flag export_v2.",
        },
        {"role": "assistant", "content": "Okay, sounds good. Let me check."},
    ]
    summary = ExtractiveSummariser(max_tokens=60).summarise(messages)
    lines = summary.splitlines()
    assert lines == [
        "- user: The notes must use British spelling.",
        "- tool fetch: Deploy preview failed with error E4031 on https://ci.example.com/run/88.",
        "- tool fetch: The export command ships in v17 behind flag export_v2.",
    ]
    assert count_tokens(summary) <= 60
    assert ExtractiveSummariser(max_tokens=60).summarise(messages) == summary
    assert ExtractiveSummariser(max_tokens=5).summarise(messages) == ""
    assert ExtractiveSummariser().summarise([]) == ""


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as srv:
        yield srv


def test_llm_summariser_over_http_replaces_the_oldest_turns(server: LLMTestServer) -> None:
    recorded = load_recording("openai_summary_text")["body"]["choices"][0]["message"]["content"]
    server.queue_recording("openai_summary_text")
    client = OpenAICompatibleClient(server.openai_base_url, "gpt-4o-mini", api_key="sk-test")
    summariser = LLMSummariser(client, max_tokens=200)
    assert isinstance(summariser, Summariser)
    transcript, agent = fresh(
        budget_tokens=1500, observation_cap=400, summariser=summariser, keep_last=2
    )
    agent.call("fetch", page("first", 12), url=CHANGELOG)
    for _ in range(10):
        agent.call("fetch", page(f"step{agent.n}", 12), url=f"https://example.com/{agent.n}")
        if transcript.compactions:
            break

    assert transcript.tokens() <= 1500
    summary = transcript.messages()[2]["content"]
    assert summary.startswith("[Summary of turns 2-") and summary.endswith(recorded)
    [request] = server.requests
    assert request.body["max_tokens"] == 200
    prompt = request.body["messages"][1]["content"]
    assert "first change 0" in prompt and f"tool (fetch, {CHANGELOG})" in prompt
    assert page(f"step{agent.n - 1}", 12)[:40] not in prompt  # the kept tail is not summarised
    assert "transcript" in request.body["messages"][0]["content"]


def test_llm_summariser_falls_back_when_the_provider_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages = [{"role": "tool", "name": "fetch", "content": page("search", 4)}]
    failing = RecordedClient([load_recording("openai_error_rate_limit")])
    summary = LLMSummariser(failing).summarise(messages)
    assert summary == ExtractiveSummariser(max_tokens=400).summarise(messages)
    assert "summary model failed" in caplog.text

    strict = LLMSummariser(RecordedClient(["not used"] * 0), raise_errors=True)
    with pytest.raises(ProviderError):
        strict.summarise(messages)


def test_render_messages_names_calls_tools_and_failures() -> None:
    text = render_messages(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "1",
                        "type": "function",
                        "function": {"name": "fetch", "arguments": '{"url": "u"}'},
                    }
                ],
            },
            {"role": "tool", "name": "fetch", "url": "u", "ok": False, "content": "HTTP 500"},
        ]
    )
    assert text == 'assistant: [called fetch({"url": "u"})]\n\ntool (fetch, u, failed): HTTP 500'


# ------------------------------------------------------------------- validation


def test_bad_input_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        Transcript(budget_tokens=0)
    with pytest.raises(ValidationError):
        Transcript(keep_last=0)
    with pytest.raises(ValidationError, match="role"):
        Transcript().add(role="function", content="x")


def test_extraction_and_the_transcript_flatten_messages_the_same_way() -> None:
    """One flattening of message content (memstrata.tokens.content_text): an Anthropic
    tool_result keeps its nested content in extraction as in the transcript helpers."""
    from memstrata.extraction.session import load_transcript
    from memstrata.tokens import content_text

    contents: list[Any] = [
        "plain text",
        [{"type": "text", "text": "a part"}, {"type": "image", "source": {}}],
        [{"type": "tool_result", "tool_use_id": "t1",
          "content": [{"type": "text", "text": "Build 812 failed: stale cache"}]}],
        [{"type": "tool_result", "tool_use_id": "t2", "content": "exit code 1"}],
        [{"type": "tool_result", "tool_use_id": "t3",
          "content": [{"type": "tool_result", "content": "nested result"}]}],
    ]
    turns = load_transcript([{"role": "user", "content": c} for c in contents])
    for turn, content in zip(turns, contents, strict=True):
        assert turn.content == content_text(content)
    assert turns[2].role == "tool" and "stale cache" in turns[2].content
    assert "nested result" in turns[4].content


def test_the_observation_cap_counts_characters_by_default() -> None:
    """A 20,000-character page enters capped at 4,000 characters, as the protocol says."""
    transcript = Transcript(budget_tokens=100_000)
    assert transcript.observation_cap == 4000 and transcript.cap_unit == "chars"
    transcript.add(role="user", content="Summarise the page.")
    transcript.add(role="assistant", content="",
                   tool_calls=[{"id": "c1", "type": "function",
                                "function": {"name": "fetch", "arguments": "{}"}}])
    page = "word " * 4000
    transcript.add(role="tool", tool_call_id="c1", content=page)
    stored = transcript.messages()[-1]["content"]
    assert len(stored) <= 4000 and "characters cut" in stored
    assert stored.startswith("word word")
    with pytest.raises(ValidationError):
        Transcript(cap_unit="words")
