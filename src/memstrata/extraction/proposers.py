"""Proposers: what a session suggests for durable memory (DESIGN §5).

A *proposer* reads a :class:`~memstrata.extraction.session.Session` and returns
:class:`Proposal` objects (a claim citing the turn it comes from) and
:class:`ForgetRequest` objects; the extraction run (:mod:`memstrata.extraction.run`) checks
each one and the write policy decides. Most sessions should produce zero or one fact.

- :class:`ExplicitProposer` needs no model: the user's own "remember that ...", "from now
  on ...", "forget ..." sentences, and the agent's ``propose_memory`` tool calls (their
  arguments validated by the tool's own argument model, :mod:`memstrata.arguments`).
- :class:`LLMProposer` asks a model through
  :meth:`~memstrata.providers.llm.LLMClient.complete_json` (structured output) with
  explicit criteria; output that does not fit :data:`EXTRACTION_SCHEMA` is a ProviderError.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

import pydantic
from pydantic import Field

from ..arguments import ProposeMemoryArgs
from ..errors import ProviderError, ValidationError
from ..governance.safety import redact_secrets
from ..models import DEFAULT_CONFIDENCE, FACT_KINDS, FactKind, Scope, Tier, _Model
from . import statements
from .judges import content_terms
from .session import Session, ToolCall

if TYPE_CHECKING:
    from ..providers.llm import LLMClient

#: Proposals an LLM proposer may make per session; extras are reported as rejected.
DEFAULT_MAX_CANDIDATES = 3
AppliesTo = Literal["user", "project", "scope"]


class Proposal(_Model):
    """A suggested fact, citing the turn (message index) it comes from."""

    claim: str
    kind: FactKind
    subject: str
    attribute: str
    turn: int
    evidence: str | None = None
    confidence: float = Field(default=DEFAULT_CONFIDENCE, ge=0.0, le=1.0)
    tier: Tier = "standard"
    applies_to: AppliesTo = "scope"
    via: str = "llm"
    #: Why the proposal applies where it does (reported with the extraction).
    scope_reason: str | None = None


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
#: A short lead-in before the request: "Quick one - from now on ...", "Before we start:
#: remember that ...".
_LEAD_IN = re.compile(r"^[^:—–]{1,60}?(?::|—|–|\s-)\s+(?P<rest>(?:remember|keep in mind|don't "
                      r"forget|do not forget|for future reference|from now on|going forward|"
                      r"from here on|henceforth|forget|stop remembering)\b.+)$", re.I)
_STARTS = re.compile(r"^(?:remember|keep in mind|don't forget|do not forget|for future "
                     r"reference|from now on|going forward|from here on|henceforth|forget|"
                     r"stop remembering)\b", re.I)
_TOO_VAGUE = frozenset({"it", "that", "this", "everything", "all", "all of it", "all that",
                        "about it", "what i said"})
_TEMPORARY = re.compile(r"\b(?:for now|for the moment|for a moment|for a bit|for today)$", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_KIND_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("profile", re.compile(r"^(?:i am|i'm|i work|my (?:role|title|job|team) |i lead|i manage)"
                           r"\b", re.I)),
    ("relationship", re.compile(r"(?:\bmy |'s )(?:manager|boss|lead|colleague|teammate)\b|"
                                r"\breports? to\b", re.I)),
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
    constraint, system fact; otherwise preference); the attribute is the question the
    statement answers, from its predicate and the kind of its object or the question its
    words name (:func:`memstrata.extraction.statements.slot_attribute`: "I prefer Go" ->
    ``preferred programming language``, "my manager is Carol" -> ``manager``), else the
    first content words of X (never the subject's name). The subject is the person a
    third-person statement names ("Bob prefers spaces", "Bob's manager is Carol" ->
    ``bob``: :func:`~memstrata.extraction.statements.subject_of`, lower-cased), else the
    scope's user. First-person statements apply at the user level unless they name the
    session's project ("for this publication", "in this repo"), which keeps them at the
    scope; a statement about someone else stays at the scope; ``scope_reason`` says which
    and why. Assistant turns: each
    ``propose_memory`` call (arguments as in :mod:`memstrata.arguments`) becomes
    a proposal citing that turn; malformed arguments are a ValidationError.
    """

    name = "explicit"
    max_candidates: int | None = None

    def __init__(self, *, confidence: float = DEFAULT_CONFIDENCE,
                 tool_name: str = "propose_memory") -> None:
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
        lead_in = _LEAD_IN.match(text)
        if lead_in is not None and not _STARTS.match(text):
            text = _LEAD.sub("", lead_in["rest"]).strip()  # "Quick one - from now on X"
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
        named_person = statements.subject_of(body)
        about = named_person.lower() if named_person is not None else None
        if about is not None and about == (scope.user or "").lower():
            about = None  # the user named by name: a statement about the user
        first_person = bool(_FIRST_PERSON.search(body)) and scope.user is not None
        named = statements.named_scope(body)
        if about is not None:
            applies: AppliesTo = "scope"
            why = f"about {about} (a third-person statement): kept at this scope"
        elif first_person and named is None:
            applies = "user"
            why = "a first-person statement about the user: applies wherever they work"
        elif named is not None and scope.project is not None:
            applies = "scope"
            why = f"names {named!r}: kept at project {scope.project}"
        else:
            applies = "scope"
            why = "about this scope"
        slot = statements.slot_attribute(statements.read(body)) or _slug(
            body, drop=named_person or "")
        return Proposal(claim=f'{speaker} {said}: "{body}"', kind=cast(FactKind, kind),
                        subject=about or scope.user or "user", attribute=slot, turn=index,
                        confidence=self.confidence, applies_to=applies, via="statement",
                        scope_reason=why)

    def _tool_call(self, call: ToolCall, index: int) -> Proposal:
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


def _slug(body: str, *, drop: str = "") -> str:
    """The first content words of a statement (``drop``: the subject's name, which says
    whom it is about, not what)."""
    dropped = set(re.findall(r"[a-z0-9]+", drop.lower()))
    words = [w for w in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", body.lower())
             if w not in _STANCE and w not in dropped and w.removesuffix("'s") not in dropped
             and content_terms(w)]
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
            except ValidationError as exc:
                problems = "; ".join(exc.details.get("problems") or [exc.message])
                raise ProviderError(f"{self.name}: candidate {n} is malformed: {problems}; "
                                    "nothing was written",
                                    hint="the model ignored the schema") from None
        return out


__all__ = ["DEFAULT_CRITERIA", "DEFAULT_MAX_CANDIDATES", "EXTRACTION_SCHEMA", "AppliesTo",
           "ExplicitProposer", "ForgetRequest", "LLMProposer", "Proposal", "Proposed",
           "Proposer"]
