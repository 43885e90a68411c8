"""The argument models and result schemas of the service's own operations.

Contract: the REST API (:mod:`memstrata.interfaces.service.operations`) validates every request body
with a model: a tool's own model (:mod:`memstrata.arguments`) for the operations that are
tools, one of these for the rest (review, history, context, browse, keys...). They follow
the same rules (:class:`~memstrata.arguments.ToolArgs`): unknown fields, including any
scope field, are refused; ``null`` means the default. The OpenAPI document is generated
from these models and the ``*_RESULT`` schemas, so the document and the validation never
differ.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ...arguments import ToolArgs
from ...inputs import MAX_K
from ..tool_results import BOOL, FACT, INT, NSTR, STR, STRS, obj

_FACT_ID = Field(min_length=1, max_length=64, description="The fact's id (or fact:ID).")
_REASON = Field(min_length=1, max_length=2000, description="Why, in a sentence (recorded).")


class WhoamiArgs(ToolArgs):
    pass


class ReviewListArgs(ToolArgs):
    limit: int = Field(50, ge=1, le=500, description="At most this many pending items.")


class ReviewApproveArgs(ToolArgs):
    fact_id: str = _FACT_ID
    claim: str | None = Field(None, min_length=1, max_length=1000,
                              description="The edited claim to approve instead (edit and "
                                          "approve).")


class ReviewRejectArgs(ToolArgs):
    fact_id: str = _FACT_ID
    reason: str = _REASON


class FactHistoryArgs(ToolArgs):
    fact_id: str = _FACT_ID


class UndoSupersedeArgs(ToolArgs):
    fact_id: str = Field(min_length=1, max_length=64,
                         description="The current fact whose supersession to undo.")
    reason: str = _REASON


class FactsBySubjectArgs(ToolArgs):
    subject: str = Field(min_length=1, max_length=128, description="Who or what the facts "
                                                                   "are about.")
    status: Literal["active", "pending_review", "superseded", "retired", "expired",
                    "rejected"] | None = Field(None, description="Only facts of this status.")
    limit: int = Field(100, ge=1, le=1000, description="At most this many facts.")


class ContextArgs(ToolArgs):
    task: str | None = Field(None, min_length=1, max_length=128,
                             description="The task whose checkpoint comes first.")
    query: str | None = Field(None, min_length=1, max_length=4000,
                              description="What the session is about (recalls more).")
    budget_tokens: int = Field(2000, ge=50, le=32000, description="The token budget.")


class BrowseEpisodesArgs(ToolArgs):
    thread: str | None = Field(None, min_length=1, max_length=500,
                               description="Only this thread (a session, a run, a ticket).")
    since: str | None = Field(None, description="Observed on/after this ISO date.")
    until: str | None = Field(None, description="Observed on/before this ISO date.")
    limit: int = Field(100, ge=1, le=1000, description="At most this many episodes.")


class TaskArgs(ToolArgs):
    task: str = Field(min_length=1, max_length=128, description="The task name.")


class ListTasksArgs(ToolArgs):
    include_closed: bool = Field(False, description="Also tasks that were closed.")


class ListOperationsArgs(ToolArgs):
    status: Literal["pending", "succeeded", "failed", "unknown"] | None = Field(
        None, description="Only operations of this status.")
    limit: int = Field(100, ge=1, le=1000, description="At most this many.")


class ForgetPreviewArgs(ToolArgs):
    match: str | None = Field(None, min_length=1, max_length=500,
                              description="Records whose text contains this.")
    subject: str | None = Field(None, min_length=1, max_length=128,
                                description="Facts about this subject.")
    record_ids: list[str] | None = Field(None, max_length=MAX_K * 10,
                                         description="These records (fact/episode ids).")


class ProcedureArgs(ToolArgs):
    name: str = Field(min_length=1, max_length=128, description="The procedure's name.")
    version: int = Field(ge=1, le=1_000_000, description="The version to activate.")


class ListProceduresArgs(ToolArgs):
    pass


class ExportArgs(ToolArgs):
    pass


class CreateKeyArgs(ToolArgs):
    role: Literal["agent", "reviewer", "admin"] = Field("agent", description="What it may do.")
    users: list[str] | None = Field(None, min_length=1, max_length=100,
                                    description="Only these users (default any).")
    projects: list[str] | None = Field(None, min_length=1, max_length=100,
                                       description="Only these projects (default any).")
    agents: list[str] | None = Field(None, min_length=1, max_length=100,
                                     description="Only these agents (default any).")
    principal: str | None = Field(None, min_length=1, max_length=128,
                                  description="The reader name restricted records are "
                                              "checked against.")
    actor: Literal["agent", "user", "tool", "system", "import"] | None = Field(
        None, description="Who its writes are attributed to (default: agent for agent "
                          "keys, user otherwise).")
    label: str | None = Field(None, min_length=1, max_length=200, description="A note.")
    rate_per_minute: int | None = Field(None, ge=1, le=1_000_000,
                                        description="Requests per minute (default: the "
                                                    "server's).")


class RevokeKeyArgs(ToolArgs):
    key_id: str = Field(min_length=1, max_length=64, description="The key's id.")


class ListKeysArgs(ToolArgs):
    pass


OBJ: dict[str, Any] = {"type": "object"}
OBJS: dict[str, Any] = {"type": "array", "items": OBJ}
#: A fact as people review it: the tool's shape plus its status, dates and why it is where
#: it is.
FACT_DETAIL = obj({**{k: FACT["properties"][k] for k in FACT["required"]}, "status": STR,
                   "created_at": STR},
                  {**FACT["properties"], "id": STR, "confidence": {"type": "number"},
                   "sensitivity": STR, "evidence": NSTR, "reason": NSTR, "reviewer": NSTR,
                   "supersedes": NSTR,
                   "superseded_by": NSTR, "valid_to": NSTR, "expires_at": NSTR,
                   "readers": {"type": ["array", "null"], "items": STR}, "why": STR})
KEY = obj({"id": STR, "tenant": STR, "role": STR, "actor": STR, "created_at": STR},
          {"users": {"type": ["array", "null"], "items": STR},
           "projects": {"type": ["array", "null"], "items": STR},
           "agents": {"type": ["array", "null"], "items": STR}, "principal": NSTR,
           "label": NSTR, "rate_per_minute": {"type": ["integer", "null"]},
           "revoked_at": NSTR})
ERROR = obj({"error": STR, "type": STR}, {"hint": NSTR, "request_id": STR})

WHOAMI_RESULT = obj({"key": STR, "tenant": STR, "role": STR, "scope": OBJ,
                     "operations": STRS}, {"principal": NSTR, "actor": STR})
REVIEW_LIST_RESULT = obj({"items": {"type": "array", "items": FACT_DETAIL}, "count": INT})
REVIEW_RESULT = obj({"status": STR, "reason": STR}, {"ref": STR, "superseded": STR,
                                                     "detectors": STRS})
REJECT_RESULT = obj({"rejected": STR, "status": STR})
HISTORY_RESULT = obj({"ref": STR, "versions": {"type": "array", "items": FACT_DETAIL}})
UNDO_RESULT = obj({"restored": STR, "status": STR, "undone": STR})
FACTS_RESULT = obj({"facts": {"type": "array", "items": FACT_DETAIL}})
CONTEXT_RESULT = obj({"text": STR, "tokens": INT, "budget_tokens": INT,
                      "manifest": {"type": "array", "items": obj(
                          {"ref": STR, "layer": STR, "included": BOOL, "reason": STR,
                           "tokens": INT})}})
EPISODES_RESULT = obj({"episodes": OBJS})
VERSIONS_RESULT = obj({"task": STR, "versions": OBJS})
TASKS_RESULT = obj({"tasks": STRS})
OPERATIONS_RESULT = obj({"operations": OBJS})
FORGET_PREVIEW_RESULT = obj({"dry_run": BOOL, "total": INT,
                             "counts": {"type": "object", "additionalProperties": INT}},
                            {"kept": STRS, "notes": STRS})
PROCEDURES_RESULT = obj({"procedures": OBJS})
ACTIVATED_RESULT = obj({"name": STR, "version": INT, "status": STR})
EXPORT_RESULT = obj({"files": {"type": "object", "additionalProperties": STR}})
KEYS_RESULT = obj({"keys": {"type": "array", "items": KEY}})
CREATED_KEY_RESULT = obj({"key": KEY, "token": STR, "note": STR})
REVOKED_KEY_RESULT = obj({"key": KEY})
