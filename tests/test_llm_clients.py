"""LLM clients against a real local HTTP server (tests/llm_server.py) and recordings."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_server import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    RECORDINGS,
    LLMTestServer,
    Reply,
    anthropic_body,
    anthropic_tool_reply,
    load_recording,
    openai_body,
)
from memstrata.errors import ConfigError, ProviderError
from memstrata.providers.llm import (
    AnthropicClient,
    LLMClient,
    OpenAICompatibleClient,
    RecordedClient,
    client_from_env,
    client_from_spec,
    parse_json_output,
    schema_errors,
)

OPENAI_KEY = "sk-test-4f9c2b7e1d8a6350c9e2b7f1a4d6e890"
ANTHROPIC_KEY = "sk-ant-test-0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"

SCHEMA: dict[str, Any] = {
    "title": "extraction",
    "type": "object",
    "properties": {
        "candidates": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "claim": {"type": "string"},
                    "kind": {
                        "type": "string",
                        "enum": ["preference", "profile", "constraint", "system_fact", "decision"],
                    },
                    "subject": {"type": "string"},
                    "attribute": {"type": "string"},
                    "confidence": {"type": "number"},
                    "turn": {"type": "integer"},
                },
                "required": ["claim", "kind", "subject", "attribute", "confidence", "turn"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["candidates"],
    "additionalProperties": False,
}

EXPECTED = json.loads(
    load_recording("openai_extraction_json")["body"]["choices"][0]["message"]["content"]
)


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as srv:
        yield srv


class Waits(list[float]):
    """Injected sleep: records each backoff wait instead of spending it."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def openai_client(server: LLMTestServer, **kwargs: Any) -> OpenAICompatibleClient:
    kwargs.setdefault("api_key", OPENAI_KEY)
    kwargs.setdefault("sleep", Waits())
    return OpenAICompatibleClient(server.openai_base_url, "qwen2.5-7b-instruct", **kwargs)


def anthropic_client(server: LLMTestServer, **kwargs: Any) -> AnthropicClient:
    kwargs.setdefault("sleep", Waits())
    return AnthropicClient(ANTHROPIC_KEY, "claude-sonnet-4-5", base_url=server.url, **kwargs)


# ------------------------------------------------------------------ OpenAI-compatible


def test_openai_json_schema_request_and_parsed_result(server: LLMTestServer) -> None:
    server.queue_recording("openai_extraction_json")
    client = openai_client(server)

    result = client.complete_json("Extract durable facts.", "turn 3: ...", SCHEMA, max_tokens=300)

    assert result == EXPECTED
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert request.body["model"] == "qwen2.5-7b-instruct"
    assert request.body["max_tokens"] == 300
    assert request.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "extraction", "schema": SCHEMA, "strict": True},
    }
    system, user = request.body["messages"]
    assert system["role"] == "system" and system["content"].startswith("Extract durable facts.")
    assert json.dumps(SCHEMA) in system["content"]  # every mode states the schema
    assert user == {"role": "user", "content": "turn 3: ..."}
    assert client.usage.requests == 1
    assert client.usage.input_tokens == 812 and client.usage.output_tokens == 103


@pytest.mark.parametrize("recording", ["ollama_fenced_json", "ollama_think_json"])
def test_openai_tolerates_fences_prose_and_think_blocks(
    server: LLMTestServer, recording: str
) -> None:
    server.queue_recording(recording)
    assert openai_client(server).complete_json("s", "u", SCHEMA) == EXPECTED


def test_openai_steps_down_to_json_object_and_remembers(server: LLMTestServer) -> None:
    server.queue_recording("llamacpp_error_response_format")  # HTTP 500 naming response_format
    server.queue_recording("llamacpp_json_object_ok")
    waits = Waits()
    client = openai_client(server, sleep=waits)

    assert client.complete_json("s", "u", SCHEMA) == EXPECTED

    first, second = server.requests
    assert first.body["response_format"]["type"] == "json_schema"
    assert second.body["response_format"] == {"type": "json_object"}
    assert json.dumps(SCHEMA) in second.body["messages"][0]["content"]
    assert waits == []  # an adaptable refusal is not retried as a 500
    assert client.json_mode == "json_object"

    server.queue_recording("llamacpp_json_object_ok")
    assert client.complete_json("s", "u", SCHEMA) == EXPECTED
    assert len(server.requests) == 3
    assert server.requests[2].body["response_format"] == {"type": "json_object"}


def test_openai_steps_down_to_prompt_only_when_json_object_is_refused(
    server: LLMTestServer,
) -> None:
    refusal = {"error": "'response_format.type' must be 'json_schema' or 'text'"}
    server.queue_openai(
        Reply(400, {"error": {"message": "Unsupported response_format type json_schema"}}),
        Reply(400, refusal),
        Reply(200, openai_body(json.dumps(EXPECTED))),
    )
    client = openai_client(server)

    assert client.complete_json("s", "u", SCHEMA) == EXPECTED
    assert [r.body.get("response_format", {}).get("type") for r in server.requests] == [
        "json_schema",
        "json_object",
        None,
    ]
    assert client.json_mode == "prompt"


def test_openai_switches_to_max_completion_tokens_when_asked(server: LLMTestServer) -> None:
    message = (
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead."
    )
    server.queue_openai(
        Reply(400, {"error": {"message": message, "type": "invalid_request_error"}}),
        Reply(200, openai_body("Done.")),
    )
    client = openai_client(server)

    assert client.complete_text("s", "u", max_tokens=77) == "Done."
    first, second = server.requests
    assert first.body["max_tokens"] == 77
    assert "max_tokens" not in second.body and second.body["max_completion_tokens"] == 77


def test_openai_retries_429_honouring_retry_after(server: LLMTestServer) -> None:
    server.queue_recording("openai_error_rate_limit")  # retry-after-ms: 1500, retry-after: 2
    server.queue(OPENAI_PATH, Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "7"}))
    server.queue_recording("openai_extraction_json")
    waits = Waits()
    client = openai_client(server, sleep=waits, max_wait=5.0)

    assert client.complete_json("s", "u", SCHEMA) == EXPECTED
    assert waits == [1.5, 5.0]  # ms header preferred; seconds header capped at max_wait
    assert len(server.requests) == 3


def test_openai_retry_backoff_really_sleeps_and_recovers(server: LLMTestServer) -> None:
    server.queue_openai(Reply(503, "upstream busy"), Reply(200, openai_body("ok then")))
    client = OpenAICompatibleClient(server.openai_base_url, "m", backoff=0.01)
    assert client.complete_text("s", "u") == "ok then"
    assert len(server.requests) == 2


def test_openai_retries_are_bounded(server: LLMTestServer) -> None:
    server.queue_openai(*[Reply(500, {"error": {"message": "CUDA out of memory"}})] * 4)
    waits = Waits()
    client = openai_client(server, sleep=waits, max_retries=2, backoff=0.25)

    with pytest.raises(ProviderError) as caught:
        client.complete_text("s", "u")

    assert len(server.requests) == 3
    assert waits == [0.25, 0.5]
    error = caught.value
    assert error.details["status"] == 500
    assert "HTTP 500 after 2 retries" in str(error)
    assert "CUDA out of memory" in str(error)
    assert "qwen2.5-7b-instruct" in str(error)


def test_openai_truncated_json_is_a_provider_error(server: LLMTestServer) -> None:
    server.queue_recording("llamacpp_truncated_json")
    with pytest.raises(ProviderError) as caught:
        openai_client(server).complete_json("s", "u", SCHEMA)
    assert "malformed JSON" in str(caught.value)
    assert "cut off" in str(caught.value)
    assert caught.value.hint == "raise max_tokens"


def test_openai_off_schema_json_is_a_provider_error(server: LLMTestServer) -> None:
    answer = {"candidates": [{"claim": "x", "kind": "rumour", "subject": "a"}]}
    server.queue_openai(Reply(200, openai_body(json.dumps(answer))))
    with pytest.raises(ProviderError) as caught:
        openai_client(server).complete_json("s", "u", SCHEMA)
    message = str(caught.value)
    assert "does not fit the schema" in message
    assert "'rumour' is not one of" in message
    assert "missing required key 'attribute'" in message


def test_openai_timeout_is_a_provider_error_without_retry(server: LLMTestServer) -> None:
    server.queue_openai(Reply(200, openai_body("late"), delay=1.0))
    client = openai_client(server, timeout=0.2)
    with pytest.raises(ProviderError) as caught:
        client.complete_text("s", "u")
    assert "did not answer within 0.2 s" in str(caught.value)
    assert caught.value.details["status"] is None
    assert len(server.requests) == 1


def test_openai_bad_key_names_the_env_var_and_never_the_key(
    server: LLMTestServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="memstrata")
    server.queue(OPENAI_PATH, Reply(429, {"error": {"message": "busy"}}, {"retry-after": "0"}))
    # A server that echoes the key it was sent must not make us print it.
    server.queue_openai(
        Reply(401, {"error": {"message": f"Incorrect API key provided: {OPENAI_KEY}"}})
    )
    client = openai_client(server)

    with pytest.raises(ProviderError) as caught:
        client.complete_json("s", "u", SCHEMA)

    error = caught.value
    assert error.details["status"] == 401
    assert "OPENAI_API_KEY" in (error.hint or "")
    assert server.requests[-1].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert "HTTP 429" in caplog.text and "POST" in caplog.text  # the log did record the calls
    for text in (str(error), repr(error.details), caplog.text, repr(client)):
        assert OPENAI_KEY not in text


def test_openai_recorded_invalid_key(server: LLMTestServer) -> None:
    server.queue_recording("openai_error_invalid_key")
    with pytest.raises(ProviderError, match="HTTP 401"):
        openai_client(server).complete_text("s", "u")


def test_connection_refused_is_a_provider_error() -> None:
    with LLMTestServer() as gone:
        url = gone.openai_base_url
    client = OpenAICompatibleClient(url, "m", sleep=Waits())
    with pytest.raises(ProviderError, match="cannot connect"):
        client.complete_text("s", "u")


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        (Reply(200, "<html>welcome to nginx</html>"), "not JSON"),
        (Reply(200, {"object": "list", "data": []}), "unexpected body"),
        (Reply(200, {"choices": [{"message": {"content": 42}}]}), "unexpected body"),
        (Reply(404, {"error": "model 'qwen9' not found"}), "model 'qwen9' not found"),
    ],
)
def test_openai_unusable_answers_are_provider_errors(
    server: LLMTestServer, reply: Reply, fragment: str
) -> None:
    server.queue_openai(reply)
    with pytest.raises(ProviderError) as caught:
        openai_client(server).complete_json("s", "u", SCHEMA)
    assert fragment in str(caught.value)


def test_openai_text_strips_think_and_rejects_empty_or_refused(server: LLMTestServer) -> None:
    summary = load_recording("openai_summary_text")["body"]["choices"][0]["message"]["content"]
    server.queue_recording("openai_summary_text")
    server.queue_openai(
        Reply(200, openai_body("<think>plan the summary</think>\nShort summary.")),
        Reply(200, openai_body("", finish_reason="length")),
        Reply(200, {"choices": [{"message": {"content": None, "refusal": "I can't help."}}]}),
    )
    client = openai_client(server)

    assert client.complete_text("Summarise.", "turns...") == summary
    assert client.complete_text("s", "u") == "Short summary."
    with pytest.raises(ProviderError, match="empty answer") as caught:
        client.complete_text("s", "u")
    assert caught.value.hint == "raise max_tokens"
    with pytest.raises(ProviderError, match="refused"):
        client.complete_text("s", "u")
    assert "response_format" not in server.requests[0].body


# -------------------------------------------------------------------------- Anthropic


def test_anthropic_forced_tool_request_and_result(server: LLMTestServer) -> None:
    server.queue_recording("anthropic_tool_use")
    client = anthropic_client(server)

    assert (
        client.complete_json("Extract durable facts.", "turns", SCHEMA, max_tokens=500) == EXPECTED
    )

    [request] = server.requests
    assert request.path == ANTHROPIC_PATH
    assert request.headers["x-api-key"] == ANTHROPIC_KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    body = request.body
    assert body["model"] == "claude-sonnet-4-5" and body["max_tokens"] == 500
    assert body["system"] == "Extract durable facts."
    assert body["messages"] == [{"role": "user", "content": "turns"}]
    [tool] = body["tools"]
    assert tool["name"] == "extraction" and tool["input_schema"] == SCHEMA
    assert body["tool_choice"] == {"type": "tool", "name": "extraction"}
    assert client.usage.input_tokens == 1021 and client.usage.output_tokens == 164


def test_anthropic_wraps_non_object_schemas(server: LLMTestServer) -> None:
    server.queue_anthropic(Reply(200, anthropic_tool_reply({"result": ["a", "b"]})))
    schema = {"type": "array", "items": {"type": "string"}}
    assert anthropic_client(server).complete_json("s", "u", schema) == ["a", "b"]
    tool = server.requests[0].body["tools"][0]
    assert tool["name"] == "response"
    assert tool["input_schema"]["properties"]["result"] == schema


def test_anthropic_text_answer_with_json_is_parsed_when_no_tool_was_used(
    server: LLMTestServer,
) -> None:
    text = "Sure.\n```json\n" + json.dumps(EXPECTED) + "\n```"
    server.queue_anthropic(Reply(200, anthropic_body([{"type": "text", "text": text}])))
    assert anthropic_client(server).complete_json("s", "u", SCHEMA) == EXPECTED


def test_anthropic_retries_overloaded_then_succeeds(server: LLMTestServer) -> None:
    server.queue_recording("anthropic_error_overloaded")  # 529, retry-after: 1
    server.queue_recording("anthropic_text")
    waits = Waits()
    client = anthropic_client(server, sleep=waits, max_wait=0.05)
    assert client.complete_text("Summarise.", "turns").startswith("The user (Alice)")
    assert waits == [0.05]
    assert "tools" not in server.requests[1].body


def test_anthropic_bad_key(server: LLMTestServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="memstrata")
    server.queue_recording("anthropic_error_invalid_key")
    client = anthropic_client(server)
    with pytest.raises(ProviderError) as caught:
        client.complete_json("s", "u", SCHEMA)
    assert "invalid x-api-key" in str(caught.value)
    assert "ANTHROPIC_API_KEY" in (caught.value.hint or "")
    assert "401" in caplog.text
    for text in (str(caught.value), caplog.text, repr(client)):
        assert ANTHROPIC_KEY not in text


def test_anthropic_malformed_tool_input_is_a_provider_error(server: LLMTestServer) -> None:
    block = {"type": "tool_use", "id": "t", "name": "extraction", "input": {"candidates": "none"}}
    server.queue_anthropic(Reply(200, anthropic_body([block], stop_reason="tool_use")))
    with pytest.raises(ProviderError, match=r"\$\.candidates: expected array"):
        anthropic_client(server).complete_json("s", "u", SCHEMA)


def test_anthropic_requires_a_key() -> None:
    with pytest.raises(ConfigError, match="API key"):
        AnthropicClient("", "claude-sonnet-4-5")


# ---------------------------------------------------------------------- replay


def _ok_openai_recordings() -> list[str]:
    names = []
    for path in sorted(RECORDINGS.glob("*.json")):
        recording = json.loads(path.read_text())
        if recording["provider"] == "openai" and recording["status"] == 200:
            names.append(path.stem)
    return names


@pytest.mark.parametrize("name", _ok_openai_recordings())
def test_recorded_client_parses_exactly_like_the_http_client(
    server: LLMTestServer, name: str
) -> None:
    """Same recording, same outcome (value or error message) through both paths."""

    def outcome(client: LLMClient) -> object:
        try:
            return client.complete_json("s", "u", SCHEMA)
        except ProviderError as exc:
            return ("error", exc.message.split(")", 1)[-1], exc.hint)

    server.queue_recording(name)
    live = outcome(openai_client(server))
    replayed = outcome(RecordedClient([load_recording(name)["body"]]))
    assert live == replayed


def test_recorded_client_replays_in_order_and_records_prompts() -> None:
    client = RecordedClient(
        [
            "```json\n" + json.dumps(EXPECTED) + "\n```",
            load_recording("anthropic_tool_use")["body"],
            load_recording("anthropic_text"),
            "not json at all",
        ]
    )
    assert isinstance(client, LLMClient)
    assert client.complete_json("sys", "first", SCHEMA) == EXPECTED
    assert client.complete_json("sys", "second", SCHEMA) == EXPECTED
    assert client.complete_text("sys", "third").startswith("The user (Alice)")
    with pytest.raises(ProviderError, match="malformed JSON"):
        client.complete_json("sys", "fourth", SCHEMA)
    assert [call["user"] for call in client.calls] == ["first", "second", "third", "fourth"]
    with pytest.raises(ProviderError, match="no more responses"):
        client.complete_text("sys", "fifth")


def test_recorded_client_replays_http_errors() -> None:
    client = RecordedClient([load_recording("openai_error_rate_limit")])
    with pytest.raises(ProviderError) as caught:
        client.complete_text("s", "u")
    assert caught.value.details["status"] == 429
    assert "Rate limit reached" in str(caught.value)


def test_recorded_client_from_file_and_spec(tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    path.write_text(json.dumps({"responses": [json.dumps(EXPECTED), "plain words"]}))
    client = client_from_spec(f"recorded:{path}")
    assert isinstance(client, RecordedClient)
    assert client.complete_json("s", "u", SCHEMA) == EXPECTED
    assert client.complete_text("s", "u") == "plain words"
    single = RecordedClient.from_file(RECORDINGS / "anthropic_tool_use.json")
    assert single.complete_json("s", "u", SCHEMA) == EXPECTED
    with pytest.raises(ConfigError):
        RecordedClient.from_file(tmp_path / "missing.json")


# ------------------------------------------------------------------------- specs


def test_spec_openai_compatible_with_url_and_colon_model() -> None:
    client = client_from_spec("openai:llama3.1:8b@http://127.0.0.1:11434/v1/", env={})
    assert isinstance(client, OpenAICompatibleClient)
    assert client.model == "llama3.1:8b"
    assert client.base_url == "http://127.0.0.1:11434/v1"
    ollama = client_from_spec("ollama:qwen2.5:7b", env={})
    assert isinstance(ollama, OpenAICompatibleClient)
    assert ollama.base_url == "http://127.0.0.1:11434/v1" and ollama.model == "qwen2.5:7b"


def test_spec_keys_come_from_env_and_are_required_for_hosted_apis() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        client_from_spec("openai:gpt-4o-mini", env={})
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        client_from_spec("anthropic:claude-sonnet-4-5", env={})
    hosted = client_from_spec(
        "anthropic:claude-3-5-sonnet-v2@20241022", env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    )
    assert isinstance(hosted, AnthropicClient)
    assert hosted.model == "claude-3-5-sonnet-v2@20241022"
    assert hosted.base_url == "https://api.anthropic.com"
    assert ANTHROPIC_KEY not in repr(hosted)


@pytest.mark.parametrize("spec", ["", "gpt-4o", "foo:bar", "openai:", "ollama:@http://x:1/v1"])
def test_bad_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError):
        client_from_spec(spec, env={})


def test_client_from_env_end_to_end(server: LLMTestServer) -> None:
    with pytest.raises(ConfigError, match="MEMSTRATA_LLM"):
        client_from_env({})
    env = {
        "MEMSTRATA_LLM": f"openai:qwen2.5-7b-instruct@{server.openai_base_url}",
        "OPENAI_API_KEY": OPENAI_KEY,
        "MEMSTRATA_LLM_TIMEOUT": "5",
    }
    client = client_from_env(env)
    assert isinstance(client, OpenAICompatibleClient) and client.timeout == 5.0
    server.queue_recording("openai_extraction_json")
    assert client.complete_json("s", "u", SCHEMA) == EXPECTED
    assert server.requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    anthropic_env = {
        "MEMSTRATA_LLM": f"anthropic:claude-x@{server.url}",
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
    }
    server.queue_recording("anthropic_tool_use")
    assert client_from_env(anthropic_env).complete_json("s", "u", SCHEMA) == EXPECTED
    with pytest.raises(ConfigError, match="MEMSTRATA_LLM_TIMEOUT"):
        client_from_env({**env, "MEMSTRATA_LLM_TIMEOUT": "soon"})


# ---------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("raw", "expect", "value"),
    [
        ('{"a": 1}', None, {"a": 1}),
        ('Sure! Here it is: {"a": [1, 2]} Hope that helps.', None, {"a": [1, 2]}),
        ('See turn [3]. {"a": 1}', "object", {"a": 1}),
        ("```\n[1, 2]\n```", "array", [1, 2]),
        ('<think>{"draft": true}</think>{"a": 2}', None, {"a": 2}),
        ('Format: {"a": 0}. Answer:\n```json\n{"a": 1}\n```', None, {"a": 1}),
    ],
)
def test_parse_json_output_variants(raw: str, expect: str | None, value: object) -> None:
    assert parse_json_output(raw, expect=expect) == value


@pytest.mark.parametrize("raw", ["", "   ", "{'a': 1}", '{"a": 1,', "no json here"])
def test_parse_json_output_failures(raw: str) -> None:
    with pytest.raises(ProviderError):
        parse_json_output(raw, provider="unit")


def test_schema_errors_subset() -> None:
    schema = {
        "type": "object",
        "required": ["n", "tags"],
        "properties": {
            "n": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "v": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "additionalProperties": False,
    }
    assert schema_errors({"n": 1, "tags": ["x"], "v": None}, schema) == []
    problems = schema_errors({"n": True, "tags": ["x", 2], "v": 3, "w": 0}, schema)
    assert problems == [
        "$.n: expected integer, got bool",
        "$.tags[1]: expected string, got int",
        "$.v: matches none of anyOf",
        "$: unexpected key 'w'",
    ]
