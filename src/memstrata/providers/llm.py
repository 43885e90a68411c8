"""LLM clients behind one small typed protocol.

Contract:

- :class:`LLMClient` has two methods. ``complete_json`` returns the parsed
  JSON value the model produced for ``schema`` (checked against the schema's
  shape); ``complete_text`` returns plain text. Both raise
  :class:`~memstrata.errors.ProviderError` and nothing else for anything that
  goes wrong at or beyond the wire: HTTP errors, timeouts, unreachable
  servers, bodies of an unexpected shape, malformed or off-schema JSON. The
  message names the provider, the model, the HTTP status and what to do.
- Real clients speak HTTP with ``httpx`` (sync):
  :class:`OpenAICompatibleClient` (OpenAI, vLLM, Ollama, llama.cpp server,
  LM Studio: ``POST {base_url}/chat/completions``) and
  :class:`AnthropicClient` (``POST {base_url}/v1/messages``).
- Structured output. OpenAI-compatible: ``response_format`` ``json_schema``
  (strict); if the server refuses it (llama.cpp answers 500, older servers
  400/422, always naming ``response_format``) the client steps down to
  ``json_object``, then to no ``response_format`` at all, and remembers the
  step for later calls. The schema is always also stated in the system
  prompt, so every mode asks for the same thing. Anthropic: one forced tool
  whose ``input_schema`` is the schema; the ``tool_use`` block's ``input`` is
  the answer (a non-object schema is wrapped in ``{"result": ...}``).
- Parsing tolerates what models really emit: a leading ``<think>`` block,
  code fences, prose before or after the JSON. It does not repair broken
  JSON: that is a ProviderError, flagged as cut off when the model hit
  ``max_tokens``.
- HTTP, retries (429/5xx and dropped connections, bounded, honouring ``Retry-After``),
  error translation and key redaction are the shared stack of
  :mod:`memstrata.providers.http`: API keys are sent only in request headers and never
  appear in logs, ``repr`` or error messages.
- :class:`RecordedClient` replays recorded raw outputs or whole provider
  bodies through the same extraction and parsing code, so a malformed
  recording fails exactly as a live model would.
- :func:`client_from_spec` / :func:`client_from_env` build a client from a
  spec such as ``openai:MODEL@http://127.0.0.1:11434/v1`` or
  ``anthropic:claude-sonnet-4-5`` (env ``MEMSTRATA_LLM``).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx

from ..errors import ConfigError, ProviderError
from .http import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_WAIT,
    RETRY_STATUSES,
    HTTPClient,
    http_error,
)
from .structured import (
    _anthropic_output,
    _bad_shape,
    _decode_structured,
    _json_instruction,
    _openai_output,
    _schema_name,
    _text_output,
    parse_json_output,
    schema_errors,
)

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "RETRY_STATUSES",
    "AnthropicClient",
    "LLMClient",
    "OpenAICompatibleClient",
    "RecordedClient",
    "Usage",
    "client_from_env",
    "client_from_spec",
    "parse_json_output",
    "schema_errors",
]

log = logging.getLogger(__name__)

ANTHROPIC_VERSION = "2023-06-01"



@runtime_checkable
class LLMClient(Protocol):
    """What memstrata needs from a language model: JSON for a schema, or text."""

    def complete_json(
        self, system: str, user: str, schema: dict[str, Any], *, max_tokens: int = 1024
    ) -> Any:
        """Return the JSON value the model produced for ``schema``."""
        ...

    def complete_text(self, system: str, user: str, *, max_tokens: int = 1024) -> str:
        """Return the model's plain-text answer."""
        ...


@dataclass
class Usage:
    """Tokens billed so far by one client (as the server reported them)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


# ------------------------------------------------------------------ OpenAI-compatible

_JSON_MODES = ("json_schema", "json_object", "prompt")


def _rejects_response_format(status: int, body_text: str) -> bool:
    lowered = body_text.lower()
    return status in (400, 422, 500) and any(
        word in lowered for word in ("response_format", "json_schema", "json_object")
    )


def _rejects_max_tokens(status: int, body_text: str) -> bool:
    return status in (400, 422) and "max_completion_tokens" in body_text


class _LLMHTTPClient(HTTPClient):
    """An LLM client on the shared HTTP stack, counting the tokens it is billed."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.usage = Usage()

    def _count_usage(self, input_tokens: Any, output_tokens: Any) -> None:
        self.usage.requests += 1
        if isinstance(input_tokens, int):
            self.usage.input_tokens += input_tokens
        if isinstance(output_tokens, int):
            self.usage.output_tokens += output_tokens


class OpenAICompatibleClient(_LLMHTTPClient):
    """Chat Completions over HTTP: OpenAI, vLLM, Ollama, llama.cpp server, LM Studio.

    ``base_url`` is the API root, usually ending in ``/v1``
    (Ollama ``http://127.0.0.1:11434/v1``, vLLM ``http://127.0.0.1:8000/v1``).
    """

    provider: str = "openai-compatible"
    key_env: str = "OPENAI_API_KEY"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        *,
        temperature: float | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        max_wait: float = DEFAULT_MAX_WAIT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(
            base_url=base_url,
            model=model,
            api_key=api_key,
            timeout=timeout,
            headers=headers,
            max_retries=max_retries,
            backoff=backoff,
            max_wait=max_wait,
            sleep=sleep,
        )
        self.temperature = temperature
        self.json_mode = "json_schema"  # steps down on refusal; see the module docstring
        self._max_tokens_param = "max_tokens"

    def _auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def complete_json(
        self, system: str, user: str, schema: dict[str, Any], *, max_tokens: int = 1024
    ) -> Any:
        """Ask for JSON fitting ``schema``; see the module docstring for the fallbacks."""
        messages = [
            {"role": "system", "content": f"{system}\n\n{_json_instruction(schema)}"},
            {"role": "user", "content": user},
        ]
        body = self._chat(messages, max_tokens, schema)
        text, truncated = _openai_output(body, self.label)
        return _decode_structured(text, schema, provider=self.label, truncated=truncated)

    def complete_text(self, system: str, user: str, *, max_tokens: int = 1024) -> str:
        """Plain chat completion; a leading ``<think>`` block is dropped."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        text, truncated = _openai_output(self._chat(messages, max_tokens, None), self.label)
        return _text_output(text, provider=self.label, truncated=truncated)

    def _chat(
        self, messages: list[dict[str, str]], max_tokens: int, schema: dict[str, Any] | None
    ) -> Any:
        def adaptable(status: int, body_text: str) -> bool:
            # Refusals we can adapt to are not worth retrying as they are.
            return (
                schema is not None
                and self.json_mode != "prompt"
                and _rejects_response_format(status, body_text)
            ) or (self._max_tokens_param == "max_tokens" and _rejects_max_tokens(status, body_text))

        while True:
            payload: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                self._max_tokens_param: max_tokens,
            }
            if self.temperature is not None:
                payload["temperature"] = self.temperature
            if schema is not None:
                response_format = self._response_format(schema)
                if response_format is not None:
                    payload["response_format"] = response_format
            try:
                body = self.post("/chat/completions", payload, give_up_if=adaptable)
            except ProviderError as exc:
                status = exc.details.get("status")
                body_text = str(exc.details.get("body", ""))
                if not isinstance(status, int) or not adaptable(status, body_text):
                    raise
                if self._max_tokens_param == "max_tokens" and _rejects_max_tokens(
                    status, body_text
                ):
                    self._max_tokens_param = "max_completion_tokens"
                else:
                    step = _JSON_MODES[_JSON_MODES.index(self.json_mode) + 1]
                    log.warning(
                        "%s refused response_format %s (HTTP %d); using %s from now on",
                        self.label,
                        self.json_mode,
                        status,
                        step,
                    )
                    self.json_mode = step
                continue
            usage = body.get("usage") if isinstance(body, Mapping) else None
            usage = usage if isinstance(usage, Mapping) else {}
            self._count_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"))
            return body

    def _response_format(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        if self.json_mode == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(schema), "schema": schema, "strict": True},
            }
        if self.json_mode == "json_object":
            return {"type": "json_object"}
        return None


# -------------------------------------------------------------------------- Anthropic


def _tool_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Tool input must be an object: wrap other schemas as ``{"result": schema}``."""
    if schema.get("type") == "object":
        return schema, False
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}, True


class AnthropicClient(_LLMHTTPClient):
    """Anthropic Messages API; structured output through one forced tool."""

    provider: str = "anthropic"
    key_env: str = "ANTHROPIC_API_KEY"

    def __init__(
        self,
        api_key: str,
        model: str,
        base_url: str = "https://api.anthropic.com",
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        *,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        max_wait: float = DEFAULT_MAX_WAIT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not api_key:
            raise ConfigError(
                "anthropic: an API key is required", hint="set ANTHROPIC_API_KEY or pass api_key="
            )
        super().__init__(
            base_url=base_url,
            model=model,
            api_key=api_key,
            timeout=timeout,
            headers=headers,
            max_retries=max_retries,
            backoff=backoff,
            max_wait=max_wait,
            sleep=sleep,
        )

    def _auth_headers(self) -> dict[str, str]:
        return {"x-api-key": self._api_key or "", "anthropic-version": ANTHROPIC_VERSION}

    def complete_json(
        self, system: str, user: str, schema: dict[str, Any], *, max_tokens: int = 1024
    ) -> Any:
        """Force one tool whose ``input_schema`` is ``schema``; return its input."""
        name = _schema_name(schema)
        input_schema, wrapped = _tool_schema(schema)
        tool = {
            "name": name,
            "description": "Record the answer. The input must follow the schema exactly.",
            "input_schema": input_schema,
        }
        body = self._messages(
            system, user, max_tokens, tools=[tool], tool_choice={"type": "tool", "name": name}
        )
        output, truncated = _anthropic_output(body, self.label, name)
        value = _decode_structured(output, input_schema, provider=self.label, truncated=truncated)
        return value["result"] if wrapped else value

    def complete_text(self, system: str, user: str, *, max_tokens: int = 1024) -> str:
        """Plain message; text blocks joined."""
        output, truncated = _anthropic_output(
            self._messages(system, user, max_tokens), self.label, None
        )
        if not isinstance(output, str):
            raise _bad_shape(self.label, output, "a tool_use block where text was expected")
        return _text_output(output, provider=self.label, truncated=truncated)

    def _messages(self, system: str, user: str, max_tokens: int, **extra: Any) -> Any:
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": user}],
            **extra,
        }
        body = self.post("/v1/messages", payload)
        usage = body.get("usage") if isinstance(body, Mapping) else None
        usage = usage if isinstance(usage, Mapping) else {}
        self._count_usage(usage.get("input_tokens"), usage.get("output_tokens"))
        return body


# --------------------------------------------------------------------------- replay


class RecordedClient:
    """Replays recorded model outputs, in order, through the real parsing path.

    Each response is one of:

    - a ``str``: the model's raw text (as in ``choices[0].message.content``);
    - an OpenAI chat-completion body (has ``choices``) or an Anthropic
      message body (``"type": "message"``): extracted as the real client does;
    - a recording ``{"status": ..., "body": ...}`` as stored in
      ``tests/data/llm_recordings``: a status >= 400 raises the same
      ProviderError the HTTP clients raise (without retrying);
    - any other dict: an already-structured answer (like a tool ``input``),
      still checked against the schema.

    ``calls`` records every prompt it was given. Running out of responses is a
    ProviderError.
    """

    provider = "recorded"

    def __init__(self, responses: Sequence[str | Mapping[str, Any]], *, model: str = "recorded"):
        self.model = model
        self.calls: list[dict[str, Any]] = []
        self._responses = list(responses)
        self._next = 0

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> RecordedClient:
        """Load a JSON list of responses, ``{"responses": [...]}``, or one recording."""
        file = Path(path)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read recorded responses from {file}: {exc}") from exc
        if isinstance(data, Mapping) and isinstance(data.get("responses"), list):
            data = data["responses"]
        if isinstance(data, Mapping) and "body" in data:
            data = [data]
        if not isinstance(data, list):
            raise ConfigError(f"{file}: expected a list of responses or a recording")
        return cls(data, model=file.stem)

    @property
    def remaining(self) -> int:
        """Responses not yet replayed."""
        return len(self._responses) - self._next

    @property
    def label(self) -> str:
        return f"recorded ({self.model})"

    def complete_json(
        self, system: str, user: str, schema: dict[str, Any], *, max_tokens: int = 1024
    ) -> Any:
        """Replay the next response as structured output for ``schema``."""
        self.calls.append(
            {"system": system, "user": user, "schema": schema, "max_tokens": max_tokens}
        )
        output, truncated = self._output()
        if isinstance(output, Mapping) and schema.get("type") != "object":
            # An Anthropic-style wrapped answer, as AnthropicClient would unwrap it.
            wrapper, _ = _tool_schema(schema)
            value = _decode_structured(output, wrapper, provider=self.label, truncated=truncated)
            return value["result"]
        return _decode_structured(output, schema, provider=self.label, truncated=truncated)

    def complete_text(self, system: str, user: str, *, max_tokens: int = 1024) -> str:
        """Replay the next response as text."""
        self.calls.append(
            {"system": system, "user": user, "schema": None, "max_tokens": max_tokens}
        )
        output, truncated = self._output()
        if not isinstance(output, str):
            raise _bad_shape(self.label, output, "structured output where text was expected")
        return _text_output(output, provider=self.label, truncated=truncated)

    def _output(self) -> tuple[str | dict[str, Any], bool]:
        if self._next >= len(self._responses):
            raise ProviderError(
                f"{self.label} has no more responses ({len(self._responses)} replayed)",
                hint="record one response per model call",
                provider=self.provider,
            )
        response = self._responses[self._next]
        self._next += 1
        if isinstance(response, str):
            return response, False
        if "status" in response and "body" in response:
            status = int(response["status"])
            body = response["body"]
            if status >= 400:
                text = body if isinstance(body, str) else json.dumps(body)
                raise http_error(self.label, self.provider, "the API key", status, text, 0)
            response = body if isinstance(body, Mapping) else {"choices": []}
        if "choices" in response:
            return _openai_output(response, self.label)
        if response.get("type") == "message" and isinstance(response.get("content"), list):
            return _anthropic_output(response, self.label, None)
        return dict(response), False


# ----------------------------------------------------------------------------- specs

_OPENAI_COMPATIBLE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "vllm": "http://127.0.0.1:8000/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
    "lmstudio": "http://127.0.0.1:1234/v1",
}
_PROVIDERS = (*_OPENAI_COMPATIBLE_URLS, "anthropic", "recorded")


def client_from_spec(
    spec: str, *, env: Mapping[str, str] | None = None, timeout: float = 30.0
) -> LLMClient:
    """Build a client from ``PROVIDER:MODEL[@BASE_URL]``.

    Providers: ``openai`` (base URL from ``@...``, else ``OPENAI_BASE_URL``,
    else api.openai.com), ``ollama``, ``vllm``, ``llamacpp``, ``lmstudio``
    (OpenAI-compatible with their usual local URL), ``anthropic`` (base URL
    from ``@...``, else ``ANTHROPIC_BASE_URL``) and ``recorded:PATH`` (a
    :class:`RecordedClient` file). Keys come from ``OPENAI_API_KEY`` /
    ``ANTHROPIC_API_KEY`` in ``env`` (default ``os.environ``); the official
    OpenAI and Anthropic endpoints require one. Model names may contain
    ``:`` (``ollama:qwen2.5:7b``) and ``@`` (Vertex-style ids): only an
    ``@`` followed by ``http://`` or ``https://`` starts the URL.
    """
    environ = os.environ if env is None else env
    provider, sep, rest = spec.strip().partition(":")
    provider = provider.lower()
    if not sep or provider not in _PROVIDERS:
        raise ConfigError(
            f"unknown LLM spec {spec!r}",
            hint=f"use PROVIDER:MODEL[@BASE_URL] with PROVIDER one of {', '.join(_PROVIDERS)}",
        )
    if provider == "recorded":
        return RecordedClient.from_file(rest)
    model, base_url = rest, ""
    head, at, tail = rest.rpartition("@")
    if at and tail.startswith(("http://", "https://")):
        model, base_url = head, tail
    if not model:
        raise ConfigError(f"LLM spec {spec!r} names no model", hint="e.g. openai:gpt-4o-mini")
    if provider == "anthropic":
        key = environ.get("ANTHROPIC_API_KEY", "")
        url = base_url or environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        if not key:
            raise ConfigError("ANTHROPIC_API_KEY is not set", hint="export ANTHROPIC_API_KEY=...")
        return AnthropicClient(key, model, base_url=url, timeout=timeout)
    default = _OPENAI_COMPATIBLE_URLS[provider]
    if provider == "openai":
        default = environ.get("OPENAI_BASE_URL") or default
    url = base_url or default
    openai_key = environ.get("OPENAI_API_KEY") or None
    if openai_key is None and httpx.URL(url).host == "api.openai.com":
        raise ConfigError("OPENAI_API_KEY is not set", hint="export OPENAI_API_KEY=...")
    return OpenAICompatibleClient(url, model, api_key=openai_key, timeout=timeout)


def client_from_env(env: Mapping[str, str] | None = None) -> LLMClient:
    """Build the client named by ``MEMSTRATA_LLM`` (timeout from ``MEMSTRATA_LLM_TIMEOUT``)."""
    environ = os.environ if env is None else env
    spec = environ.get("MEMSTRATA_LLM", "").strip()
    if not spec:
        raise ConfigError(
            "MEMSTRATA_LLM is not set",
            hint="e.g. MEMSTRATA_LLM=ollama:qwen2.5:7b or anthropic:claude-sonnet-4-5",
        )
    raw_timeout = environ.get("MEMSTRATA_LLM_TIMEOUT", "30")
    try:
        timeout = float(raw_timeout)
    except ValueError:
        raise ConfigError(f"MEMSTRATA_LLM_TIMEOUT must be seconds, got {raw_timeout!r}") from None
    return client_from_spec(spec, env=environ, timeout=timeout)
