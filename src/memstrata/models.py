"""Typed records and scopes (DESIGN §3, §4), validated on the way in.

Every record carries ``id`` (ULID), ``scope``, ``created_at`` (aware UTC),
``provenance = {actor, source, evidence?}`` and a ``status``. Models are
pydantic v2 classes; :func:`build` turns pydantic's error into memstrata's
:class:`~memstrata.errors.ValidationError`, so callers see one exception type.

Text rules shared by every model: valid UTF-8 (no lone surrogates), no NUL
bytes, stripped, within the field's size limit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar, get_args

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator

from .errors import PolicyRejected, ValidationError
from .inputs import (
    MAX_CLAIM,
    MAX_NAME,
    MAX_SOURCE,
    MAX_TEXT,
    check_name,
    clean_text,
    readers_list,
    slot_name,
    unit_interval,
    utc_or_none,
)

Actor = Literal["user", "tool", "agent", "reviewer", "system", "import"]
FactKind = Literal[
    "preference", "profile", "constraint", "relationship", "system_fact", "decision", "lesson"
]
Tier = Literal["identity", "standard"]
Sensitivity = Literal["public", "internal", "restricted"]
FactStatus = Literal["active", "pending_review", "superseded", "retired", "expired", "rejected"]
#: Every status a fact may have (:data:`FactStatus`), in order.
FACT_STATUSES: tuple[str, ...] = get_args(FactStatus)
EpisodeStatus = Literal["current", "superseded", "expired"]
OperationStatus = Literal["pending", "in_progress", "succeeded", "failed", "unknown"]
WriteStatus = Literal["committed", "superseding", "duplicate", "pending", "rejected"]
Decision = Literal["planning", "lookup", "side_effect", "recovery"]
Layer = Literal["identity", "facts", "episodes", "checkpoint", "procedures", "scratch", "ledger"]

ACTORS: tuple[str, ...] = ("user", "tool", "agent", "reviewer", "system", "import")
FACT_KINDS: tuple[str, ...] = (
    "preference", "profile", "constraint", "relationship", "system_fact", "decision", "lesson",
)
#: The confidence a proposal gets when its caller states none (API, tools, extraction).
DEFAULT_CONFIDENCE = 0.9


# -- field types: each rule written once (memstrata.inputs), used by every model ------------

def _text(max_len: int, *, optional: bool = False, allow_empty: bool = False) -> Any:
    def check(value: Any, info: ValidationInfo) -> Any:
        if value is None and optional:
            return None
        return clean_text(value, field=str(info.field_name), max_len=max_len,
                          allow_empty=allow_empty)

    return BeforeValidator(check)


def _slot(value: Any, info: ValidationInfo) -> str:
    return slot_name(value, str(info.field_name))


def _date(value: Any, info: ValidationInfo) -> datetime | None:
    return utc_or_none(value, str(info.field_name))


def _confidence(value: Any, info: ValidationInfo) -> float:
    return unit_interval(value, str(info.field_name))


#: A short name (event type, subject): text of at most MAX_NAME characters.
NameText = Annotated[str, _text(MAX_NAME)]
OptionalNameText = Annotated[str | None, _text(MAX_NAME, optional=True)]
#: Free text of a record (episode text, evidence, outcome, reason).
LongText = Annotated[str, _text(MAX_TEXT)]
OptionalLongText = Annotated[str | None, _text(MAX_TEXT, optional=True)]
#: A fact's claim: 1-3 sentences.
ClaimText = Annotated[str, _text(MAX_CLAIM)]
#: Where a record came from.
SourceText = Annotated[str, _text(MAX_SOURCE)]
OptionalSourceText = Annotated[str | None, _text(MAX_SOURCE, optional=True)]
#: A fact's subject or attribute: lower-cased, whitespace collapsed.
SlotText = Annotated[str, BeforeValidator(_slot)]
#: An aware UTC datetime (ISO text accepted; naive datetimes refused).
UTCDateTime = Annotated[datetime | None, BeforeValidator(_date)]
#: A number from 0 to 1.
Confidence = Annotated[float, BeforeValidator(_confidence)]
#: Principals allowed to read a record (None: the whole scope).
Readers = Annotated[list[str] | None, BeforeValidator(lambda v: readers_list(v))]


def is_stale(recheck_after: datetime | None, now: datetime) -> bool:
    """The one definition of "stale": past its recheck date, so re-check before relying."""
    return recheck_after is not None and recheck_after < now


class _Model(BaseModel):
    """The base of memstrata's models: a bad field, given to the constructor or assigned,
    is memstrata's :class:`~memstrata.errors.ValidationError` naming it, with a hint
    (pydantic's own error never reaches the caller; ``model_validate`` keeps pydantic's,
    for the interfaces that report every field of a request)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            raise refused(type(self), exc) from None

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except pydantic.ValidationError as exc:
            raise refused(type(self), exc) from None


class Scope(BaseModel):
    """Who and what a record applies to (DESIGN §4).

    A record applies to a request when it is in the same tenant and each of
    its set fields (user, project, agent) equals the request's.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: str = "default"
    user: str | None = None
    project: str | None = None
    agent: str | None = None

    def __init__(self, **data: Any) -> None:
        """``Scope(user=...)`` refuses bad fields with memstrata's ValidationError, as every
        call that takes a scope does (pydantic's own error never reaches the caller)."""
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            raise refused(Scope, exc) from None

    @field_validator("tenant", mode="before")
    @classmethod
    def _tenant(cls, v: Any) -> str:
        out = check_name(v, "tenant")
        if out is None:
            raise ValueError("tenant must be set")
        return out

    @field_validator("user", "project", "agent", mode="before")
    @classmethod
    def _names(cls, v: Any, info: pydantic.ValidationInfo) -> str | None:
        return check_name(v, str(info.field_name))

    @property
    def key(self) -> str:
        """Canonical string of the scope's fields (used for uniqueness)."""
        return f"u={self.user or ''};p={self.project or ''};a={self.agent or ''}"

    @property
    def is_unscoped(self) -> bool:
        """True when neither user nor project is named (tenant-wide)."""
        return self.user is None and self.project is None

    def applies_to(self, request: Scope) -> bool:
        """Does a record with this scope apply to a request made in ``request``?"""
        if self.tenant != request.tenant:
            return False
        return all(
            mine is None or mine == theirs
            for mine, theirs in (
                (self.user, request.user),
                (self.project, request.project),
                (self.agent, request.agent),
            )
        )

    def specificity(self) -> int:
        """How many of user/project/agent are set (more specific ranks higher)."""
        return sum(x is not None for x in (self.user, self.project, self.agent))

    def __str__(self) -> str:
        parts = [f"tenant={self.tenant}"]
        parts += [f"{k}={v}" for k, v in (("user", self.user), ("project", self.project),
                                         ("agent", self.agent)) if v]
        return " ".join(parts)


class Provenance(_Model):
    """Who said it (actor), where it came from (source), and optional evidence."""

    actor: Actor
    source: SourceText
    evidence: OptionalLongText = None


class Fact(_Model):
    """A durable fact: one answer to the question (scope, subject, attribute)."""

    id: str
    scope: Scope
    kind: FactKind
    subject: str
    attribute: str
    claim: str
    confidence: float = Field(ge=0.0, le=1.0)
    tier: Tier = "standard"
    sensitivity: Sensitivity = "internal"
    status: FactStatus = "active"
    provenance: Provenance
    created_at: datetime
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    recheck_after: datetime | None = None
    expires_at: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    reason: str | None = None
    readers: list[str] | None = None
    last_confirmed_at: datetime | None = None
    reviewer: str | None = None
    flags: list[str] = Field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"fact:{self.id}"

    @property
    def actor(self) -> str:
        return self.provenance.actor

    @property
    def source(self) -> str:
        return self.provenance.source

    def is_stale(self, now: datetime) -> bool:
        """Past its recheck date (:func:`is_stale`): re-check before relying on it."""
        return is_stale(self.recheck_after, now)


class Episode(_Model):
    """An append-only, dated, sourced event."""

    id: str
    scope: Scope
    event: str
    text: str
    provenance: Provenance
    created_at: datetime
    observed_at: datetime
    outcome: str | None = None
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    expires_at: datetime | None = None
    supersedes: str | None = None
    readers: list[str] | None = None
    status: EpisodeStatus = "current"
    flags: list[str] = Field(default_factory=list)
    subject: str | None = None
    #: The conversation, run or ticket it belongs to (default: its run, else its source).
    thread: str | None = None

    @property
    def ref(self) -> str:
        return f"episode:{self.id}"


class Checkpoint(_Model):
    """The handoff state of one task: one current value per field, versioned."""

    scope: Scope
    task: str
    objective: str | None = None
    constraints: list[str] = Field(default_factory=list)
    plan: list[str] = Field(default_factory=list)
    completed: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    source_refs: list[str] = Field(default_factory=list)
    next_action: str | None = None
    pending_identity_changes: list[str] = Field(default_factory=list)
    notes: str | None = None
    version: int = 0
    updated_at: datetime | None = None
    updated_by: str | None = None
    #: ``open`` while the task is worked on; ``closed`` once it ended (the task leaves
    #: working context; its history stays).
    status: Literal["open", "closed"] = "open"
    closed_at: datetime | None = None
    outcome: str | None = None

    @property
    def ref(self) -> str:
        return f"checkpoint:{self.task}@{self.version}"


CHECKPOINT_FIELDS: tuple[str, ...] = (
    "objective", "constraints", "plan", "completed", "evidence", "source_refs",
    "next_action", "pending_identity_changes", "notes",
)


class Operation(_Model):
    """A side effect in the ledger, keyed for idempotency."""

    key: str
    scope: Scope
    intent: str
    status: OperationStatus = "pending"
    external_ref: str | None = None
    error: str | None = None
    attempts: int = 1
    run_id: str | None = None
    created_at: datetime
    updated_at: datetime
    resumed: bool = False
    #: What a begin of this existing key gave as its intent, when its words differ from the
    #: stored intent (which stays): a reworded restart, or another side effect that needs a
    #: key of its own.
    requested_intent: str | None = None


class Hit(_Model):
    """One search/recall result: a reference with an excerpt and metadata."""

    ref: str
    layer: str
    excerpt: str
    score: float
    date: datetime | None = None
    event: str | None = None
    kind: str | None = None
    source: str | None = None
    actor: str | None = None
    status: str | None = None
    scope: Scope | None = None
    needs_verification: bool = False
    verify_reason: str | None = None
    untrusted: bool = False
    #: An episode's thread (the conversation, run or ticket it belongs to).
    thread: str | None = None
    #: A handoff's task and checkpoint version.
    task: str | None = None
    version: int | None = None
    #: How an episode ended ("abandoned", "approved"...): judged before it is opened.
    outcome: str | None = None
    tokens: int = 0

    @property
    def what(self) -> str:
        """What the item is, for a person or a model: the episode's event or the fact's
        kind (else the layer), with a handoff's task and checkpoint version."""
        label = self.event or self.kind or self.layer
        if self.task is not None:
            label += f" {self.task}" + (f" v{self.version}" if self.version is not None else "")
        return label


class WriteResult(_Model):
    """The outcome of one proposed write; rejected writes are reported, not dropped."""

    status: WriteStatus
    record: Fact | None = None
    reason: str
    superseded: Fact | None = None
    detectors: list[str] = Field(default_factory=list)
    #: Facts of other slots whose claims are near this one by cosine: a suggestion to
    #: review, never a merge (refs, nearest first).
    similar: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Stored or confirmed (committed, superseding, duplicate)."""
        return self.status in ("committed", "superseding", "duplicate")

    def raise_for_status(self) -> WriteResult:
        """Raise :class:`~memstrata.errors.PolicyRejected` when the write was refused; else
        return self, so ``mem.facts.propose(...).raise_for_status().record`` reads well."""
        if self.status == "rejected":
            raise PolicyRejected(f"write refused: {self.reason}",
                                 hint="the reason says what to change; nothing was stored",
                                 reason=self.reason, detectors=list(self.detectors))
        return self


class ForgetReport(_Model):
    """What a forget removed, counted per layer."""

    scope: Scope
    counts: dict[str, int]
    ids: list[str] = Field(default_factory=list)
    dry_run: bool = False
    #: Whether the files were compacted afterwards (forgotten bytes rewritten away); False
    #: when compaction failed (the rows are gone, the engine retries on its next
    #: compaction) or the engine may not compact some tables (``notes`` names them).
    compacted: bool = True
    notes: list[str] = Field(default_factory=list)
    #: Refs of matching facts and episodes the scope reads but does not own (records of a
    #: broader scope, e.g. user-wide ones seen from a project): left, see ``notes``.
    kept: list[str] = Field(default_factory=list)

    @property
    def total(self) -> int:
        """The records removed. ``counts["vectors"]`` counts their vectors, index entries
        of records counted in their own layer, so not again here."""
        return sum(n for layer, n in self.counts.items() if layer != "vectors")


class ManifestEntry(_Model):
    """One item considered for a context: whether it entered and why."""

    ref: str
    layer: str
    included: bool
    reason: str
    tokens: int


class Context(_Model):
    """Assembled session context: the text and a manifest of what entered."""

    text: str
    tokens: int
    budget_tokens: int
    manifest: list[ManifestEntry]

    def included(self) -> list[ManifestEntry]:
        return [m for m in self.manifest if m.included]


M = TypeVar("M", bound=BaseModel)


def refused(model: type[BaseModel], exc: pydantic.ValidationError) -> ValidationError:
    """memstrata's ValidationError for pydantic's, naming the bad fields of ``model``."""
    problems, locs = [], []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or model.__name__
        inner = (err.get("ctx") or {}).get("error")
        nested = inner.details.get("problems") if isinstance(inner, ValidationError) else None
        if nested:  # a model inside this one refused: its fields, under this one's
            problems += [f"{loc}.{problem}" for problem in nested]
            locs += [f"{loc}.{problem.split(':', 1)[0]}" for problem in nested]
            continue
        msg = inner.message if isinstance(inner, ValidationError) else \
            str(err["msg"]).removeprefix("Value error, ")
        problems.append(f"{loc}: {msg}")
        locs.append(loc)
    return ValidationError(
        f"invalid {model.__name__}: " + "; ".join(problems), problems=problems,
        hint=f"correct {', '.join(dict.fromkeys(locs))} and try again; nothing was stored")


def build(model: type[M], **fields: Any) -> M:
    """Construct ``model`` or raise memstrata's ValidationError naming the bad fields."""
    try:
        return model(**fields)
    except pydantic.ValidationError as exc:
        raise refused(model, exc) from None


def make_scope(scope: Scope | dict[str, Any] | None = None, **fields: Any) -> Scope:
    """Accept a Scope, a dict, or keyword fields; always returns a validated Scope."""
    if isinstance(scope, Scope):
        return scope
    if scope is None:
        return build(Scope, **fields)
    if isinstance(scope, dict):
        return build(Scope, **scope)
    raise ValidationError(f"scope must be a Scope, got {type(scope).__name__}",
                          hint="pass Scope(user=..., project=...) or a dict of those fields")


__all__ = [
    "ACTORS",
    "CHECKPOINT_FIELDS",
    "DEFAULT_CONFIDENCE",
    "FACT_KINDS",
    "FACT_STATUSES",
    "Checkpoint",
    "Context",
    "Episode",
    "Fact",
    "ForgetReport",
    "Hit",
    "ManifestEntry",
    "Operation",
    "Provenance",
    "Scope",
    "WriteResult",
    "build",
    "is_stale",
    "make_scope",
]
