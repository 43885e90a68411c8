"""Procedural memory: versioned workflows with eval-gated activation (DESIGN §2, §3).

A :class:`Procedure` is a named, versioned workflow: ``preconditions`` that
must hold, ordered ``steps``, ``escalate_if`` conditions that hand the work to
a person, and ``cases`` that pin down how it must behave. It is evaluated
against a :class:`ProcedureState` — the set of conditions that hold and the
steps already done.

Evaluation semantics (:func:`evaluate`, pure, no store), first rule that
fires wins:

1. **escalate** — the first condition of ``escalate_if`` (declared order)
   that holds. Escalation beats everything: a person must look even when the
   procedure could otherwise proceed or is complete.
2. **blocked** on a precondition — the first precondition (declared order)
   that does not hold.
3. **complete** — every step is done or does not apply (see ``when``).
4. Otherwise the *first* step, in declared order, that is not done and
   applies. Steps are strictly ordered: a later step is never offered while
   an earlier one is pending. If that step's own ``requires`` conditions all
   hold it is the **next_step**; else the result is **blocked** on its first
   missing requirement.

A step's ``when`` conditions say whether it applies at all (e.g. "migrate"
only ``when: [schema_changed]``); a step that does not apply is skipped, not
waited for. Conditions and step names are plain names (no negation); a
``done`` entry naming an unknown step is a ValidationError, because a typo
there would silently re-run a finished step.

A case is ``{"state": {"conditions": [...], "done": [...]}, "expect": E}``
with ``E`` exactly one of ``{"next_step": STEP}``, ``{"escalate": COND}``,
``{"blocked": COND}``, ``{"complete": true}``. Building a procedure checks a
case's *shape*; a case that names a step or condition this version does not
declare is not an input error but a failing case (reported, with a note, by
:func:`run_cases`): that is exactly what happens when a change drops a step or
requirement that a person's case still relies on.

The store of versions, with eval-gated activation, is
:mod:`memstrata.layers.procedures`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, field_validator, model_validator

from ..errors import NotFound, ValidationError
from ..inputs import MAX_NAME, MAX_TEXT, check_name, clean_text
from ..models import Scope, _Model, build

ProcedureStatus = Literal["proposed", "active", "inactive", "rolled_back"]
DecisionKind = Literal["next_step", "escalate", "blocked", "complete"]
EventAction = Literal["proposed", "activated", "deactivated", "refused", "rolled_back"]
EXPECT_KEYS: tuple[str, ...] = ("next_step", "escalate", "blocked", "complete")
#: Fields that make up a version's content (what propose stores and diff compares).
CONTENT_FIELDS: tuple[str, ...] = ("name", "version", "description", "owner", "preconditions",
                                   "steps", "escalate_if", "cases")
MAX_ITEMS = 200


def _name(v: Any, field: str) -> str:
    out = check_name(v, field)
    if out is None:
        raise ValueError(f"{field} must be set")
    return out


def _names(v: Any, field: str) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str) or not isinstance(v, list | tuple | set | frozenset):
        raise ValueError(f"{field} must be a list of names")
    if len(v) > MAX_ITEMS:
        raise ValueError(f"{field} has {len(v)} items; the limit is {MAX_ITEMS}")
    out = [_name(x, field) for x in v]
    dupes = sorted({x for x in out if out.count(x) > 1})
    if dupes:
        raise ValueError(f"{field} repeats {', '.join(dupes)}")
    return out


class Step(_Model):
    """One step: a name, what to do, and the conditions it requires / applies under."""

    name: str
    text: str | None = None
    requires: list[str] = Field(default_factory=list)
    when: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, v: Any) -> Any:
        # YAML lets a plain string stand for a step with only a name.
        return {"name": v} if isinstance(v, str) else v

    @field_validator("name", mode="before")
    @classmethod
    def _n(cls, v: Any) -> str:
        return _name(v, "step name")

    @field_validator("text", mode="before")
    @classmethod
    def _t(cls, v: Any) -> str | None:
        return None if v is None else clean_text(v, field="step text", max_len=MAX_TEXT)

    @field_validator("requires", "when", mode="before")
    @classmethod
    def _c(cls, v: Any, info: Any) -> list[str]:
        return _names(v, str(info.field_name))


class ProcedureState(_Model):
    """What holds now: the conditions that are true and the steps already done."""

    conditions: list[str] = Field(default_factory=list)
    done: list[str] = Field(default_factory=list)

    @field_validator("conditions", "done", mode="before")
    @classmethod
    def _c(cls, v: Any, info: Any) -> list[str]:
        # A state is a set: repeating a condition is harmless, so dedupe instead of refusing.
        if isinstance(v, list | tuple | set | frozenset):
            v = list(dict.fromkeys(v))
        return _names(v, str(info.field_name))


class CaseExpect(_Model):
    """Exactly one expected decision."""

    next_step: str | None = None
    escalate: str | None = None
    blocked: str | None = None
    complete: bool | None = None

    @model_validator(mode="after")
    def _one(self) -> CaseExpect:
        given = [k for k in EXPECT_KEYS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("expect must be exactly one of next_step, escalate, blocked, "
                             f"complete (got {', '.join(given) or 'none'})")
        if self.complete is False:
            raise ValueError("expect.complete can only be true")
        return self

    @property
    def kind(self) -> DecisionKind:
        for k in EXPECT_KEYS:
            if getattr(self, k) is not None:
                return k  # type: ignore[return-value]
        raise AssertionError("validated to have one key")

    def as_dict(self) -> dict[str, Any]:
        return {self.kind: getattr(self, self.kind)}


class Case(_Model):
    """One eval case: a state and the decision the procedure must make in it."""

    name: str | None = None
    state: ProcedureState = Field(default_factory=ProcedureState)
    expect: CaseExpect


class StepDecision(_Model):
    """What to do now: the next step, escalate, blocked (on what), or complete."""

    kind: DecisionKind
    step: str | None = None
    condition: str | None = None
    text: str | None = None
    reason: str

    def as_expect(self) -> dict[str, Any]:
        """The decision in case-``expect`` form, e.g. ``{"blocked": "approved"}``."""
        if self.kind == "complete":
            return {"complete": True}
        return {self.kind: self.step if self.kind == "next_step" else self.condition}

    def matches(self, expect: CaseExpect) -> bool:
        return self.as_expect() == expect.as_dict()


class Procedure(_Model):
    """A versioned workflow (DESIGN §3); status and activation fields are set by the store."""

    name: str
    version: int | None = Field(default=None, ge=1)
    description: str | None = None
    owner: str | None = None
    preconditions: list[str] = Field(default_factory=list)
    steps: list[Step] = Field(min_length=1, max_length=MAX_ITEMS)
    escalate_if: list[str] = Field(default_factory=list)
    cases: list[Case] = Field(default_factory=list, max_length=MAX_ITEMS)
    status: ProcedureStatus = "proposed"
    scope: Scope | None = None
    proposed_by: str | None = None
    created_at: datetime | None = None
    activated_at: datetime | None = None
    activated_by: str | None = None

    @field_validator("name", mode="before")
    @classmethod
    def _n(cls, v: Any) -> str:
        return _name(v, "name")

    @field_validator("description", mode="before")
    @classmethod
    def _d(cls, v: Any) -> str | None:
        return None if v is None else clean_text(v, field="description", max_len=MAX_TEXT)

    @field_validator("owner", "proposed_by", "activated_by", mode="before")
    @classmethod
    def _o(cls, v: Any, info: Any) -> str | None:
        return None if v is None else clean_text(v, field=str(info.field_name), max_len=MAX_NAME)

    @field_validator("preconditions", "escalate_if", mode="before")
    @classmethod
    def _c(cls, v: Any, info: Any) -> list[str]:
        return _names(v, str(info.field_name))

    @model_validator(mode="after")
    def _consistent(self) -> Procedure:
        names = [s.name for s in self.steps]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"step names must be unique; repeated: {', '.join(dupes)}")
        both = sorted(set(self.preconditions) & set(self.escalate_if))
        if both:
            raise ValueError(f"{', '.join(both)} is both a precondition and an escalation "
                             "condition: the procedure could never proceed")
        case_names = [c.name for c in self.cases if c.name]
        if len(case_names) != len(set(case_names)):
            raise ValueError("case names must be unique")
        return self

    @property
    def ref(self) -> str:
        return f"procedure:{self.name}@{self.version}"

    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        raise NotFound(f"procedure {self.name} has no step {name!r}")

    def content(self) -> dict[str, Any]:
        """The version's content as plain data (what is stored, dumped and compared)."""
        return self.model_dump(mode="json", include=set(CONTENT_FIELDS))


# -- pure evaluation ------------------------------------------------------
def state_arg(state: Any) -> ProcedureState:
    """A :class:`ProcedureState`, or a mapping of its fields."""
    if isinstance(state, ProcedureState):
        return state
    if not isinstance(state, Mapping):
        raise ValidationError(f"state must be a ProcedureState or a mapping, got "
                              f"{type(state).__name__}",
                              hint="e.g. {'conditions': ['tests_green'], 'done': ['build']}")
    return build(ProcedureState, **{str(k): v for k, v in state.items()})


def evaluate(proc: Procedure, state: ProcedureState | Mapping[str, Any]) -> StepDecision:
    """The decision for ``state``; see the module docstring for the rules and their order."""
    state = state_arg(state)
    names = {s.name for s in proc.steps}
    unknown = [d for d in state.done if d not in names]
    if unknown:
        raise ValidationError(f"done names unknown step(s) of {proc.name}: {', '.join(unknown)}",
                              hint="steps: " + ", ".join(s.name for s in proc.steps))
    holds = set(state.conditions)
    done = set(state.done)
    for cond in proc.escalate_if:
        if cond in holds:
            return StepDecision(kind="escalate", condition=cond,
                                reason=f"{cond} holds: hand this to a person")
    for cond in proc.preconditions:
        if cond not in holds:
            return StepDecision(kind="blocked", condition=cond,
                                reason=f"precondition {cond} does not hold")
    for step in proc.steps:
        if step.name in done or not all(c in holds for c in step.when):
            continue
        missing = [c for c in step.requires if c not in holds]
        if missing:
            return StepDecision(kind="blocked", step=step.name, condition=missing[0],
                                text=step.text,
                                reason=f"step {step.name} requires {missing[0]}")
        return StepDecision(kind="next_step", step=step.name, text=step.text,
                            reason=f"first pending step of {proc.name}")
    return StepDecision(kind="complete", reason="every applicable step is done")


class CaseResult(_Model):
    """One case run: what was expected and what the procedure decided."""

    index: int
    name: str | None = None
    state: ProcedureState
    expected: dict[str, Any]
    actual: dict[str, Any]
    passed: bool
    note: str | None = None

    @property
    def label(self) -> str:
        return self.name or f"#{self.index}"


class CaseReport(_Model):
    """Every case of one procedure version, run against :func:`evaluate`."""

    name: str
    version: int | None
    results: list[CaseResult]

    @property
    def failures(self) -> list[CaseResult]:
        return [r for r in self.results if not r.passed]

    @property
    def ok(self) -> bool:
        """True when there is at least one case and every case passed."""
        return bool(self.results) and not self.failures

    def summary(self, source: str | None = None) -> str:
        """One line of counts, then each failing case; ``source`` names where an unstored
        procedure came from (a file), shown instead of a version it does not have."""
        label = self.name + (f" v{self.version}" if self.version is not None else "") + (
            f" ({source}, not stored)" if source else "")
        if not self.results:
            return f"{label}: no eval cases (at least one is required)"
        head = (f"{label}: {len(self.results) - len(self.failures)}/"
                f"{len(self.results)} cases pass")
        lines = [head] + [
            f"  case {r.label}: expected {r.expected}, got {r.actual} "
            f"(conditions={r.state.conditions}, done={r.state.done})"
            + (f"; {r.note}" if r.note else "") for r in self.failures]
        return "\n".join(lines)


def run_cases(proc: Procedure) -> CaseReport:
    """Run every case of ``proc``; a failing case is reported, never raised."""
    results = []
    for i, case in enumerate(proc.cases, 1):
        expected = case.expect.as_dict()
        try:
            actual = evaluate(proc, case.state).as_expect()
        except ValidationError as exc:
            results.append(CaseResult(index=i, name=case.name, state=case.state,
                                      expected=expected, actual={"error": exc.message},
                                      passed=False))
            continue
        passed = actual == expected
        results.append(CaseResult(index=i, name=case.name, state=case.state, expected=expected,
                                  actual=actual, passed=passed,
                                  note=None if passed else _stale_reference(proc, case.expect)))
    return CaseReport(name=proc.name, version=proc.version, results=results)


def _stale_reference(proc: Procedure, e: CaseExpect) -> str | None:
    """Why a case cannot pass when it names something this version no longer declares."""
    if e.next_step is not None and e.next_step not in {s.name for s in proc.steps}:
        return f"{e.next_step} is not a step of this version"
    if e.escalate is not None and e.escalate not in proc.escalate_if:
        return f"{e.escalate} is not an escalate_if condition of this version"
    required = set(proc.preconditions) | {c for s in proc.steps for c in s.requires}
    if e.blocked is not None and e.blocked not in required:
        return f"{e.blocked} is no longer a precondition or step requirement"
    return None


# -- YAML and diff --------------------------------------------------------
#: The longest procedure YAML read (a procedure is a page, not a data set).
MAX_PROCEDURE_TEXT = 200_000


def load_procedure(source: str | Path | Mapping[str, Any]) -> Procedure:
    """A Procedure from a mapping, a YAML file path or YAML text."""
    if isinstance(source, Mapping):
        data: Any = dict(source)
    elif not isinstance(source, str | Path):
        raise ValidationError(f"a procedure is a mapping, a YAML file path or YAML text, not "
                              f"{type(source).__name__}")
    else:
        try:
            text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
        except (OSError, UnicodeDecodeError) as exc:
            raise ValidationError(f"cannot read the procedure file {source}: {exc}",
                                  hint="pass the path of a UTF-8 YAML file") from None
        if len(text) > MAX_PROCEDURE_TEXT:
            raise ValidationError(f"procedure YAML is {len(text):,} characters, over "
                                  f"{MAX_PROCEDURE_TEXT:,}", hint="split it into procedures")
        try:
            data = yaml.load(text, Loader=_UniqueKeys)  # a SafeLoader: no arbitrary objects
        # ValueError: a bad date, e.g. 2026-13-45; RecursionError: absurd nesting
        except (yaml.YAMLError, ValueError, RecursionError) as exc:
            raise ValidationError(f"procedure YAML does not parse: {exc}",
                                  hint="fix the line the message names; nothing was "
                                       "stored") from None
    if not isinstance(data, dict):
        raise ValidationError("a procedure must be a YAML mapping with name, steps, cases...")
    return build(Procedure, **data)


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (plain YAML keeps the
    last: a second ``cases:`` silently dropped the first one's failing case)."""


def _unique_mapping(loader: _UniqueKeys, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "in a mapping", node.start_mark, f"the key {key!r} is given twice",
                key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def dump_procedure(proc: Procedure) -> str:
    """The version's content as YAML (round-trips through :func:`load_procedure`)."""
    data = {k: v for k, v in proc.content().items() if v not in (None, [])}
    data["steps"] = [_compact_step(s) for s in data["steps"]]
    cases = []
    for c in data.get("cases", []):
        out: dict[str, Any] = {"name": c["name"]} if c.get("name") else {}
        state = {k: v for k, v in c["state"].items() if v}
        if state:
            out["state"] = state
        out["expect"] = {k: v for k, v in c["expect"].items() if v is not None}
        cases.append(out)
    if cases:
        data["cases"] = cases
    # flow style for leaf lists keeps a case on two or three readable lines
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100,
                          default_flow_style=None)


def _compact_step(step: dict[str, Any]) -> Any:
    kept = {k: v for k, v in step.items() if v not in (None, [])}
    return kept["name"] if list(kept) == ["name"] else kept


class ProcedureDiff(_Model):
    """What changed between two versions: a summary per element and a unified YAML diff."""

    name: str
    from_version: int | None
    to_version: int | None
    changes: list[str]
    unified: str

    @property
    def same(self) -> bool:
        return not self.changes


def diff(a: Procedure, b: Procedure) -> ProcedureDiff:
    """Changes from ``a`` to ``b`` (steps, conditions, cases, owner, description)."""
    changes: list[str] = []
    for field in ("description", "owner"):
        if getattr(a, field) != getattr(b, field):
            changes.append(f"~ {field}: {getattr(a, field)!r} -> {getattr(b, field)!r}")
    for field, label in (("preconditions", "precondition"), ("escalate_if", "escalate_if")):
        old, new = getattr(a, field), getattr(b, field)
        changes += [f"- {label} {c}" for c in old if c not in new]
        changes += [f"+ {label} {c}" for c in new if c not in old]
    old_steps = {s.name: s for s in a.steps}
    new_steps = {s.name: s for s in b.steps}
    changes += [f"- step {n}" for n in old_steps if n not in new_steps]
    changes += [f"+ step {n}" for n in new_steps if n not in old_steps]
    for n, s in new_steps.items():
        if n in old_steps and old_steps[n] != s:
            what = [f for f in ("text", "requires", "when") if getattr(old_steps[n], f)
                    != getattr(s, f)]
            changes.append(f"~ step {n}: {', '.join(what)} changed")
    common = [n for n in old_steps if n in new_steps]
    if common != [n for n in new_steps if n in old_steps]:
        changes.append("~ step order changed")
    old_cases = [c.model_dump(mode="json") for c in a.cases]
    new_cases = [c.model_dump(mode="json") for c in b.cases]
    changes += [f"- case {c.get('name') or c['expect']}" for c in old_cases if c not in new_cases]
    changes += [f"+ case {c.get('name') or c['expect']}" for c in new_cases if c not in old_cases]
    unified = "".join(difflib.unified_diff(
        dump_procedure(a).splitlines(keepends=True), dump_procedure(b).splitlines(keepends=True),
        fromfile=f"{a.name}@{a.version}", tofile=f"{b.name}@{b.version}"))
    return ProcedureDiff(name=b.name, from_version=a.version, to_version=b.version,
                         changes=changes, unified=unified)


__all__ = [
    "CONTENT_FIELDS",
    "Case",
    "CaseExpect",
    "CaseReport",
    "CaseResult",
    "DecisionKind",
    "EventAction",
    "Procedure",
    "ProcedureDiff",
    "ProcedureState",
    "ProcedureStatus",
    "Step",
    "StepDecision",
    "diff",
    "dump_procedure",
    "evaluate",
    "load_procedure",
    "run_cases",
    "state_arg",
]
