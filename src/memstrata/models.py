"""Typed records and scopes (DESIGN §3, §4), validated on the way in.

Every record carries ``id`` (ULID), ``scope``, ``created_at`` (aware UTC),
``provenance = {actor, source, evidence?}`` and a ``status``. Models are
pydantic v2 classes; :func:`build` turns pydantic's error into memstrata's
:class:`~memstrata.errors.ValidationError`, so callers see one exception type.

Text rules shared by every model: valid UTF-8 (no lone surrogates), no NUL
bytes, stripped, within the field's size limit.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal, TypeVar

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator

from .clock import ensure_utc
from .errors import ValidationError

Actor = Literal["user", "tool", "agent", "reviewer", "system", "import"]
FactKind = Literal[
    "preference", "profile", "constraint", "relationship", "system_fact", "decision", "lesson"
]
Tier = Literal["identity", "standard"]
Sensitivity = Literal["public", "internal", "restricted"]
FactStatus = Literal["active", "pending_review", "superseded", "retired", "expired", "rejected"]
EpisodeStatus = Literal["current", "superseded", "expired"]
OperationStatus = Literal["pending", "succeeded", "failed", "unknown"]
WriteStatus = Literal["committed", "superseding", "duplicate", "pending", "rejected"]
Decision = Literal["planning", "lookup", "side_effect", "recovery"]
Layer = Literal["identity", "facts", "episodes", "checkpoint", "procedures", "scratch", "ledger"]

ACTORS: tuple[str, ...] = ("user", "tool", "agent", "reviewer", "system", "import")
FACT_KINDS: tuple[str, ...] = (
    "preference", "profile", "constraint", "relationship", "system_fact", "decision", "lesson",
)

MAX_NAME = 128
MAX_CLAIM = 1000
MAX_TEXT = 8000
MAX_SOURCE = 500
_NAME_RE = re.compile(r"^[\w.@:+\-/]+$")


def clean_text(value: Any, *, field: str, max_len: int, allow_empty: bool = False) -> str:
    """Check one text value against the shared text rules; returns it stripped."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise ValueError(f"{field} contains a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{field} is not valid UTF-8 (lone surrogate)") from exc
    value = value.strip()
    if not value and not allow_empty:
        raise ValueError(f"{field} must not be empty")
    if len(value) > max_len:
        raise ValueError(f"{field} is {len(value)} characters; the limit is {max_len}")
    return str(value)


def _check_name(value: Any, field: str) -> str | None:
    if value is None:
        return None
    text = clean_text(value, field=field, max_len=MAX_NAME)
    if not _NAME_RE.match(text):
        raise ValueError(
            f"{field} {text!r} may only contain letters, digits and . @ : + - / _"
        )
    return text


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


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

    @field_validator("tenant", mode="before")
    @classmethod
    def _tenant(cls, v: Any) -> str:
        out = _check_name(v, "tenant")
        if out is None:
            raise ValueError("tenant must be set")
        return out

    @field_validator("user", "project", "agent", mode="before")
    @classmethod
    def _names(cls, v: Any, info: pydantic.ValidationInfo) -> str | None:
        return _check_name(v, str(info.field_name))

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
    source: str
    evidence: str | None = None

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, v: Any) -> str:
        return clean_text(v, field="source", max_len=MAX_SOURCE)

    @field_validator("evidence", mode="before")
    @classmethod
    def _evidence(cls, v: Any) -> str | None:
        return None if v is None else clean_text(v, field="evidence", max_len=MAX_TEXT)


def _utc(v: Any, name: str) -> datetime | None:
    if v is None:
        return None
    try:
        return ensure_utc(v, field=name)
    except ValidationError as exc:
        raise ValueError(exc.message) from exc


def _readers(v: Any) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str) or not isinstance(v, list | tuple | set | frozenset):
        raise ValueError("readers must be a list of principal names or None")
    out: list[str] = sorted({str(_check_name(x, "reader")) for x in v})
    if not out:
        raise ValueError("readers must name at least one principal (None means the whole scope)")
    return out


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
    tokens: int = 0


class WriteResult(_Model):
    """The outcome of one proposed write; rejected writes are reported, not dropped."""

    status: WriteStatus
    record: Fact | None = None
    reason: str
    superseded: Fact | None = None
    detectors: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in ("committed", "superseding", "duplicate")


class ForgetReport(_Model):
    """What a forget removed, counted per layer."""

    scope: Scope
    counts: dict[str, int]
    ids: list[str] = Field(default_factory=list)
    dry_run: bool = False

    @property
    def total(self) -> int:
        return sum(self.counts.values())


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


def build(model: type[M], **fields: Any) -> M:
    """Construct ``model`` or raise memstrata's ValidationError naming the bad fields."""
    try:
        return model(**fields)
    except pydantic.ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or model.__name__
            msg = str(err["msg"]).removeprefix("Value error, ")
            problems.append(f"{loc}: {msg}")
        raise ValidationError(
            f"invalid {model.__name__}: " + "; ".join(problems), problems=problems
        ) from None


def make_scope(scope: Scope | dict[str, Any] | None = None, **fields: Any) -> Scope:
    """Accept a Scope, a dict, or keyword fields; always returns a validated Scope."""
    if isinstance(scope, Scope):
        return scope
    if scope is None:
        return build(Scope, **fields)
    if isinstance(scope, dict):
        return build(Scope, **scope)
    raise ValidationError(f"scope must be a Scope, got {type(scope).__name__}")


__all__ = [
    "ACTORS",
    "CHECKPOINT_FIELDS",
    "FACT_KINDS",
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
    "clean_text",
    "make_scope",
]
