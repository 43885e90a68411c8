"""What models answer, read strictly: JSON for a schema, or text.

Parsing tolerates what models really emit — a leading ``<think>`` block, code fences,
prose before or after the JSON — but never repairs broken JSON: that is a
:class:`~memstrata.errors.ProviderError`, flagged as cut off when the model hit its token
limit. :func:`schema_errors` checks a value against the shape of a JSON schema (types,
required, enums, additional properties); :func:`parse_json_output` and the provider body
readers (OpenAI ``choices``, Anthropic content blocks) are shared by every client and the
replaying :class:`~memstrata.providers.llm.RecordedClient`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ProviderError

_EXCERPT = 300


_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_SCAN_STARTS = 50


def _strip_think(text: str) -> str:
    """Drop a leading reasoning block (deepseek-r1 / qwen3 on servers without a parser)."""
    return _THINK.sub("", text, count=1)


def parse_json_output(
    text: str, *, expect: str | None = None, provider: str = "llm", truncated: bool = False
) -> Any:
    """Parse the JSON value in a model's raw text output.

    Tries, in order: the whole text, each fenced code block, then the first
    decodable value starting at a ``{`` (or ``[``; ``expect`` = ``"object"`` or
    ``"array"`` restricts which) so leading and trailing prose are ignored.
    Raises :class:`ProviderError` when nothing decodes.
    """
    stripped = _strip_think(text).strip()
    if not stripped:
        raise ProviderError(
            f"{provider} returned an empty answer where JSON was expected",
            hint=_truncation_hint(truncated) or "check the prompt and the model",
            provider=provider,
        )
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    for match in _FENCE.finditer(stripped):
        try:
            return json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
    openers = {"object": "{", "array": "["}.get(expect or "", "{[")
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(stripped) if ch in openers][:_MAX_SCAN_STARTS]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(stripped, start)
        except json.JSONDecodeError:
            continue
        return value
    cut = " (the output was cut off at max_tokens)" if truncated else ""
    raise ProviderError(
        f"{provider} returned malformed JSON{cut}: {_excerpt(stripped)!r}",
        hint=_truncation_hint(truncated)
        or "the model did not follow the JSON format; use a model/server with structured "
        "output (json_schema) or retry",
        provider=provider,
        output=_excerpt(stripped),
    )


def _truncation_hint(truncated: bool) -> str | None:
    return "raise max_tokens" if truncated else None


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def schema_errors(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Shape problems of ``value`` against ``schema`` (empty list = fits).

    A deliberate subset of JSON Schema: ``type``, ``enum``, ``const``,
    ``properties``, ``required``, ``additionalProperties: false``, ``items``,
    ``anyOf``/``oneOf``. Keywords it does not know (``$ref``, ``minimum``...)
    are accepted unchecked; the write policy validates values in depth.
    """
    problems: list[str] = []
    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_JSON_TYPES.get(name, lambda v: True)(value) for name in names):
            return [f"{path}: expected {'|'.join(names)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} is not one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: expected {schema['const']!r}")
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if (
            isinstance(branches, list)
            and branches
            and all(schema_errors(value, branch, path) for branch in branches)
        ):
            problems.append(f"{path}: matches none of {keyword}")
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key in schema.get("required") or []:
            if key not in value:
                problems.append(f"{path}: missing required key {key!r}")
        for key, item in value.items():
            if key in properties:
                problems.extend(schema_errors(item, properties[key], f"{path}.{key}"))
            elif schema.get("additionalProperties") is False:
                problems.append(f"{path}: unexpected key {key!r}")
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            problems.extend(schema_errors(item, schema["items"], f"{path}[{index}]"))
    return problems


def _decode_structured(
    output: str | Mapping[str, Any],
    schema: Mapping[str, Any],
    *,
    provider: str,
    truncated: bool = False,
) -> Any:
    """Raw text or an already-parsed tool input -> a value that fits ``schema``."""
    if isinstance(output, str):
        expect = schema.get("type") if isinstance(schema.get("type"), str) else None
        value = parse_json_output(output, expect=expect, provider=provider, truncated=truncated)
    else:
        value = dict(output)
    problems = schema_errors(value, schema)
    if problems:
        shown = "; ".join(problems[:5])
        raise ProviderError(
            f"{provider} returned JSON that does not fit the schema: {shown}",
            hint=_truncation_hint(truncated)
            or "the model ignored the schema; use a model/server with structured output",
            provider=provider,
            problems=problems,
        )
    return value


def _text_output(text: str, *, provider: str, truncated: bool) -> str:
    answer = _strip_think(text).strip()
    if not answer:
        raise ProviderError(
            f"{provider} returned an empty answer",
            hint=_truncation_hint(truncated) or "check the prompt and the model",
            provider=provider,
        )
    return answer


def _bad_shape(provider: str, body: Any, what: str) -> ProviderError:
    return ProviderError(
        f"{provider} answered with an unexpected body ({what}): {_excerpt(json.dumps(body))}",
        hint="is base_url pointing at the right kind of server?",
        provider=provider,
    )


def _openai_output(body: Any, provider: str) -> tuple[str, bool]:
    """``choices[0].message.content`` and whether generation hit the token limit."""
    try:
        choice = body["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise _bad_shape(provider, body, "no choices[0].message") from None
    if not isinstance(message, Mapping):
        raise _bad_shape(provider, body, "choices[0].message is not an object")
    refusal = message.get("refusal")
    if refusal:
        raise ProviderError(
            f"{provider} refused: {_excerpt(str(refusal))}",
            hint="rephrase the request; the model declined it",
            provider=provider,
        )
    content = message.get("content")
    if isinstance(content, list):  # content parts, as some servers return them
        content = "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping)
        )
    if content is not None and not isinstance(content, str):
        raise _bad_shape(provider, body, "message.content is not text")
    return content or "", choice.get("finish_reason") == "length"


def _anthropic_output(
    body: Any, provider: str, tool_name: str | None
) -> tuple[str | dict[str, Any], bool]:
    """The forced tool's ``input`` (if a tool was asked for and used) or the joined text."""
    blocks = body.get("content") if isinstance(body, Mapping) else None
    if not isinstance(blocks, list):
        raise _bad_shape(provider, body, "no content blocks")
    truncated = body.get("stop_reason") == "max_tokens"
    texts: list[str] = []
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "tool_use" and (
            tool_name is None or block.get("name") == tool_name
        ):
            tool_input = block.get("input")
            if not isinstance(tool_input, dict):
                raise _bad_shape(provider, body, "tool_use.input is not an object")
            return tool_input, truncated
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
    return "".join(texts), truncated


def _excerpt(text: str, limit: int = _EXCERPT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _schema_name(schema: Mapping[str, Any]) -> str:
    title = schema.get("title")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", title)[:64] if isinstance(title, str) else ""
    return name or "response"


def _json_instruction(schema: Mapping[str, Any]) -> str:
    return (
        "Respond with a single JSON value and nothing else (no prose, no code fences). "
        "It must conform to this JSON Schema:\n" + json.dumps(schema, ensure_ascii=False)
    )


__all__ = ["parse_json_output", "schema_errors"]
