"""End-of-session extraction: ``mem.extract(scope, transcript, proposer=...)`` (DESIGN §5).

A *proposer* reads the session and suggests what deserves durable memory;
the harness checks every suggestion and the write policy decides. Most
sessions should produce zero or one fact.

Contract:

- Input: a transcript as a list of message dicts (``role`` in system | user |
  assistant | tool, ``content`` as text or content parts, OpenAI-style
  ``tool_calls`` on assistant messages, or Anthropic ``tool_use`` /
  ``tool_result`` blocks), ``{"messages": [...]}``, or a
  :class:`memstrata.transcript.Transcript`. Turn *N* is the message at index
  *N* of that list (0-based). A malformed message is a ValidationError.
- Proposers (:class:`Proposer`): :class:`LLMProposer` asks a model through
  :meth:`~memstrata.llm.LLMClient.complete_json` (OpenAI-compatible servers and
  Anthropic, structured output) with explicit criteria;
  :class:`ExplicitProposer` needs no model: the user's own "remember that ...",
  "from now on ...", "forget ..." sentences, and the agent's ``propose_memory``
  tool calls. Each :class:`Proposal` cites the turn it comes from.
- All or nothing. Every proposal is checked before anything is written:
  the cited turn exists and is a user, assistant or tool turn (a system
  prompt or a memstrata summary cannot be cited); an ``evidence`` quote, if
  given, occurs verbatim in that turn (case, whitespace and quote style
  ignored; for proposals from tool calls such as ``propose_memory``, whose
  ``via`` is neither ``llm`` nor ``statement``: in any turn up to the call);
  and the turn *supports* the claim: at least ``SUPPORT_MIN`` (half) of the
  claim's content words, names of the subject and scope left out, occur in
  the turn (stemmed; see :mod:`memstrata.judge`), or a third
  (``SUPPORT_MIN_QUOTED``) when the evidence quote was found in the turn.
  Malformed model output is a :class:`~memstrata.errors.ProviderError`; any
  invalid proposal is a :class:`~memstrata.errors.ValidationError` listing
  every problem. Either way nothing is written. Conflict judging (which may
  call a model) also runs before the first write. ``strict=False`` reports
  invalid proposals as rejected instead of raising.
- Actor follows the cited turn's role: user -> ``user``, assistant ->
  ``agent``, tool -> ``tool`` (so tool and agent content waits for review).
  Source is ``{source}#turn-{N}``; evidence is the quote, else an excerpt of
  the turn. A proposal's ``applies_to`` picks the fact's scope: ``user``
  (the user alone, so it follows them across projects), ``project`` (the
  project alone) or ``scope`` (the extraction scope as given).
- Each proposal goes through :meth:`Facts.propose_candidate` (the write
  policy, dedup, supersession), after :func:`memstrata.judge.resolve` has
  looked for an existing fact in another slot that it duplicates or
  supersedes (judge: :class:`~memstrata.judge.LLMJudge` on the proposer's
  client when it has one, else :class:`~memstrata.judge.SlotJudge`).
- "forget ..." deletes, for real (``mem.forget``), the facts owned by the
  scope's *user* (never tenant- or project-wide) whose text contains every
  content word of the request, with their supersession history. Without a
  user in the scope it is rejected. Episodes are not searched.
- ``task=``: an identity fact sent to review is listed in that task's
  checkpoint under ``pending_identity_changes`` (``fact:ID ...``); entries
  whose fact is no longer pending are dropped (:func:`sync_pending_identity`).
- The :class:`ExtractionReport` lists committed, pending, duplicate,
  superseding, rejected and forgotten items with reasons, and ``errors`` for
  writes that failed after validation (each write is its own transaction).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

import pydantic
from pydantic import Field

from .errors import MemstrataError, NotFound, ProviderError, ValidationError
from .judge import ConflictJudge, LLMJudge, SlotJudge, content_terms, coverage, names_of, resolve
from .models import (
    FACT_KINDS,
    MAX_SOURCE,
    Checkpoint,
    Fact,
    FactKind,
    Scope,
    Tier,
    _Model,
    build,
    clean_text,
)
from .policy import Candidate
from .safety import redact_secrets
from .scoping import owned_sql

if TYPE_CHECKING:
    from .llm import LLMClient
    from .memory import Memory

#: Share of a claim's content words that must occur in the cited turn.
SUPPORT_MIN = 0.5
#: The same, when the proposal carries an evidence quote found verbatim in the turn: the
#: quote pins the statement down, so a paraphrase ("docs PRs" -> "documentation pull
#: requests") may share fewer words.
SUPPORT_MIN_QUOTED = 1 / 3
#: Proposals an LLM proposer may make per session; extras are reported as rejected.
DEFAULT_MAX_CANDIDATES = 3
#: Characters of the cited turn kept as evidence when no quote is given.
EXCERPT_CHARS = 400
ROLE_ACTOR: dict[str, str] = {"user": "user", "assistant": "agent", "tool": "tool"}
_ROLES = ("system", "user", "assistant", "tool")
_SUMMARY_PREFIX = "[Summary of turns"
AppliesTo = Literal["user", "project", "scope"]
ItemStatus = Literal["committed", "pending", "duplicate", "superseding", "rejected", "forgotten"]


# --------------------------------------------------------------------------- the session


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


class Proposal(_Model):
    """A suggested fact, citing the turn (message index) it comes from."""

    claim: str
    kind: FactKind
    subject: str
    attribute: str
    turn: int
    evidence: str | None = None
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    tier: Tier = "standard"
    applies_to: AppliesTo = "scope"
    via: str = "llm"


class ForgetRequest(_Model):
    """A user's request to forget something, citing the turn it was made in."""

    turn: int
    match: str
    via: str = "statement"


Proposed = Proposal | ForgetRequest


@runtime_checkable
class Proposer(Protocol):
    """Suggests what a session should leave in durable memory."""

    name: str
    #: At most this many proposals are kept (None: no cap); extras are reported.
    max_candidates: int | None

    def propose(self, session: Session) -> Sequence[Proposed]:
        """Return proposals (and forget requests); raise ProviderError on unusable output."""
        ...


# ------------------------------------------------------------------------ the transcript


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
            elif kind == "tool_result":
                tool_results += 1
                texts.append(_content_text(part.get("content")))
            else:
                texts.append(str(part.get("text", "")))
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
    return Turn(index, role, text, tuple(calls), _opt_str(message.get("name")))


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p)
                         for p in content)
    return "" if content is None else str(content)


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


# -------------------------------------------------------------------- explicit proposer

_LEAD = re.compile(r"^(?:(?:ok(?:ay)?|oh|also|and|btw|by the way|hey|hi|fyi|so|please|just|"
                   r"one more thing)\b[,:]?\s+)+", re.I)
_REMEMBER = re.compile(r"^(?:remember|keep in mind|don't forget|do not forget|"
                       r"for future reference)\b[,:]?\s*(?:that\b\s*)?(?P<body>.+)$", re.I)
_FROM_NOW = re.compile(r"^(?:from now on|going forward|from here on(?: out)?|henceforth)\b"
                       r"[,:]?\s*(?P<body>.+)$", re.I)
_FROM_NOW_END = re.compile(r"^(?P<body>.+?)[,;]?\s+(?:from now on|going forward|"
                           r"from here on(?: out)?)$", re.I)
_FORGET = re.compile(r"^(?:forget|stop remembering|delete (?:the |your )?memory (?:of|about))"
                     r"\b[,:]?\s*(?:that\b\s*|about\b\s*|what i (?:said|told you) about\b\s*|"
                     r"everything (?:about|on)\b\s*)?(?P<body>.+)$", re.I)
_TOO_VAGUE = frozenset({"it", "that", "this", "everything", "all", "all of it", "all that",
                        "about it", "what i said"})
_TEMPORARY = re.compile(r"\b(?:for now|for the moment|for a moment|for a bit|for today)$", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_KIND_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("profile", re.compile(r"^(?:i am|i'm|i work|my (?:role|title|job|team) |i lead|i manage)"
                           r"\b", re.I)),
    ("relationship", re.compile(r"\b(?:my (?:manager|boss|lead|colleague|teammate)|"
                                r"reports? to)\b", re.I)),
    ("decision", re.compile(r"\b(?:we (?:have |'ve )?decided|we're going with|"
                            r"we are going with)\b", re.I)),
    ("constraint", re.compile(r"\b(?:always|never|must|mustn't|don't|do not|only|avoid|"
                              r"no more than|at most|at least)\b", re.I)),
    ("system_fact", re.compile(r"\b(?:we use|we're using|we are using|runs on|is hosted|"
                               r"deploys? (?:to|from)|our (?:stack|database|db|ci|repo))\b",
                               re.I)),
)
_STANCE = frozenset({"prefer", "prefers", "like", "likes", "want", "wants", "please", "use",
                     "uses", "always", "never", "now", "really", "rather", "i'd", "i'll", "let's",
                     "make", "sure", "keep"})
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i'd|i've|i'll|me|my|mine)\b", re.I)


class ExplicitProposer:
    """Proposals without a model: what the user explicitly asked to keep or forget.

    User turns only (never tool output, never a summary), one sentence at a
    time, at the start of the sentence (after fillers such as "ok," or
    "please"): "remember (that) X", "keep in mind X", "don't forget that X",
    "from now on X" / "X from now on", "going forward X" -> a proposal whose
    claim is the user's words, ``{user} said: "X"`` (``{user} said, from now
    on: "X"``). "Remember to X" is a one-off reminder and is skipped unless X
    starts with always/never. "forget (that|about) X" -> a forget request,
    unless X is vague ("it", "everything") or temporary ("... for now").
    Kind comes from keyword rules (profile, relationship, decision,
    constraint, system fact; otherwise preference), the attribute from the
    first content words of X, the subject is the scope's user; first-person
    statements apply at the user level. Assistant turns: each
    ``propose_memory`` call (arguments as in :mod:`memstrata.tools`) becomes
    a proposal citing that turn; malformed arguments are a ValidationError.
    """

    name = "explicit"
    max_candidates: int | None = None

    def __init__(self, *, confidence: float = 0.9, tool_name: str = "propose_memory") -> None:
        self.confidence = confidence
        self.tool_name = tool_name

    def propose(self, session: Session) -> list[Proposed]:
        out: list[Proposed] = []
        speaker = session.scope.user or "the user"
        for turn in session.turns:
            if turn.role == "user":
                for sentence in _SENTENCE.split(turn.content):
                    found = self._statement(sentence, turn.index, speaker, session.scope)
                    if found is not None:
                        out.append(found)
            elif turn.role == "assistant":
                out += [self._tool_call(c, turn.index) for c in turn.tool_calls
                        if c.name == self.tool_name]
        return out

    def _statement(self, sentence: str, index: int, speaker: str,
                   scope: Scope) -> Proposed | None:
        text = _LEAD.sub("", sentence.strip()).strip()
        if m := _FORGET.match(text):
            body = _clean_body(m["body"])
            if (body.lower() in _TOO_VAGUE or _TEMPORARY.search(body)
                    or not content_terms(body)):
                return None
            return ForgetRequest(turn=index, match=body)
        standing = False
        if m := _REMEMBER.match(text):
            body = _clean_body(m["body"])
            if body.lower().startswith("to "):
                body = body[3:]
                if not re.match(r"(?:always|never)\b", body, re.I):
                    return None  # "remember to send the report": a one-off request
        elif m := (_FROM_NOW.match(text) or _FROM_NOW_END.match(text.rstrip(".!"))):
            body = _clean_body(m["body"])
            standing = True
        else:
            return None
        if not content_terms(body):
            return None
        said = "said, from now on" if standing else "said"
        kind = next((k for k, rule in _KIND_RULES if rule.search(body)), "preference")
        first_person = bool(_FIRST_PERSON.search(body)) and scope.user is not None
        return Proposal(claim=f'{speaker} {said}: "{body}"', kind=cast(FactKind, kind),
                        subject=scope.user or "user", attribute=_slug(body), turn=index,
                        confidence=self.confidence,
                        applies_to="user" if first_person else "scope", via="statement")

    def _tool_call(self, call: ToolCall, index: int) -> Proposal:
        from .tools import ProposeMemoryArgs

        args = call.arguments
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError as exc:
                raise ValidationError(f"turn {index}: {call.name} arguments are not valid JSON "
                                      f"({exc.msg}); nothing was written") from None
        try:
            parsed = ProposeMemoryArgs.model_validate(args)
        except pydantic.ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                                 for e in exc.errors())
            raise ValidationError(f"turn {index}: invalid {call.name} arguments: {problems}; "
                                  "nothing was written") from None
        return Proposal(claim=parsed.claim, kind=parsed.kind, subject=parsed.subject,
                        attribute=parsed.attribute, turn=index, evidence=parsed.evidence,
                        confidence=parsed.confidence, via=self.tool_name)


_TRAILER = re.compile(r"[,;]?\s*(?:thanks|thank you|please|ok|okay|cheers)[.!]*$", re.I)


def _clean_body(body: str) -> str:
    body = _TRAILER.sub("", body.strip().rstrip(".!;, ")).strip().rstrip(".!;, ").strip()
    return body[:1].upper() + body[1:] if body else body


def _slug(body: str) -> str:
    words = [w for w in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", body.lower())
             if w not in _STANCE and content_terms(w)]
    return "_".join(words[:4])[:100] or "note"


# ------------------------------------------------------------------------- LLM proposer

DEFAULT_CRITERIA = """A statement QUALIFIES for long-term memory when it will still matter in \
future, unrelated sessions:
- stable preferences: how the user likes work done, tools, style, tone;
- role and team: who the user is, what they own, who they work with;
- recurring constraints: rules that apply to every task (compliance, review, deadlines that recur);
- systems used: services, stacks, repositories, environments and how they are used;
- output format: the form answers, documents or code should take.
It does NOT qualify when it is:
- about this task only: its progress, files, bugs, intermediate results or next steps;
- a transient state: today's mood, what is broken right now, a temporary workaround;
- a one-off request: something to do once in this session;
- only said by the assistant or a tool and not confirmed by the user;
- a secret, credential or personal data nobody asked to keep; or a guess."""

_SYSTEM = """You review a finished session between a user and an AI assistant and propose what \
deserves to be kept in the assistant's long-term memory.

{criteria}

Most sessions yield zero or one fact; propose at most {max_candidates}. An empty list is a \
good answer when nothing qualifies. Do not propose what the existing records already say; when \
a statement changes or replaces an existing record, reuse that record's subject and attribute \
exactly, so the new fact supersedes it.

For each candidate give:
- claim: one or two sentences in the third person that name the subject, in the words of the \
cited turn as far as possible;
- kind: one of {kinds};
- subject: "{user}" for the user{project_hint}, or the name of the system it is about;
- attribute: a short snake_case name of the question the fact answers (e.g. standup_format, \
release_notes_language);
- turn: the number of the turn where it was stated, as shown in [turn N];
- evidence: an exact quote (at most 200 characters) copied from that turn;
- confidence: 0.9 when stated outright, 0.7-0.8 when clearly implied; do not propose below 0.7;
- tier: "identity" only for who the user is and what always applies to them (role, team, \
employer); otherwise "standard";
- applies_to: "user" for the user wherever they work (preferences, role), "project" for a \
fact about the project that holds for everyone on it, "scope" for this user in this project."""

EXTRACTION_SCHEMA: dict[str, Any] = {
    "title": "extraction",
    "type": "object",
    "properties": {
        "candidates": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "claim": {"type": "string"},
                    "kind": {"type": "string", "enum": list(FACT_KINDS)},
                    "subject": {"type": "string"},
                    "attribute": {"type": "string"},
                    "turn": {"type": "integer"},
                    "evidence": {"type": ["string", "null"]},
                    "confidence": {"type": "number"},
                    "tier": {"type": "string", "enum": ["standard", "identity"]},
                    "applies_to": {"type": "string", "enum": ["user", "project", "scope"]},
                },
                "required": ["claim", "kind", "subject", "attribute", "turn", "evidence",
                             "confidence", "tier", "applies_to"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["candidates"],
    "additionalProperties": False,
}


class LLMProposer:
    """Proposals from a language model, with explicit criteria and structured output.

    The prompt carries the criteria, the scope's current facts (restricted
    ones left out) so the model can reuse their slots, and the transcript as
    ``[turn N] role: text`` lines (system prompts and summaries left out,
    secrets redacted, each turn cut to ``max_turn_chars``, the oldest turns
    dropped beyond ``max_prompt_chars``); a session without a user,
    assistant or tool turn is not sent at all. Output that does not fit :data:`EXTRACTION_SCHEMA`
    is a ProviderError.
    """

    def __init__(self, client: LLMClient, *, criteria: str = DEFAULT_CRITERIA,
                 max_candidates: int = DEFAULT_MAX_CANDIDATES, max_turn_chars: int = 2000,
                 max_prompt_chars: int = 48000, max_tokens: int = 1500) -> None:
        if max_candidates < 1:
            raise ValidationError("max_candidates must be at least 1")
        self.client = client
        self.criteria = criteria
        self.max_candidates: int | None = max_candidates
        self.max_turn_chars = max_turn_chars
        self.max_prompt_chars = max_prompt_chars
        self.max_tokens = max_tokens
        label = getattr(client, "label", None) or type(client).__name__
        self.name = f"llm {label}"

    def system_prompt(self, session: Session) -> str:
        scope = session.scope
        return _SYSTEM.format(
            criteria=self.criteria, max_candidates=self.max_candidates,
            kinds=", ".join(FACT_KINDS), user=scope.user or "user",
            project_hint=f', "{scope.project}" for the project' if scope.project else "")

    def user_prompt(self, session: Session) -> str:
        facts = [f for f in session.existing if f.sensitivity != "restricted"]
        head = "Existing records (current):\n" + ("\n".join(
            f"- {f.subject}/{f.attribute} ({f.kind}, since "
            f"{(f.valid_from or f.created_at).date().isoformat()}): {f.claim}" for f in facts)
            or "- none")
        lines: list[str] = []
        used = len(head)
        for turn in reversed(session.turns):
            if turn.actor is None:
                continue
            label = f"tool {turn.name}" if turn.role == "tool" and turn.name else turn.role
            body = redact_secrets(turn.text)[0]  # secrets never leave for a model provider
            if len(body) > self.max_turn_chars:
                body = body[: self.max_turn_chars] + " [...]"
            line = f"[turn {turn.index}] {label}: {body}"
            if used + len(line) > self.max_prompt_chars and lines:
                lines.append("(earlier turns omitted)")
                break
            lines.append(line)
            used += len(line)
        return head + "\n\nSession transcript:\n" + "\n\n".join(reversed(lines))

    def propose(self, session: Session) -> list[Proposed]:
        if not any(turn.actor for turn in session.turns):
            return []  # nothing a fact could cite: no call
        answer = self.client.complete_json(self.system_prompt(session), self.user_prompt(session),
                                           EXTRACTION_SCHEMA, max_tokens=self.max_tokens)
        items = answer.get("candidates") if isinstance(answer, Mapping) else None
        if not isinstance(items, list):
            raise ProviderError(f"{self.name} answered without a candidates list",
                                hint="use a model/server with structured output")
        out: list[Proposed] = []
        for n, item in enumerate(items, 1):
            if not isinstance(item, Mapping):
                raise ProviderError(f"{self.name}: candidate {n} is not an object")
            try:
                out.append(Proposal(**{**item, "via": "llm"}))
            except pydantic.ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                     for e in exc.errors())
                raise ProviderError(f"{self.name}: candidate {n} is malformed: {problems}; "
                                    "nothing was written",
                                    hint="the model ignored the schema") from None
        return out


# ------------------------------------------------------------------------------ report


class ExtractionItem(_Model):
    """What happened to one proposal or forget request, and why."""

    status: ItemStatus
    reason: str
    turn: int | None = None
    via: str | None = None
    actor: str | None = None
    claim: str | None = None
    kind: str | None = None
    slot: str | None = None
    ref: str | None = None
    superseded: str | None = None
    judge: str | None = None
    detectors: list[str] = Field(default_factory=list)
    removed: dict[str, int] | None = None


class ExtractionReport(_Model):
    """The outcome of one extraction, grouped by status."""

    scope: Scope
    proposer: str
    source: str
    turns: int
    committed: list[ExtractionItem] = Field(default_factory=list)
    pending: list[ExtractionItem] = Field(default_factory=list)
    duplicate: list[ExtractionItem] = Field(default_factory=list)
    superseding: list[ExtractionItem] = Field(default_factory=list)
    rejected: list[ExtractionItem] = Field(default_factory=list)
    forgotten: list[ExtractionItem] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    checkpoint: str | None = None

    def add(self, item: ExtractionItem) -> None:
        getattr(self, item.status).append(item)

    @property
    def items(self) -> list[ExtractionItem]:
        """Every item, in turn order."""
        every = [*self.committed, *self.pending, *self.duplicate, *self.superseding,
                 *self.rejected, *self.forgotten]
        return sorted(every, key=lambda i: -1 if i.turn is None else i.turn)

    @property
    def written(self) -> int:
        """New fact records stored (committed, superseding and pending)."""
        return len(self.committed) + len(self.superseding) + len(self.pending)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        """One line per item, for people."""
        counts = ", ".join(f"{len(getattr(self, s))} {s}" for s in
                           ("committed", "superseding", "pending", "duplicate", "rejected",
                            "forgotten"))
        lines = [f"extraction by {self.proposer} over {self.turns} turns: {counts}"]
        for it in self.items:
            what = it.claim or ""
            lines.append(f"  {it.status:<11} turn {it.turn}: {what} -- {it.reason}")
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


# ------------------------------------------------------------------------------ extract


@dataclass
class _Planned:
    proposal: Proposed
    candidate: Candidate | None = None
    judge_note: str | None = None
    problem: str | None = None
    index: int = 0


def extract(mem: Memory, scope: Scope, transcript: Any, proposer: Proposer | None = None, *,
            source: str | None = None, task: str | None = None,
            judge: ConflictJudge | None = None, strict: bool = True) -> ExtractionReport:
    """Run ``proposer`` over the session and write what the policy accepts (see module doc)."""
    turns = load_transcript(transcript)
    now = mem.clock.now()
    try:
        base = clean_text(source or f"session:{now.date().isoformat()}", field="source",
                          max_len=MAX_SOURCE - 20)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    proposer = proposer if proposer is not None else ExplicitProposer()
    if judge is None:
        client = getattr(proposer, "client", None)
        judge = LLMJudge(client) if client is not None else SlotJudge()
    existing = tuple(mem.facts.current(scope, limit=1000))
    session = Session(scope, turns, existing, now)
    proposals = list(proposer.propose(session))
    name = str(getattr(proposer, "name", type(proposer).__name__))
    odd = [type(p).__name__ for p in proposals if not isinstance(p, Proposal | ForgetRequest)]
    if odd:
        raise ValidationError(f"proposer {name} returned {', '.join(sorted(set(odd)))}, not "
                              "Proposal or ForgetRequest; nothing was written")
    report = ExtractionReport(scope=scope, proposer=name, source=base, turns=len(turns))

    plans = [_check(p, n, turns, scope, base) for n, p in enumerate(proposals, 1)]
    bad = [p for p in plans if p.problem]
    if bad and strict:
        listed = "; ".join(str(p.problem) for p in bad[:5])
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise ValidationError(
            f"extraction refused, nothing was written: {len(bad)} of {len(plans)} proposals "
            f"from {name} are invalid: {listed}{more}",
            hint="each proposal must cite an existing user/assistant/tool turn that states it",
            problems=[p.problem for p in bad])
    for p in bad:
        report.add(_item(p, "rejected", f"invalid: {p.problem}"))
    plans = [p for p in plans if not p.problem]
    plans = _cap(plans, getattr(proposer, "max_candidates", None), report)

    # Judging may call a model: do all of it before the first write.
    for plan in plans:
        if plan.candidate is not None:
            _plan_conflict(mem, plan, judge, existing, now)

    for plan in sorted(plans, key=lambda p: (p.proposal.turn, p.index)):
        try:
            if isinstance(plan.proposal, ForgetRequest):
                report.add(_forget(mem, scope, plan))
            else:
                report.add(_write(mem, plan))
        except MemstrataError as exc:
            report.errors.append(f"turn {plan.proposal.turn}: {type(exc).__name__}: {exc}")
    if task is not None:
        try:
            cp = _note_pending_identity(mem, scope, task, report)
            report.checkpoint = cp.ref if cp is not None else None
        except MemstrataError as exc:
            report.errors.append(f"checkpoint {task}: {type(exc).__name__}: {exc}")
    return report


def _check(p: Proposed, n: int, turns: tuple[Turn, ...], scope: Scope, base: str) -> _Planned:
    plan = _Planned(p, index=n)
    what = f"proposal {n} ({p.via}"
    what += f', "{_short(p.claim)}")' if isinstance(p, Proposal) else ", forget)"
    if not 0 <= p.turn < len(turns):
        span = f"turns 0-{len(turns) - 1}" if turns else "no turns"
        plan.problem = f"{what} cites turn {p.turn}, but the transcript has {span}"
        return plan
    turn = turns[p.turn]
    if isinstance(p, ForgetRequest):
        if turn.role != "user":
            plan.problem = f"{what} cites turn {p.turn}, a {turn.role} turn: only the user " \
                           "can ask to forget"
        return plan
    if turn.actor is None:
        plan.problem = f"{what} cites turn {p.turn}, a {turn.role} message, which no " \
                       "fact can come from"
        return plan
    if p.evidence:
        # A propose_memory call may quote what the user said earlier in the session.
        pool = turn.text if p.via in ("llm", "statement") else "\n".join(
            t.text for t in turns[: p.turn + 1])
        if not quote_in(p.evidence, pool):
            plan.problem = f"{what}: its evidence quote does not occur in turn {p.turn}"
            return plan
    names = [*names_of(scope, p.subject), "said"]  # "said": the explicit proposer's framing
    share = support(p.claim, turn.text, names)
    need = SUPPORT_MIN_QUOTED if p.evidence else SUPPORT_MIN
    if share < need:
        plan.problem = (f"{what} is not supported by turn {p.turn}: {share:.0%} of its content "
                        f"words occur there (needs {need:.0%})")
        return plan
    evidence = p.evidence or _excerpt(turn.text)
    try:
        plan.candidate = build(
            Candidate, scope=_fact_scope(scope, p.applies_to), kind=p.kind, subject=p.subject,
            attribute=p.attribute, claim=p.claim, actor=turn.actor,
            source=f"{base}#turn-{p.turn}", confidence=p.confidence, tier=p.tier,
            evidence=evidence)
    except ValidationError as exc:
        plan.problem = f"{what}: {exc.message}"
    return plan


def _fact_scope(scope: Scope, applies_to: AppliesTo) -> Scope:
    if applies_to == "user" and scope.user is not None:
        return Scope(tenant=scope.tenant, user=scope.user)
    if applies_to == "project" and scope.project is not None:
        return Scope(tenant=scope.tenant, project=scope.project)
    return scope


def _cap(plans: list[_Planned], cap: int | None, report: ExtractionReport) -> list[_Planned]:
    facts = [p for p in plans if isinstance(p.proposal, Proposal)]
    if cap is None or len(facts) <= cap:
        return plans
    ranked = sorted(facts, key=lambda p: (-_confidence(p), p.index))
    dropped = {id(p) for p in ranked[cap:]}
    for p in ranked[cap:]:
        report.add(_item(p, "rejected", f"over the cap of {cap} proposals per session "
                                        f"(kept the {cap} most confident)"))
    return [p for p in plans if id(p) not in dropped]


def _confidence(plan: _Planned) -> float:
    return plan.proposal.confidence if isinstance(plan.proposal, Proposal) else 1.0


def _plan_conflict(mem: Memory, plan: _Planned, judge: ConflictJudge,
                   existing: Sequence[Fact], now: datetime) -> None:
    cand = plan.candidate
    assert cand is not None
    if mem.rt.policy.judge(cand, now).action == "reject":
        return  # the write reports the rejection; no judge call for it
    res = resolve(mem, cand, judge, facts=existing)
    cand = res.candidate
    plan.judge_note = res.note
    current = next((f for f in existing if f.scope == cand.scope and f.status == "active"
                    and (f.subject, f.attribute) == (cand.subject, cand.attribute)), None)
    if res.action != "duplicate" and current is not None and current.claim != cand.claim:
        # This write will supersede `current`: say why, with the evidence, on both records.
        why = f"{cand.actor} stated in {cand.source}: \"{_short(cand.evidence or '', 200)}\""
        if res.judgement is not None:
            why += f" ({res.judgement.judge} judge: {res.judgement.reason})"
        cand = cand.model_copy(update={"reason": why})
    plan.candidate = cand


def _write(mem: Memory, plan: _Planned) -> ExtractionItem:
    cand = plan.candidate
    assert cand is not None
    res = mem.facts.propose_candidate(cand)
    item = _item(plan, res.status, res.reason)
    item.detectors = list(res.detectors)
    item.judge = plan.judge_note
    item.actor = cand.actor
    item.slot = f"{cand.subject}/{cand.attribute}"
    if res.record is not None:
        item.ref = res.record.ref
        item.slot = f"{res.record.subject}/{res.record.attribute}"
        item.claim = redact_secrets(res.record.claim)[0]
    if res.superseded is not None:
        item.superseded = res.superseded.ref
    return item


def _forget(mem: Memory, scope: Scope, plan: _Planned) -> ExtractionItem:
    req = plan.proposal
    assert isinstance(req, ForgetRequest)
    if scope.user is None:
        return _item(plan, "rejected", "a forget request needs a user in the scope; nothing "
                                       "is forgotten tenant- or project-wide from a chat")
    user_scope = Scope(tenant=scope.tenant, user=scope.user)
    ids = _matching_fact_ids(mem, user_scope, req.match)
    if not ids:
        return _item(plan, "rejected", f"no fact of user {scope.user} mentions every content "
                                       "word of the request; nothing was forgotten")
    done = mem.forget(user_scope, record_ids=sorted(ids))
    item = _item(plan, "forgotten", f"deleted {done.counts.get('facts', 0)} fact record(s) of "
                                    f"user {scope.user}, history included")
    item.removed = {k: v for k, v in done.counts.items() if v}
    return item


def _matching_fact_ids(mem: Memory, user_scope: Scope, match: str) -> set[str]:
    wanted = content_terms(match)
    where, params = owned_sql(user_scope)
    with mem.db.transaction(user_scope.tenant, write=False) as tx:
        rows = tx.all("SELECT r.id AS id, r.claim AS claim, r.subject AS subject, "
                      "r.attribute AS attribute, r.supersedes AS supersedes, "
                      f"r.superseded_by AS superseded_by FROM facts r WHERE {where}", params)
    hits = {r["id"] for r in rows if coverage(
        wanted, content_terms(f"{r['claim']} {r['subject']} {r['attribute']}")) == 1.0}
    links: dict[str, set[str]] = {}
    for r in rows:
        for other in (r["supersedes"], r["superseded_by"]):
            if other:
                links.setdefault(r["id"], set()).add(other)
                links.setdefault(other, set()).add(r["id"])
    todo, seen = list(hits), set(hits)
    while todo:  # a forgotten fact takes its supersession history with it
        for other in links.get(todo.pop(), ()):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


def _item(plan: _Planned, status: ItemStatus, reason: str) -> ExtractionItem:
    p = plan.proposal
    if isinstance(p, ForgetRequest):
        return ExtractionItem(status=status, reason=reason, turn=p.turn, via=p.via,
                              actor="user", claim=redact_secrets(p.match)[0])
    return ExtractionItem(status=status, reason=reason, turn=p.turn, via=p.via,
                          claim=redact_secrets(p.claim)[0], kind=p.kind,
                          slot=f"{p.subject}/{p.attribute}")


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(redact_secrets(text)[0].split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


# ----------------------------------------------------------- pending identity changes


def _note_pending_identity(mem: Memory, scope: Scope, task: str,
                           report: ExtractionReport) -> Checkpoint | None:
    new = []
    for it in report.pending:
        if it.ref is None:
            continue
        fact = mem.facts.get(it.ref, tenant=scope.tenant)
        if fact.tier == "identity" and fact.status == "pending_review":
            new.append(pending_line(fact))
    return sync_pending_identity(mem, scope, task, add=new)


def pending_line(fact: Fact) -> str:
    """The checkpoint line for a pending identity fact (starts with its reference)."""
    return (f"{fact.ref} {fact.subject}/{fact.attribute}: {fact.claim} (proposed by "
            f"{fact.actor} via {fact.source}; approve or reject with memstrata review)")


def sync_pending_identity(mem: Memory, scope: Scope, task: str, *,
                          add: Sequence[str] = ()) -> Checkpoint | None:
    """Keep a task checkpoint's ``pending_identity_changes`` in step with the review queue.

    Lines starting ``fact:ID`` whose fact is no longer pending review (approved,
    rejected, forgotten) are dropped; ``add`` lines are appended unless their
    fact is already listed; other lines are kept. A new checkpoint version is
    saved only when the list changes. Call it after approving or rejecting.
    """
    cp = mem.checkpoints.current(scope, task)
    before = list(cp.pending_identity_changes) if cp is not None else []
    kept = []
    for line in before:
        ref = line.split(" ", 1)[0]
        if ref.startswith("fact:"):
            try:
                if mem.facts.get(ref, tenant=scope.tenant).status != "pending_review":
                    continue
            except NotFound:
                continue
        kept.append(line)
    listed = {line.split(" ", 1)[0] for line in kept}
    kept += [line for line in add if line.split(" ", 1)[0] not in listed]
    if kept == before:
        return cp
    return mem.checkpoints.save(scope, task, updated_by="extraction",
                                pending_identity_changes=kept)


__all__ = [
    "DEFAULT_CRITERIA",
    "DEFAULT_MAX_CANDIDATES",
    "EXTRACTION_SCHEMA",
    "SUPPORT_MIN",
    "SUPPORT_MIN_QUOTED",
    "ExplicitProposer",
    "ExtractionItem",
    "ExtractionReport",
    "ForgetRequest",
    "LLMProposer",
    "Proposal",
    "Proposed",
    "Proposer",
    "Session",
    "ToolCall",
    "Turn",
    "extract",
    "load_transcript",
    "pending_line",
    "quote_in",
    "support",
    "sync_pending_identity",
]
