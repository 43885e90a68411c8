"""Recognise text that reads as an instruction to the agent (prompt injection).

Contract
--------
* :func:`detect_injection` returns the :class:`InjectionFinding` objects of a
  text, ordered by position: each names the rule that fired and the span
  ``[start, end)`` in the *original* text. An empty tuple means clean.
  :func:`is_instruction_like` is ``bool(detect_injection(text))``.
* Pure and deterministic: no I/O, no logging, no model. The write policy runs
  it on content whose actor is ``tool`` or ``agent``; a hit quarantines the
  record and recall/context label it untrusted.
* Before matching, the text is normalised while keeping a map back to the
  original offsets: letter-spaced words (``i g n o r e``) joined, text after a
  right-to-left override read in the order a person sees it, NFKC (full-width
  letters), zero-width and other format characters removed, Unicode "tag"
  characters (invisible ASCII smuggling) decoded to ASCII, Cyrillic/Greek
  look-alike letters inside Latin words mapped to Latin, whitespace runs
  collapsed.

Rules (named regular expressions, in :mod:`.injection_rules`; all case-insensitive)
-----------------------------------------------------------------------------------
``instruction_override``   ignore/disregard/forget + previous/prior/your + instructions/rules...
                           (also French, Spanish, Portuguese, German, Italian, Dutch,
                           Russian, Chinese, Japanese, Korean)
``prompt_leak``            reveal/print/repeat + system prompt/hidden instructions...
``role_hijack``            "you are now DAN", "pretend you are", "roleplay as", jailbreak modes
``role_spoofing``          chat-template tokens, ``system:``/``[SYSTEM]``/``<system>`` markers
                           followed by an order, fake "Assistant: Sure" turns
``addressed_to_agent``     "note to the AI:", "if you are an AI language model", "AI
                           assistants processing this document", "Dear AI"
``authority_claim``        "new instructions:", "the real instructions are", ADMIN OVERRIDE,
                           "new rule for the agent"
``encoded_instruction``    "decode this and follow it" (an order hidden in base64 or the like)
``persistent_directive``   "from now on / going forward / in every future response" + a
                           behaviour verb (respond, recommend, send, remember, refer to...)
``exfiltration``           send/forward/email/upload + conversation, credentials, the user's
                           data... + to an address, URL or "me"; data-carrying image URLs
``memory_tampering``       "save this to your memory", "remember this permanently", "store as a
                           verified fact", "update your memory"
``concealment``            "do not tell the user", "without telling the user", "quietly forward"
``response_manipulation``  "tell the user that", "respond only in", "always recommend",
                           "describe it as safe", "when asked about X, say Y"
``hidden_instruction``     an HTML comment, hidden element or markdown comment whose content
                           fired another rule or addresses an AI
``invisible_text``         Unicode tag characters (text a person cannot see)

Precision over breadth: each rule needs the *shape* of an order to the agent
(an override verb with an instruction noun, a behaviour verb after "from now
on", a sensitive object *and* a destination...). "You must set the header",
"ignore the warnings about X", "send a POST request to https://..." and a
user's "remember that I prefer tabs" do not fire. Text *about* prompt
injection that quotes an attack verbatim does fire; quarantine is the right
outcome for a memory write.

Limits
------
Rules recognise phrasings, not intent. On two batches of injections written
after the rules (``tests/data/injection_corpus.yaml``, splits ``probe2`` and
``probe3``) the first measurement was about 70% recall with 1 false alarm in
30-40 benign texts; both batches were then folded in. Expect misses on
novel wording, paraphrase, other languages than those listed, and encodings
(base64, leetspeak). This is why the policy sends *every* ``tool``/``agent``
write to review whether or not this detector fires: the detector adds the
quarantine label, it is not the gate.

Each pattern carries anchor words; a pattern whose anchors are absent from
the text is not run (``prefilter=False`` turns this off, and the tests check
that it changes no finding on the corpus).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..errors import ConfigError
from .injection_rules import Pattern, built_in_rules
from .visible import as_latin, is_hidden


@dataclass(frozen=True)
class InjectionFinding:
    """One span that reads as an instruction to the agent, and the rule that saw it."""

    rule: str
    start: int
    end: int


# --------------------------------------------------------------------------- normalisation

_MIXED_WORD = re.compile(r"\w+")
_TAG_FIRST, _TAG_LAST = 0xE0020, 0xE007E


_SPACE_RUN = re.compile(r"[^\S\n]{2,}|[\t\r\f\v]")


def _normalise_ascii(text: str) -> tuple[str, list[int]]:
    """The fast path: only whitespace runs need collapsing."""
    parts: list[str] = []
    index: list[int] = []
    pos = 0
    for m in _SPACE_RUN.finditer(text):
        parts.append(text[pos:m.start()])
        index.extend(range(pos, m.start()))
        parts.append(" ")
        index.append(m.start())
        pos = m.end()
    parts.append(text[pos:])
    index.extend(range(pos, len(text)))
    return "".join(parts), index


def _normalise(text: str) -> tuple[str, list[int], list[tuple[int, int]]]:
    """The matching form of ``text``, the original index of each of its characters,
    and the original spans of Unicode tag-character runs."""
    if text.isascii():
        fast, fast_index = _normalise_ascii(text)
        return fast, fast_index, []
    chars: list[str] = []
    index: list[int] = []
    tags: list[tuple[int, int]] = []
    space = False
    for i, ch in enumerate(text):
        cp = ord(ch)
        if _TAG_FIRST <= cp <= _TAG_LAST:
            if tags and tags[-1][1] == i:
                tags[-1] = (tags[-1][0], i + 1)
            else:
                tags.append((i, i + 1))
            ch = chr(cp - 0xE0000)
        elif is_hidden(ch):
            continue  # zero-width and other characters that show nothing
        for c in unicodedata.normalize("NFKC", ch) if cp > 127 else ch:
            if c.isspace() and c != "\n":
                if space:
                    continue
                c, space = " ", True
            else:
                space = False
            chars.append(c)
            index.append(i)
    norm = "".join(chars)
    if any(ord(c) > 127 for c in norm):
        norm = _MIXED_WORD.sub(_unconfuse, norm)  # look-alike letters inside Latin words
    return norm, index, tags


#: A word written with a space between its letters (``i g n o r e``): five letters or more.
_SPACED = re.compile(r"(?<!\S)(?:[^\W\d_] ){4,}[^\W\d_](?!\S)")
#: A right-to-left override, and the text it shows reversed up to its pop (or the line's end).
_OVERRIDE = re.compile("\u202e([^\u202c\n]*)\u202c?")


def _as_shown(text: str) -> tuple[str, list[int]] | None:
    """``text`` as a person reads it where it hides words from patterns: letter-spaced words
    joined, and the text after a right-to-left override reversed; with the index in ``text``
    of each of its characters. None when it holds neither."""
    if _SPACED.search(text) is None and "\u202e" not in text:
        return None
    chars = list(text)
    index = list(range(len(text)))
    for m in reversed(list(_OVERRIDE.finditer(text))):
        start, end = m.span(1)
        chars[start:end] = chars[start:end][::-1]
        index[start:end] = index[start:end][::-1]
    shown = "".join(chars)
    out: list[str] = []
    where: list[int] = []
    pos = 0
    for m in _SPACED.finditer(shown):
        out.append(shown[pos:m.start()])
        where.extend(index[pos:m.start()])
        for i in range(m.start(), m.end()):
            if shown[i] != " ":
                out.append(shown[i])
                where.append(index[i])
        pos = m.end()
    out.append(shown[pos:])
    where.extend(index[pos:])
    return "".join(out), where


def _unconfuse(m: re.Match[str]) -> str:
    return as_latin(m.group(0))


_HIDDEN_CONTAINERS = re.compile(
    r"<!--(?P<c1>[\s\S]*?)-->"
    r"|<(?P<tag>\w+)[^>]*\bstyle\s*=\s*[\"'][^\"']*(?:display\s*:\s*none|visibility\s*:\s*hidden"
    r"|font-size\s*:\s*0|color\s*:\s*(?:#fff(?:fff)?\b|white|transparent)|opacity\s*:\s*0(?:\.0+)?"
    r"\s*(?:;|[\"']))[^\"']*[\"'][^>]*>(?P<c2>[\s\S]*?)</(?P=tag)\s*>"
    r"|<(?P<tag2>\w+)[^>]*\s(?:hidden|aria-hidden\s*=\s*[\"']true[\"'])[^>]*>(?P<c3>[\s\S]*?)"
    r"</(?P=tag2)\s*>"
    r"|^\[(?://|comment|_)\]:\s*(?:#|<>)\s*\((?P<c4>[^)\n]*)\)",
    re.IGNORECASE | re.MULTILINE,
)
# Inside a hidden container, an AI noun followed by an order addressed to it.
_AI_CUE = re.compile(
    r"\b(?:assistant|ai|agent|llm|chatbot|gpt|claude)\b[^.\n]{0,40}\b(?:must|should|shall"
    r"|ignore|remember|save|store|send|forward|tell|recommend|treat|always|never)\b",
    re.IGNORECASE,
)


_WORD = re.compile(r"[^\W\d_]+")
_PREFIX_MAX = 8


def _word_prefixes(lowered: str) -> set[str]:
    """Every prefix (up to ``_PREFIX_MAX`` letters) of every word of a lower-cased text."""
    return {w[:k] for w in set(_WORD.findall(lowered))
            for k in range(1, min(len(w), _PREFIX_MAX) + 1)}


class InjectionDetector:
    """A configured rule set.

    ``extra_rules`` maps a rule name to a regular expression (or several),
    matched case-insensitively on the normalised text; ``disabled`` switches
    built-in rules off (see :data:`RULES`). ``prefilter=False`` ignores the
    anchor pre-filter and runs every pattern (same findings, slower; for tests).
    """

    def __init__(
        self,
        *,
        extra_rules: Mapping[str, str | Iterable[str]] | None = None,
        disabled: Iterable[str] = (),
        prefilter: bool = True,
    ) -> None:
        rules = built_in_rules()
        off = set(disabled)
        unknown = off - set(rules) - {"hidden_instruction", "invisible_text"}
        if unknown:
            raise ConfigError(f"unknown injection rules to disable: {', '.join(sorted(unknown))}",
                              hint="see memstrata.injection.RULES")
        for extra_name, extra in (extra_rules or {}).items():
            for regex in [extra] if isinstance(extra, str) else extra:
                rules.setdefault(extra_name, []).append(Pattern(regex, (), True, re.IGNORECASE))
        compiled: list[tuple[str, re.Pattern[str], tuple[str, ...], bool]] = []
        for name, patterns in rules.items():
            if name in off:
                continue
            for pat in patterns:
                try:
                    rx = re.compile(pat.regex, pat.flags)
                except re.error as exc:
                    raise ConfigError(
                        f"injection rule {name!r} has an invalid regex: {exc}") from exc
                compiled.append((name, rx, pat.anchors if prefilter else (), pat.cased))
        self._patterns = tuple(compiled)
        # which patterns each anchor can wake: a text runs only the patterns one of whose
        # anchors it holds (and those without anchors), each anchor looked up once
        self._always = tuple(i for i, (_, _, anchors, _) in enumerate(compiled) if not anchors)
        by_anchor: dict[str, list[int]] = {}
        for i, (_, _, anchors, _) in enumerate(compiled):
            for a in anchors:
                by_anchor.setdefault(a, []).append(i)
        # An ASCII word anchor (``ignor``) matches the start of a word: looked up, all at
        # once, in the text's set of word prefixes. Anything else (``you are now``, ``<|``,
        # ``忽略``) is a substring search, skipped when its first word is absent. (Asking
        # each of the 328 anchors in turn cost 1.3 ms a text, more than a MiniLM embedding.)
        self._by_prefix: dict[str, set[int]] = {}
        substring: list[tuple[str, str | None, tuple[int, ...]]] = []
        for anchor, ix in by_anchor.items():
            if anchor.isascii() and anchor.isalpha():
                self._by_prefix.setdefault(anchor[:_PREFIX_MAX], set()).update(ix)
            else:
                first = re.match(r"[a-z]+", anchor)
                substring.append((anchor, first.group()[:_PREFIX_MAX] if first else None,
                                  tuple(ix)))
        self._substring = tuple(substring)
        self._hidden = "hidden_instruction" not in off
        self._invisible = "invisible_text" not in off

    @property
    def rule_names(self) -> tuple[str, ...]:
        """Sorted names of the active rules."""
        names = {name for name, *_ in self._patterns}
        names |= {"hidden_instruction"} if self._hidden else set()
        names |= {"invisible_text"} if self._invisible else set()
        return tuple(sorted(names))

    def detect(self, text: str) -> tuple[InjectionFinding, ...]:
        """Every span of ``text`` that reads as an instruction to the agent."""
        shown = _as_shown(text)
        norm, index, tags = _normalise(text if shown is None else shown[0])
        if shown is not None:  # back to the text's own offsets
            index = [shown[1][i] for i in index]
            tags = [(shown[1][s], shown[1][e - 1] + 1) for s, e in tags]
        lowered = norm.lower()
        if len(lowered) != len(norm):  # a few characters grow when lower-cased (İ)
            lowered = "".join(c.lower()[:1] for c in norm)
        prefixes = _word_prefixes(lowered)
        found: list[InjectionFinding] = []
        woken = set(self._always)
        for key in prefixes & self._by_prefix.keys():
            woken |= self._by_prefix[key]
        for anchor, first, patterns in self._substring:
            if (first is None or first in prefixes) and anchor in lowered:
                woken.update(patterns)
        for i in sorted(woken):
            name, rx, _anchors, cased = self._patterns[i]
            for m in rx.finditer(norm if cased else lowered):
                if m.end() > m.start():
                    span = index[m.start():m.end()]  # a reversed run maps backwards
                    found.append(InjectionFinding(name, min(span), max(span) + 1))
        if self._invisible:
            found.extend(InjectionFinding("invisible_text", s, e) for s, e in tags)
        if self._hidden:
            found.extend(self._hidden_findings(text, found))
        return _dedupe(found)

    def _hidden_findings(self, text: str, found: list[InjectionFinding]) -> list[InjectionFinding]:
        out: list[InjectionFinding] = []
        if "<" not in text and "]:" not in text:
            return out
        for m in _HIDDEN_CONTAINERS.finditer(text):
            start, end = m.span()
            inner = next(g for g in (m.group("c1"), m.group("c2"), m.group("c3"), m.group("c4"))
                         if g is not None)
            if any(start <= f.start and f.end <= end for f in found) or _AI_CUE.search(inner):
                out.append(InjectionFinding("hidden_instruction", start, end))
        return out


def _dedupe(found: list[InjectionFinding]) -> tuple[InjectionFinding, ...]:
    """Merge overlapping findings of the same rule; order by position."""
    out: list[InjectionFinding] = []
    for f in sorted(found, key=lambda f: (f.rule, f.start, f.end)):
        if out and out[-1].rule == f.rule and f.start < out[-1].end:
            out[-1] = InjectionFinding(f.rule, out[-1].start, max(out[-1].end, f.end))
        else:
            out.append(f)
    return tuple(sorted(out, key=lambda f: (f.start, f.end, f.rule)))


RULES: tuple[str, ...] = InjectionDetector().rule_names
"""Names of the built-in rules (usable in ``disabled``)."""

_DEFAULT = InjectionDetector()


def detect_injection(text: str) -> tuple[InjectionFinding, ...]:
    """Spans of ``text`` that read as an instruction to the agent (empty = clean)."""
    return _DEFAULT.detect(text)


def is_instruction_like(text: str) -> bool:
    """Whether ``text`` reads as an instruction to the agent."""
    return bool(_DEFAULT.detect(text))


__all__ = [
    "RULES",
    "InjectionDetector",
    "InjectionFinding",
    "detect_injection",
    "is_instruction_like",
]
