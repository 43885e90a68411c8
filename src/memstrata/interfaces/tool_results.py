"""What each tool returns: the JSON schemas of its results (MCP ``outputSchema``), the
shapes the handlers build them with (a fact, a hit, a checkpoint, a write's receipt, a
forget's counts, a library error), and the tidying of the argument schemas pydantic
generates (:func:`tidy_schema`).

Contract: :data:`RESULT_SCHEMAS` has one schema per tool of
:data:`memstrata.interfaces.tools.TOOLS`, describing the dict its handler returns on success
(an error is ``{"error", "hint", "type"}`` and is sent as a tool error, which clients do not
validate). Fields a result may carry are listed; the required ones are always present.
Scores are on the documented 0..1 scale. The MCP tests call every tool through the SDK's
client, which validates each result against these schemas.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..errors import MemstrataError
from ..models import Checkpoint, Fact, ForgetReport, Hit, WriteResult

STR: dict[str, Any] = {"type": "string"}
NSTR: dict[str, Any] = {"type": ["string", "null"]}
INT: dict[str, Any] = {"type": "integer"}
BOOL: dict[str, Any] = {"type": "boolean"}
STRS: dict[str, Any] = {"type": "array", "items": STR}


def tidy_schema(schema: Any) -> Any:
    """Drop pydantic's titles and collapse ``X | None`` to ``X`` (None is the default)."""
    if isinstance(schema, list):
        return [tidy_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: tidy_schema(prop) for name, prop in value.items()}
        else:
            out[key] = tidy_schema(value)
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        other = next(o for o in options if o != {"type": "null"})
        del out["anyOf"]
        if "default" in out and out["default"] is None:
            del out["default"]
        out = {**other, **out}
    if out.get("type") == "object":
        out.setdefault("properties", {})
        out["additionalProperties"] = False
    return out


def obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """An object schema: ``required`` fields always present, ``optional`` ones may be."""
    return {"type": "object", "properties": {**required, **(optional or {})},
            "required": sorted(required)}


FACT = obj({"ref": STR, "kind": STR, "subject": STR, "attribute": STR, "claim": STR,
            "tier": STR, "actor": STR, "source": STR, "since": NSTR},
           {"stale": BOOL, "flags": STRS, "status": STR})

HIT = obj({"ref": STR, "layer": STR, "excerpt": STR,
           "score": {"type": "number", "minimum": 0, "maximum": 1}},
          {"date": STR, "event": STR, "kind": STR, "source": STR, "actor": STR, "status": STR,
           "project": STR, "outcome": STR, "needs_verification": BOOL, "verify_reason": STR,
           "untrusted": BOOL, "thread": STR})

RESULT_SCHEMAS: dict[str, dict[str, Any]] = {
    "get_current_task": obj({"task": NSTR}, {"tasks": STRS, "note": STR,
                                              "checkpoint": {"type": ["object", "null"]},
                                              "quarantined": STRS}),
    "save_checkpoint": obj({"saved": STR, "task": STR, "version": INT, "fields": STRS}),
    "close_task": obj({"closed": STR, "task": STR, "outcome": NSTR}),
    "get_durable_records": obj({"identity": {"type": "array", "items": FACT},
                                "facts": {"type": "array", "items": FACT}}, {"note": STR}),
    "search_history": obj({"query": STR, "hits": {"type": "array", "items": HIT}},
                          {"note": STR}),
    "recall": obj({"query": STR, "decision": STR, "items": {"type": "array", "items": HIT},
                   "tokens": INT, "considered": INT, "empty_reason": NSTR}),
    "propose_memory": obj(
        {"status": {"enum": ["committed", "superseding", "duplicate", "pending", "rejected"]},
         "reason": STR},
        {"ref": STR, "superseded": STR, "detectors": STRS, "next": STR}),
    "log_episode": obj({"logged": STR, "event": STR, "observed_at": STR}, {"flags": STRS}),
    "scratch_write": obj({"receipt": STR}),
    "scratch_read": obj({"key": STR, "found": BOOL, "value": NSTR}),
    "scratch_list": obj({"prefix": STR, "keys": STRS}),
    "begin_operation": obj({"key": STR, "status": STR, "resumed": BOOL, "attempts": INT,
                            "external_ref": NSTR, "intent": STR, "advice": STR},
                           {"requested_intent": STR}),
    "complete_operation": obj({"key": STR, "status": STR, "external_ref": NSTR}),
    "forget": obj({"dry_run": BOOL, "total": INT,
                   "counts": {"type": "object", "additionalProperties": INT}},
                  {"kept": STRS, "notes": STRS}),
    "get": obj({"ref": STR, "record": {"type": "object"}}),
    "feedback": obj({"ref": STR, "signal": STR, "action": NSTR}),
    "list_facts": obj({"facts": {"type": "array", "items": FACT}}),
    "retire_fact": obj({"retired": STR, "status": STR}),
}

# -- what the handlers return -----------------------------------------------

def date_text(value: datetime | None) -> str | None:
    return value.date().isoformat() if value is not None else None


def fact_result(f: Fact, now: datetime) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ref": f.ref, "kind": f.kind, "subject": f.subject, "attribute": f.attribute,
        "claim": f.claim, "tier": f.tier, "actor": f.provenance.actor,
        "source": f.provenance.source, "since": date_text(f.valid_from or f.created_at),
    }
    if f.is_stale(now):
        out["stale"] = True
    if f.flags:
        out["flags"] = list(f.flags)
    return out


def hit_result(h: Hit) -> dict[str, Any]:
    out: dict[str, Any] = h.model_dump(mode="json", exclude_none=True,
                                       exclude={"scope", "tokens"})
    if h.scope is not None and h.scope.project is not None:
        out["project"] = h.scope.project  # a project's own record, or one that follows a user
    return out


def checkpoint_result(cp: Checkpoint) -> dict[str, Any]:
    return cp.model_dump(mode="json", exclude={"scope"})


def write_receipt(res: WriteResult) -> dict[str, Any]:
    """What a write through the policy returns to its caller: status, reason, the record's
    reference, what it superseded and the detectors that fired (never the content)."""
    out: dict[str, Any] = {"status": res.status, "reason": res.reason}
    if res.record is not None:
        out["ref"] = res.record.ref
    if res.superseded is not None:
        out["superseded"] = res.superseded.ref
    if res.detectors:
        out["detectors"] = list(res.detectors)
    return out


def forget_result(report: ForgetReport) -> dict[str, Any]:
    """What a forget returns to a model or a service client: the counts, and what it left
    (``kept``) and why (``notes``) when it left anything."""
    out: dict[str, Any] = {"dry_run": report.dry_run, "total": report.total,
                           "counts": report.counts}
    if report.kept:
        out["kept"] = report.kept
    if report.notes:
        out["notes"] = report.notes
    return out


def error_result(exc: MemstrataError) -> dict[str, Any]:
    """The structured form of a library error."""
    return {"error": exc.message, "hint": exc.hint, "type": type(exc).__name__}


__all__ = ["FACT", "HIT", "RESULT_SCHEMAS", "checkpoint_result", "date_text", "error_result",
           "fact_result", "forget_result", "hit_result", "tidy_schema", "write_receipt"]
