"""Run-transcript helpers: keep an agent's own message list small (DESIGN §7).

memstrata does not own the transcript; :class:`Transcript` is a helper the
agent loop feeds every message to and reads the list to send back from.

Messages are dicts in OpenAI chat style (``role`` in system | user |
assistant | tool, ``content``, ``tool_calls`` on assistant messages,
``tool_call_id`` on tool results) or in a simple generic form (a ``tool``
message with ``name``, ``ok: bool`` and ``url``). ``ok`` and ``url`` are
memstrata annotations: :meth:`Transcript.messages` leaves them out unless
asked, because chat APIs reject unknown message fields. For OpenAI-style
results without ``url``/``name``, both are read from the matching call
(``function.name``, and ``url`` in its JSON arguments).

Turns. The leading system message(s) and the first user message are
*pinned*. Every later user or assistant message (or a later system message)
starts a new turn, numbered from 1 (the first user message); a tool result
belongs to the turn of the assistant message that called it. Turns are the
unit of eviction, so a call and its results are never separated.

Rules, applied as messages are added (each change is logged in ``events``):

1. Cap: a tool observation longer than ``observation_cap`` keeps its head and ends with
   a marker naming how much was cut. The cap is in characters by default (4,000, the
   protocol's cap, about 1,200 tokens); ``cap_unit="tokens"`` counts tokens instead.
2. Repeats: when a successful tool result has the same ``url`` as an older
   one, or identical content, the older one's content becomes a one-line
   stub - ``(same result as turn N)``, or ``(superseded: same URL fetched
   again in turn N)`` when only the URL matches - N being the newest turn.
3. Failed calls (``ok=False``, or ``is_error=True``) are dropped as soon as a
   later call of the *same tool name* succeeds, or once their turn is no
   longer among the last ``keep_last`` turns, whichever comes first. A
   recent failure with no later success stays, so the agent can react to
   it. Dropping an OpenAI-style result also removes its entry from the
   assistant's ``tool_calls`` (and the assistant message, if nothing is
   left), so the list stays valid for the API.
4. Budget: when the total exceeds ``budget_tokens``, every turn except the
   pinned messages and the last ``k`` turns - including any earlier summary -
   is replaced by ONE summary message from the summariser (a ``user``
   message starting ``[Summary of turns A-B ...]``), capped at
   ``summary_tokens``. ``k`` is ``keep_last``, lowered (not below 1) until
   pinned + summary cap + last ``k`` turns fit. If the last turn alone does
   not fit, its largest messages are cut (with the marker) until it does.
   The budget then holds unless the pinned messages alone exceed it (logged
   as a warning; they are never altered).

Token counts come from :mod:`memstrata.tokens` (offline cl100k).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..calls import checked_calls
from ..errors import ValidationError
from ..inputs import int_arg
from ..tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    content_text,
    count_message_tokens,
    count_tokens,
    truncate_to_tokens,
)
from .summarisers import (
    SUMMARY_HEADER,
    ExtractiveSummariser,
    LLMSummariser,
    Summariser,
    render_messages,
)

__all__ = [
    "ROLES",
    "ExtractiveSummariser",
    "LLMSummariser",
    "Summariser",
    "Transcript",
    "cap_text",
    "render_messages",
]

log = logging.getLogger(__name__)

ROLES = frozenset({"system", "user", "assistant", "tool"})
_ANNOTATIONS = ("ok", "url", "is_error")


# ------------------------------------------------------------------------ transcript


@dataclass
class _Entry:
    message: dict[str, Any]
    turn: int
    pinned: bool = False
    summary: bool = False
    failed: bool = False
    tool: str | None = None
    url: str | None = None
    digest: str | None = None
    tokens: int = 0


def cap_text(text: str, cap: int, unit: str = "tokens") -> str:
    """``text`` within ``cap`` tokens (or characters, ``unit="chars"``), ending in a marker
    that says what was cut (the observation cap of rule 1)."""
    if unit == "chars":
        if len(text) <= cap:
            return text
        kept = cap
        for _ in range(3):
            marker = f"\n[… truncated by memstrata: {len(text) - kept} of {len(text)} " \
                     "characters cut]"
            kept = max(0, cap - len(marker))
        return text[:kept] + (f"\n[… truncated by memstrata: {len(text) - kept} of "
                              f"{len(text)} characters cut]")
    total = count_tokens(text)
    if total <= cap:
        return text
    kept = cap
    for _ in range(3):  # the marker's own size depends on the numbers in it
        marker = f"\n[… truncated by memstrata: {total - kept} of {total} tokens cut]"
        kept = max(0, cap - count_tokens(marker))
    marker = f"\n[… truncated by memstrata: {total - kept} of {total} tokens cut]"
    return truncate_to_tokens(text, kept) + marker


@checked_calls
class Transcript:
    """An agent's message list kept under a token budget; see the module docstring."""

    def __init__(
        self,
        budget_tokens: int = 6000,
        observation_cap: int = 4000,
        summariser: Summariser | None = None,
        keep_last: int = 4,
        *,
        summary_tokens: int | None = None,
        cap_unit: Literal["chars", "tokens"] = "chars",
    ) -> None:
        if cap_unit not in ("chars", "tokens"):
            raise ValidationError(f"cap_unit must be 'chars' or 'tokens', got {cap_unit!r}")
        budget_tokens = int_arg(budget_tokens, "budget_tokens", low=1)
        observation_cap = int_arg(observation_cap, "observation_cap", low=1)
        keep_last = int_arg(keep_last, "keep_last", low=1)
        if summary_tokens is not None:
            summary_tokens = int_arg(summary_tokens, "summary_tokens", low=1)
        self.budget_tokens = budget_tokens
        self.observation_cap = observation_cap
        self.cap_unit = cap_unit
        self.keep_last = keep_last
        self.summary_tokens = summary_tokens or max(64, budget_tokens // 5)
        self.summariser: Summariser = summariser or ExtractiveSummariser(self.summary_tokens)
        self.events: list[str] = []
        self.compactions = 0
        self._entries: list[_Entry] = []
        self._turn = 0
        self._question_seen = False

    # ---------------------------------------------------------------- public

    def add(self, message: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        """Append one message (a dict, keyword fields, or both) and apply the rules."""
        data = {**(message or {}), **fields}
        role = data.get("role")
        if role not in ROLES:
            raise ValidationError(
                f"message role must be one of {sorted(ROLES)}, got {role!r}", role=role
            )
        entry = self._entry(data)
        self._entries.append(entry)
        if entry.tool is not None and not entry.failed:
            self._stub_repeats(entry)
        self._drop_failures()
        if self.tokens() > self.budget_tokens:
            self.compact()

    def extend(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """:meth:`add` each message in order."""
        for message in messages:
            self.add(message)

    def messages(self, *, annotations: bool = False) -> list[dict[str, Any]]:
        """The current list (copies), ready to send.

        ``ok``, ``url`` and ``is_error`` are left out unless ``annotations``.
        """
        out: list[dict[str, Any]] = []
        for entry in self._entries:
            message = copy.deepcopy(entry.message)
            if not annotations:
                for key in _ANNOTATIONS:
                    message.pop(key, None)
            out.append(message)
        return out

    def tokens(self) -> int:
        """Tokens of the current list (content, tool calls, per-message overhead)."""
        return sum(entry.tokens for entry in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def compact(self) -> None:
        """Fold all but the last ``keep_last`` turns into the summary now.

        ``add`` calls this whenever the total exceeds the budget; call it
        yourself to shrink the list before a handoff. With turns so large
        that ``keep_last`` of them nearly fill the budget, this runs on every
        add: lower ``keep_last`` or raise the budget to summarise less often.
        """
        pinned_tokens = sum(e.tokens for e in self._entries if e.pinned)
        turns: list[int] = []
        for entry in self._entries:
            if not entry.pinned and not entry.summary and entry.turn not in turns:
                turns.append(entry.turn)
        has_summary = any(entry.summary for entry in self._entries)
        summary_cost = self.summary_tokens + MESSAGE_OVERHEAD_TOKENS + 24  # header line
        keep = min(self.keep_last, len(turns))
        while keep > 1:
            tail_tokens = self._turn_tokens(turns[-keep:])
            evicts = keep < len(turns) or has_summary
            need = pinned_tokens + tail_tokens + (summary_cost if evicts else 0)
            if need <= self.budget_tokens:
                break
            keep -= 1
        tail = set(turns[-keep:]) if keep else set()
        evicted = [e for e in self._entries if not e.pinned and (e.summary or e.turn not in tail)]
        if any(not e.summary for e in evicted):  # re-summarising a summary alone gains nothing
            self._summarise(evicted)
        if self.tokens() > self.budget_tokens:
            self._trim_tail(pinned_tokens)

    # --------------------------------------------------------------- helpers

    def _entry(self, data: dict[str, Any]) -> _Entry:
        role = data["role"]
        leading_system = role == "system" and not any(not e.pinned for e in self._entries)
        leading_system = leading_system and not self._question_seen
        pinned = leading_system or (role == "user" and not self._question_seen)
        if role in ("user", "assistant") or (role == "system" and not leading_system):
            self._turn += 1
        if role == "user":
            self._question_seen = True
        entry = _Entry(message=data, turn=self._turn, pinned=pinned)
        if role == "tool":
            self._describe_tool(entry)
        entry.tokens = count_message_tokens(entry.message)
        return entry

    def _describe_tool(self, entry: _Entry) -> None:
        data = entry.message
        call = self._find_call(data.get("tool_call_id"))
        function = call.get("function") if call else None
        arguments: Any = None
        if isinstance(function, Mapping):
            try:
                arguments = json.loads(str(function.get("arguments") or "null"))
            except json.JSONDecodeError:
                arguments = None
        name = data.get("name") or (function.get("name") if isinstance(function, Mapping) else None)
        url = data.get("url") or (arguments.get("url") if isinstance(arguments, dict) else None)
        entry.tool = str(name) if name else "tool"
        entry.url = str(url) if url else None
        entry.failed = data.get("ok") is False or data.get("is_error") is True
        text = content_text(data.get("content"))
        entry.digest = hashlib.sha256(text.strip().encode()).hexdigest()
        capped = cap_text(text, self.observation_cap, self.cap_unit)
        if capped != text or not isinstance(data.get("content"), str):
            data["content"] = capped
        if capped != text:
            self.events.append(f"turn {entry.turn}: capped {entry.tool} result")

    def _find_call(self, call_id: Any) -> Mapping[str, Any] | None:
        if not call_id:
            return None
        for entry in reversed(self._entries):
            for call in entry.message.get("tool_calls") or []:
                if isinstance(call, Mapping) and call.get("id") == call_id:
                    return call
        return None

    def _turn_tokens(self, turns: Sequence[int]) -> int:
        wanted = set(turns)
        return sum(
            e.tokens for e in self._entries if not e.pinned and not e.summary and e.turn in wanted
        )

    def _set_content(self, entry: _Entry, content: str) -> None:
        entry.message = {**entry.message, "content": content}
        entry.tokens = count_message_tokens(entry.message)

    def _stub_repeats(self, newest: _Entry) -> None:
        for entry in self._entries:
            if entry is newest or entry.tool is None or entry.failed or entry.pinned:
                continue
            same_content = entry.digest == newest.digest
            same_url = newest.url is not None and entry.url == newest.url
            if not (same_content or same_url):
                continue
            if same_content:
                stub = f"(same result as turn {newest.turn})"
            else:
                stub = f"(superseded: same URL fetched again in turn {newest.turn})"
            current = content_text(entry.message.get("content"))
            if current.startswith("(same ") or current.startswith("(superseded"):
                self._set_content(entry, stub)  # re-point an older stub to the newest turn
            elif count_tokens(stub) < count_tokens(current):
                self._set_content(entry, stub)
                self.events.append(f"turn {entry.turn}: {entry.tool} result -> {stub}")

    def _drop_failures(self) -> None:
        turns = sorted({e.turn for e in self._entries if not e.pinned and not e.summary})
        recent = set(turns[-self.keep_last :])
        for entry in list(self._entries):
            if not entry.failed or entry not in self._entries:
                continue
            position = self._entries.index(entry)
            later_success = any(
                other.tool == entry.tool and not other.failed
                for other in self._entries[position + 1 :]
            )
            if later_success or entry.turn not in recent:
                reason = "a later call succeeded" if later_success else "no longer recent"
                self._remove_tool_result(entry)
                self.events.append(f"turn {entry.turn}: dropped failed {entry.tool} ({reason})")

    def _remove_tool_result(self, entry: _Entry) -> None:
        self._entries.remove(entry)
        call_id = entry.message.get("tool_call_id")
        if not call_id:
            return
        for owner in self._entries:
            calls = owner.message.get("tool_calls")
            if not isinstance(calls, list) or not any(
                isinstance(c, Mapping) and c.get("id") == call_id for c in calls
            ):
                continue
            remaining = [
                c for c in calls if not (isinstance(c, Mapping) and c.get("id") == call_id)
            ]
            message = {k: v for k, v in owner.message.items() if k != "tool_calls"}
            if remaining:
                message["tool_calls"] = remaining
            if (
                not remaining
                and not content_text(message.get("content")).strip()
                and not owner.pinned
            ):
                self._entries.remove(owner)
            else:
                owner.message = message
                owner.tokens = count_message_tokens(message)
            return

    def _summarise(self, evicted: list[_Entry]) -> None:
        first_turn = min(e.turn for e in evicted)  # a summary entry carries its first turn
        last_turn = max(e.turn for e in evicted)
        text = self.summariser.summarise([self._described(e) for e in evicted]).strip()
        text = cap_text(text, self.summary_tokens) if text else "(nothing worth keeping)"
        header = f"{SUMMARY_HEADER} {first_turn}-{last_turn}, written by memstrata]"
        summary = _Entry(
            message={"role": "user", "content": f"{header}\n{text}"},
            turn=first_turn,
            summary=True,
        )
        summary.tokens = count_message_tokens(summary.message)
        gone = {id(e) for e in evicted}
        rebuilt: list[_Entry] = []
        for entry in self._entries:
            if id(entry) in gone:
                if summary not in rebuilt:
                    rebuilt.append(summary)
                continue
            rebuilt.append(entry)
        self._entries = rebuilt
        self.compactions += 1
        self.events.append(
            f"summarised turns {first_turn}-{last_turn} ({len(evicted)} messages) "
            f"with {type(self.summariser).__name__}"
        )

    @staticmethod
    def _described(entry: _Entry) -> dict[str, Any]:
        """A copy for the summariser that names the tool, URL and failure explicitly."""
        message = dict(entry.message)
        if entry.tool is not None:
            message.setdefault("name", entry.tool)
            if entry.url:
                message.setdefault("url", entry.url)
            if entry.failed:
                message["ok"] = False
        return message

    def _trim_tail(self, pinned_tokens: int) -> None:
        candidates = sorted(
            (e for e in self._entries if not e.pinned and not e.summary),
            key=lambda e: e.tokens,
            reverse=True,
        )
        for entry in candidates:
            excess = self.tokens() - self.budget_tokens
            if excess <= 0:
                return
            text = content_text(entry.message.get("content"))
            text_tokens = count_tokens(text)
            if text_tokens == 0:
                continue
            self._set_content(entry, cap_text(text, max(0, text_tokens - excess)))
            self.events.append(f"turn {entry.turn}: cut {entry.message['role']} to fit budget")
        if self.tokens() > self.budget_tokens:
            log.warning(
                "transcript is %d tokens over its budget of %d: the pinned system prompt and "
                "question alone take %d",
                self.tokens() - self.budget_tokens,
                self.budget_tokens,
                pinned_tokens,
            )
