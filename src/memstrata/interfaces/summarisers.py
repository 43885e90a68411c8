"""Summarisers of a run's messages for :class:`~memstrata.interfaces.transcript.Transcript`
(its budget rule replaces old turns with ONE summary message).

Contract: a :class:`Summariser` turns messages (oldest first) into short prose.
:class:`ExtractiveSummariser` is offline and deterministic: it keeps the most informative
sentences (rare words; numbers, URLs, identifiers and the user's words weigh more) within
its token cap, in their original order; :class:`LLMSummariser` asks a model
(:mod:`memstrata.providers.llm`) and falls back to another summariser when the model
fails. :func:`render_messages` is the text a model reads. Every summary message the
transcript writes starts with :data:`SUMMARY_HEADER`.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..errors import ProviderError
from ..providers.llm import LLMClient
from ..tokens import content_text, count_tokens, truncate_to_tokens

log = logging.getLogger("memstrata.interfaces.transcript")


@runtime_checkable
class Summariser(Protocol):
    """Turns a run of messages into a short prose summary."""

    def summarise(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """Return a summary of ``messages`` (oldest first)."""
        ...


# ------------------------------------------------------------------------ rendering


def _call_label(call: Mapping[str, Any]) -> str:
    function = call.get("function")
    if not isinstance(function, Mapping):
        return "a tool"
    return f"{function.get('name', 'tool')}({function.get('arguments', '')})"


def render_messages(messages: Sequence[Mapping[str, Any]]) -> str:
    """Plain-text rendering for summarisers: one ``role: text`` block per message."""
    blocks: list[str] = []
    for message in messages:
        role = str(message.get("role", "?"))
        label = role
        if role == "tool":
            details = [str(v) for v in (message.get("name"), message.get("url")) if v]
            if message.get("ok") is False or message.get("is_error") is True:
                details.append("failed")
            label = f"tool ({', '.join(details)})" if details else "tool"
        text = content_text(message.get("content")).strip()
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            called = "; ".join(_call_label(c) for c in calls if isinstance(c, Mapping))
            text = f"{text}\n[called {called}]".strip()
        if text:
            blocks.append(f"{label}: {text}")
    return "\n\n".join(blocks)


# ---------------------------------------------------------------------- summarisers

_STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her
    here his how i if in into is it its just let me my no not of on or our she so that the
    their them then there these they this to up us was we were what when which who will with
    would you your ok okay sure yes please thanks thank now also very good great fine sounds
    right check see think know got done going""".split()  # noqa: SIM905
)
_WORD = re.compile(r"[a-z0-9](?:[a-z0-9_\-./:@#]*[a-z0-9])?")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_MAX_SENTENCE_WORDS = 40  # longer runs (logs, JSON, run-on text) are cut into pieces
SUMMARY_HEADER = "[Summary of turns"
_SPECIFIC = re.compile(r"\d|https?://|[A-Za-z]+[_/.][A-Za-z0-9]")


class ExtractiveSummariser:
    """Offline summariser: keeps the most informative sentences within ``max_tokens``.

    A sentence's score is the summed rarity (inverse sentence frequency) of
    its content words, divided by the square root of its length so long
    sentences do not win by size; sentences with numbers, URLs or
    identifiers get x1.5 and sentences said by the user x1.3 (they carry
    goals and constraints). Sentences with fewer than two content words
    ("Let me check.") never qualify. Sentences are taken best first, skipping
    any whose content words are 70% covered by those already taken, until the
    cap; the result keeps the original order, one ``- role: sentence`` line
    each. Deterministic, no model, no network.
    """

    def __init__(self, max_tokens: int = 400) -> None:
        self.max_tokens = max_tokens

    def summarise(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """Return up to ``max_tokens`` tokens of the most informative sentences."""
        candidates = self._sentences(messages)
        if not candidates:
            return ""
        bags = [
            {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}
            for _, text in candidates
        ]
        frequency: dict[str, int] = {}
        for bag in bags:
            for word in bag:
                frequency[word] = frequency.get(word, 0) + 1
        total = len(candidates)
        scores: list[float] = []
        for (label, text), bag in zip(candidates, bags, strict=True):
            rarity = sum(math.log(1 + total / frequency[w]) for w in bag)
            score = rarity / math.sqrt(max(1, len(text.split())))
            if _SPECIFIC.search(text):
                score *= 1.5
            if label == "user":
                score *= 1.3
            scores.append(score)
        order = sorted(range(total), key=lambda i: (-scores[i], i))
        chosen: list[int] = []
        covered: set[str] = set()
        used = 0
        for index in order:
            bag = bags[index]
            if len(bag) < 2 or len(bag & covered) >= 0.7 * len(bag):
                continue
            line = self._line(candidates[index])
            cost = count_tokens(line) + 1
            if used + cost > self.max_tokens:
                continue
            chosen.append(index)
            covered |= bag
            used += cost
        return "\n".join(self._line(candidates[i]) for i in sorted(chosen))

    @staticmethod
    def _line(candidate: tuple[str, str]) -> str:
        return f"- {candidate[0]}: {candidate[1]}"

    @staticmethod
    def _sentences(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for message in messages:
            role = str(message.get("role", "?"))
            label = f"tool {message['name']}" if role == "tool" and message.get("name") else role
            if role == "tool" and (message.get("ok") is False or message.get("is_error")):
                label += " (failed)"
            text = content_text(message.get("content"))
            if text.startswith(SUMMARY_HEADER):
                # An earlier summary: its lines are already "- label: sentence".
                for line in text.splitlines()[1:]:
                    label_part, sep, sentence = line.removeprefix("- ").partition(": ")
                    if sep and len(sentence.split()) >= 3:
                        found.append((label_part, sentence))
                continue
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                text += "\n" + "\n".join(
                    f"Called {_call_label(c)}." for c in calls if isinstance(c, Mapping)
                )
            for raw in _SENTENCE_SPLIT.split(text):
                words = raw.split()
                # Stubs and markers are memstrata's own bookkeeping, not content.
                if len(words) < 3 or words[0] in ("(same", "(superseded:", "[…"):
                    continue
                for start in range(0, len(words), _MAX_SENTENCE_WORDS):
                    piece = words[start : start + _MAX_SENTENCE_WORDS]
                    if len(piece) >= 3:
                        found.append((label, " ".join(piece)))
        return found


_SUMMARY_SYSTEM = (
    "You compress the older part of an AI agent's working transcript so the agent can "
    "continue its task with less context. Keep: the user's goal, constraints and "
    "preferences; decisions made and why; facts established by tools (with URLs, ids, "
    "numbers); what failed and why; open items and next steps. Drop pleasantries and "
    "repeated tool output. Write plain sentences, at most {words} words. Never invent "
    "anything that is not in the transcript."
)


class LLMSummariser:
    """Summarises with a language model via :meth:`LLMClient.complete_text`.

    If the provider fails (:class:`ProviderError`) the ``fallback`` summariser
    (default: :class:`ExtractiveSummariser`) is used instead and a warning is
    logged, so compaction never stops a run because the summary model is
    down; ``raise_errors=True`` lets the error propagate instead. The
    rendered input is cut to ``input_tokens``.
    """

    def __init__(
        self,
        client: LLMClient,
        *,
        max_tokens: int = 400,
        input_tokens: int = 12000,
        fallback: Summariser | None = None,
        raise_errors: bool = False,
    ) -> None:
        self.client = client
        self.max_tokens = max_tokens
        self.input_tokens = input_tokens
        self.fallback: Summariser | None = None
        if not raise_errors:
            self.fallback = fallback or ExtractiveSummariser(max_tokens=max_tokens)

    def summarise(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """Ask the model for a summary of ``messages``."""
        rendered = truncate_to_tokens(render_messages(messages), self.input_tokens)
        system = _SUMMARY_SYSTEM.format(words=max(30, int(self.max_tokens * 0.7)))
        try:
            return self.client.complete_text(system, rendered, max_tokens=self.max_tokens)
        except ProviderError as exc:
            if self.fallback is None:
                raise
            log.warning("summary model failed (%s); using %s", exc, type(self.fallback).__name__)
            return self.fallback.summarise(messages)


__all__ = ["SUMMARY_HEADER", "ExtractiveSummariser", "LLMSummariser", "Summariser",
           "render_messages"]
