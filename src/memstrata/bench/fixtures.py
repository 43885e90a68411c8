"""The evaluation harness's fixtures (:mod:`memstrata.bench.evaluation` describes the YAML
format): the store a fixture writes, its request and what must come of it, as pydantic
models, and what a run reports (:class:`FixtureResult`, :class:`EvalReport`).

Contract: :func:`load_fixtures` reads one YAML file (one or more documents) or every
``*.yaml`` / ``*.yml`` file of a directory into :class:`Fixture` models; a file that does
not parse or fit is a ValidationError naming it, and names must not repeat. Dates read by
YAML itself are taken as UTC (a bare date is its midnight).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import BeforeValidator, Field, model_validator

from ..errors import ValidationError
from ..inputs import utc_or_none
from ..models import Scope, WriteStatus, _Model, build

RequestKind = Literal["recall", "context", "ledger_begin", "procedure_activate",
                      "procedure_rollback", "procedure_next"]
SECTIONS = ("facts", "episodes", "checkpoints", "operations", "procedures")


def _when(v: Any) -> datetime | None:
    # YAML reads unquoted dates and timestamps itself; a timestamp without an offset is UTC
    # by the YAML spec, and a bare date means its midnight UTC.
    if isinstance(v, datetime):
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
    if isinstance(v, date):
        return datetime.combine(v, time(), tzinfo=UTC)
    return utc_or_none(v, "date")


When = Annotated[datetime | None, BeforeValidator(_when)]


class _Item(_Model):
    id: str
    at: When = None
    scope: Scope | None = None


class FactItem(_Item):
    """A fact to propose (then approve, retire) while loading a fixture."""

    claim: str
    kind: str
    subject: str
    attribute: str
    actor: str | None = "user"
    source: str | None = "fixture"
    confidence: float = 0.9
    tier: str = "standard"
    sensitivity: str = "internal"
    evidence: str | None = None
    valid_from: When = None
    expires_at: When = None
    recheck_after: When = None
    readers: list[str] | None = None
    reason: str | None = None
    approve: str | None = None
    retire: str | None = None
    supersedes: str | None = None
    write: WriteStatus | None = None


class EpisodeItem(_Item):
    text: str
    event: str = "note"
    actor: str = "agent"
    source: str = "fixture"
    observed_at: When = None
    evidence: str | None = None
    outcome: str | None = None
    confidence: float = 1.0
    expires_at: When = None
    supersedes: str | None = None
    readers: list[str] | None = None


class CheckpointItem(_Item):
    task: str
    objective: str | None = None
    constraints: list[str] | None = None
    plan: list[str] | None = None
    completed: list[str] | None = None
    evidence: list[str] | None = None
    source_refs: list[str] | None = None
    next_action: str | None = None
    pending_identity_changes: list[str] | None = None
    notes: str | None = None


class OperationItem(_Item):
    key: str
    intent: str
    run_id: str | None = None
    status: Literal["pending", "succeeded", "failed"] = "pending"
    external_ref: str | None = None
    error: str | None = None


class ProcedureItem(_Item):
    procedure: dict[str, Any] | None = None
    file: str | None = None
    proposed_by: str | None = None
    activate_by: str | None = None

    @model_validator(mode="after")
    def _one(self) -> ProcedureItem:
        if (self.procedure is None) == (self.file is None):
            raise ValueError("give exactly one of procedure (inline) or file")
        return self


class StoreSpec(_Model):
    facts: list[FactItem] = Field(default_factory=list)
    episodes: list[EpisodeItem] = Field(default_factory=list)
    checkpoints: list[CheckpointItem] = Field(default_factory=list)
    operations: list[OperationItem] = Field(default_factory=list)
    procedures: list[ProcedureItem] = Field(default_factory=list)


class Request(_Model):
    """The one request a fixture makes at its moment."""

    kind: RequestKind
    scope: Scope | None = None
    principal: str | None = None
    restart: bool = False
    need: str | None = None
    decision: str = "lookup"
    k: int = 5
    budget_tokens: int | None = None
    layers: list[str] | None = None
    task: str | None = None
    query: str | None = None
    key: str | None = None
    intent: str | None = None
    run_id: str | None = None
    name: str | None = None
    version: int | None = None
    by: str | None = None
    state: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _needs(self) -> Request:
        need = {"recall": ["need"], "ledger_begin": ["key", "intent"],
                "procedure_activate": ["name", "version", "by"],
                "procedure_rollback": ["name", "by"], "procedure_next": ["name", "state"]}
        missing = [f for f in need.get(self.kind, []) if getattr(self, f) is None]
        if missing:
            raise ValueError(f"a {self.kind} request needs {', '.join(missing)}")
        return self


class Expect(_Model):
    """What must (and must not) come of the request."""

    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    verify: list[str] = Field(default_factory=list)
    before: list[tuple[str, str]] = Field(default_factory=list)
    empty: bool | None = None
    max_tokens: int | None = None
    refused: bool | None = None
    decision: dict[str, Any] | None = None
    operation: dict[str, Any] | None = None


class Fixture(_Model):
    """One evaluation case: a store, a moment, a request and expectations."""

    name: str
    description: str | None = None
    now: Annotated[datetime, BeforeValidator(_when)]
    scope: Scope = Field(default_factory=Scope)
    store: StoreSpec = Field(default_factory=StoreSpec)
    request: Request
    expect: Expect = Field(default_factory=Expect)
    path: str | None = None

    @model_validator(mode="after")
    def _names(self) -> Fixture:
        ids = [i.id for section in SECTIONS for i in getattr(self.store, section)]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"record ids must be unique in a fixture: {', '.join(dupes)}")
        late = [i.id for s in SECTIONS for i in getattr(self.store, s)
                if i.at is not None and i.at > self.now]
        if late:
            raise ValueError(f"records written after now: {', '.join(late)}")
        e = self.expect
        named = set(ids)
        for label, names in (("include", e.include), ("exclude", e.exclude),
                             ("verify", e.verify), ("before", [n for p in e.before for n in p])):
            unknown = [n for n in names if n not in named]
            if unknown:
                raise ValueError(f"expect.{label} names unknown records: {', '.join(unknown)}")
        both = set(e.include) & set(e.exclude)
        if both:
            raise ValueError(f"both included and excluded: {', '.join(sorted(both))}")
        return self


class FixtureResult(_Model):
    """The outcome of one fixture."""

    name: str
    kind: str
    passed: bool
    expected: int
    found: int
    recall: float | None
    leaks: list[str]
    tokens: int
    returned: list[str]
    failures: list[str]
    description: str | None = None


class EvalReport(_Model):
    """Every fixture's result and the totals."""

    results: list[FixtureResult]
    ranker: str = "default"
    embedder: str | None = None

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def total(self) -> dict[str, Any]:
        expected = sum(r.expected for r in self.results)
        found = sum(r.found for r in self.results)
        return {"fixtures": len(self.results),
                "passed": sum(r.passed for r in self.results),
                "failed": sum(not r.passed for r in self.results),
                "expected": expected, "found": found,
                "recall": round(found / expected, 4) if expected else None,
                "leaks": sum(len(r.leaks) for r in self.results),
                "tokens": sum(r.tokens for r in self.results)}

    def to_dict(self) -> dict[str, Any]:
        return {"ranker": self.ranker, "embedder": self.embedder, "total": self.total(),
                "fixtures": [r.model_dump(mode="json") for r in self.results]}

    def rows(self) -> list[list[Any]]:
        """Table rows: one per fixture, then the total."""
        out: list[list[Any]] = []
        for r in self.results:
            out.append([r.name, r.kind, "pass" if r.passed else "FAIL",
                        f"{r.found}/{r.expected}" if r.expected else "-", len(r.leaks),
                        r.tokens, "; ".join(r.failures)])
        t = self.total()
        out.append(["TOTAL", "", f"{t['passed']}/{t['fixtures']}",
                    f"{t['found']}/{t['expected']}", t["leaks"], t["tokens"], ""])
        return out

    COLUMNS: ClassVar[tuple[str, ...]] = ("fixture", "request", "result", "recall", "leaks",
                                          "tokens", "failures")


# -- loading --------------------------------------------------------------
def load_fixtures(path: str | Path) -> list[Fixture]:
    """Fixtures from one YAML file (one or more documents) or a directory of them."""
    root = Path(path)
    if root.is_dir():
        files = sorted([*root.glob("*.yaml"), *root.glob("*.yml")])
        if not files:
            raise ValidationError(f"no *.yaml fixtures in {root}")
    elif root.is_file():
        files = [root]
    else:
        raise ValidationError(f"no fixture file or directory at {root}")
    out: list[Fixture] = []
    for f in files:
        try:
            docs = [d for d in yaml.safe_load_all(f.read_text(encoding="utf-8")) if d is not None]
        except yaml.YAMLError as exc:
            raise ValidationError(f"{f}: YAML does not parse: {exc}") from exc
        for doc in docs:
            if not isinstance(doc, dict):
                raise ValidationError(f"{f}: a fixture must be a mapping")
            try:
                out.append(build(Fixture, **{**doc, "path": str(f)}))
            except ValidationError as exc:
                raise ValidationError(f"{f}: {exc.message}", problems=exc.details.get(
                    "problems")) from None
    names = [x.name for x in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"fixture names repeat: {', '.join(dupes)}")
    return out


__all__ = ["SECTIONS", "CheckpointItem", "EpisodeItem", "EvalReport", "Expect", "FactItem",
           "Fixture", "FixtureResult", "OperationItem", "ProcedureItem", "Request",
           "RequestKind", "StoreSpec", "load_fixtures"]
