"""A finished session as extraction reads it: turns, tool calls, quotes and support.

Contract:
- :func:`load_transcript` takes a list of message dicts (``role`` in system | user |
  assistant | tool, ``content`` as text or content parts, OpenAI-style ``tool_calls`` on
  assistant messages, or Anthropic ``tool_use`` / ``tool_result`` blocks),
  ``{"messages": [...]}``, or anything with a ``messages()`` method (a
  :class:`memstrata.interfaces.transcript.Transcript`). Turn *N* is the message at index
  *N* of that list (0-based). A malformed message is a ValidationError.
- A message may say when it was sent: ``timestamp`` or ``created_at``, as ISO-8601 text
  (a bare date or time without an offset is UTC), an aware datetime or Unix seconds
  (:attr:`Turn.at`); anything else there is a ValidationError. Extraction dates what a turn
  states by it (:mod:`memstrata.extraction.run`).
- Message content is flattened by :func:`memstrata.tokens.content_text`, the one
  definition (a ``tool_result`` keeps its nested content). A user message made only of
  tool results is a ``tool`` turn; a memstrata summary is a ``summary`` turn, which no
  fact can cite.
- :func:`quote_in` compares quotes ignoring case, whitespace, quote style and end marks;
  :func:`support` is the share of a claim's content words found in a turn.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..clock import ensure_utc
from ..errors import ValidationError
from ..models import Fact, Scope
from ..tokens import content_text
from .judges import content_terms, coverage

ROLE_ACTOR: dict[str, str] = {"user": "user", "assistant": "agent", "tool": "tool"}
_ROLES = ("system", "user", "assistant", "tool")
_SUMMARY_PREFIX = "[Summary of turns"


@dataclass(frozen=True)
class ToolCall:
    """One tool call an assistant turn made."""

    name: str
    arguments: Any  # a dict, or the raw JSON string the model emitted
    id: str | None = None


@dataclass(frozen=True)
class Turn:
    """One message of the transcript; ``role`` is ``summary`` for a memstrata summary."""

    index: int
    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    name: str | None = None
    #: When the message was sent, if it says (``timestamp`` / ``created_at``).
    at: datetime | None = None

    @property
    def actor(self) -> str | None:
        """Who speaks in this turn, for provenance (None: the turn cannot be cited)."""
        return ROLE_ACTOR.get(self.role)

    @property
    def text(self) -> str:
        """The content plus the tool calls, as the support check reads it."""
        calls = [f"[called {c.name}({_args_text(c.arguments)})]" for c in self.tool_calls]
        return "\n".join([self.content, *calls]).strip()


@dataclass(frozen=True)
class Session:
    """What a proposer sees: the scope, the turns, and the facts already current."""

    scope: Scope
    turns: tuple[Turn, ...]
    existing: tuple[Fact, ...]
    now: datetime


def load_transcript(transcript: Any) -> tuple[Turn, ...]:
    """Turns of a message list, ``{"messages": [...]}`` or a :class:`Transcript`."""
    messages_fn = getattr(transcript, "messages", None)
    if callable(messages_fn):
        transcript = messages_fn()
    elif isinstance(transcript, Mapping) and "messages" in transcript:
        transcript = transcript["messages"]
    if isinstance(transcript, str | bytes) or not isinstance(transcript, Sequence):
        raise ValidationError("a transcript is a list of messages",
                              hint="pass [{'role': 'user', 'content': '...'}, ...]")
    return tuple(_turn(i, m) for i, m in enumerate(transcript))


def _turn(index: int, message: Any) -> Turn:
    if not isinstance(message, Mapping):
        raise ValidationError(f"turn {index}: a message must be an object, "
                              f"got {type(message).__name__}")
    role = message.get("role")
    if role not in _ROLES:
        raise ValidationError(f"turn {index}: role must be one of {', '.join(_ROLES)}, "
                              f"got {role!r}")
    content = message.get("content")
    texts: list[str] = []
    calls: list[ToolCall] = []
    tool_results = 0
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                texts.append(part)
                continue
            if not isinstance(part, Mapping):
                raise ValidationError(f"turn {index}: content parts must be objects")
            kind = part.get("type")
            if kind == "tool_use":
                calls.append(ToolCall(str(part.get("name", "")), part.get("input"),
                                      _opt_str(part.get("id"))))
            else:
                tool_results += kind == "tool_result"
                texts.append(content_text([part]))
    elif content is not None:
        raise ValidationError(f"turn {index}: content must be text or a list of parts, "
                              f"got {type(content).__name__}")
    raw_calls = message.get("tool_calls")
    if raw_calls is not None:
        if not isinstance(raw_calls, list):
            raise ValidationError(f"turn {index}: tool_calls must be a list")
        for call in raw_calls:
            fn = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                raise ValidationError(f"turn {index}: a tool call needs function.name",
                                      hint="OpenAI shape: {'function': {'name': ..., "
                                           "'arguments': '{...}'}}")
            calls.append(ToolCall(fn["name"], fn.get("arguments"), _opt_str(call.get("id"))))
    text = "\n".join(t for t in texts if t)
    if role == "user" and tool_results and tool_results == len(content or []):
        role = "tool"  # Anthropic sends tool results in user messages; they are tool output
    if role == "user" and text.startswith(_SUMMARY_PREFIX):
        role = "summary"  # memstrata's own summary, not the user's words
    return Turn(index, role, text, tuple(calls), _opt_str(message.get("name")),
                _sent_at(index, message))


#: The keys a message may carry its time under, in order.
TIME_KEYS = ("timestamp", "created_at")


def _sent_at(index: int, message: Mapping[str, Any]) -> datetime | None:
    key = next((k for k in TIME_KEYS if message.get(k) is not None), None)
    if key is None:
        return None
    value = message[key]
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise ValidationError(f"turn {index}: {key} {value!r} is not a Unix time") from None
    if not isinstance(value, datetime | str):
        raise ValidationError(f"turn {index}: {key} must be ISO-8601 text, an aware datetime "
                              f"or Unix seconds, got {type(value).__name__}",
                              hint="e.g. 2026-05-01T09:30:00Z")
    return ensure_utc(value, field=f"turn {index}: {key}")


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _args_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


_QUOTES = str.maketrans("\u2018\u2019\u201c\u201d\u2013\u2014", "''\"\"--")


def _norm_quote(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = text.translate(_QUOTES)
    return " ".join(text.split()).strip(" .!?\"'")


def quote_in(quote: str, text: str) -> bool:
    """Does ``quote`` occur in ``text`` (case, whitespace, quote style, end marks ignored)?"""
    q = _norm_quote(quote)
    return bool(q) and q in " ".join(_norm_quote(text).split())


def support(claim: str, turn_text: str, names: Sequence[str]) -> float:
    """Share of the claim's content words (names left out) that occur in the turn."""
    return coverage(content_terms(claim, drop=names), content_terms(turn_text))


__all__ = ["ROLE_ACTOR", "TIME_KEYS", "Session", "ToolCall", "Turn", "load_transcript",
           "quote_in", "support"]
