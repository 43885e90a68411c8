"""The argument models of memstrata's tools: one definition per tool call.

Each model is the input of one tool (:mod:`memstrata.interfaces.tools`): the MCP server, the
OpenAI and Anthropic tool schemas and the dispatcher render and validate these, the
explicit proposer of extraction reads an agent's ``propose_memory`` calls with
:class:`ProposeMemoryArgs`, and the REST API's documents come from the same models. The
module depends on the records only, so every one of those can import it.

Rules: unknown arguments are refused (``extra="forbid"``), so a model cannot name
another user's records; a ``null`` for an optional argument means "use the default"; a
whole number is never given as ``true``/``false``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from .inputs import MAX_K
from .models import DEFAULT_CONFIDENCE, FactKind


class ToolArgs(BaseModel):
    """Base of every argument model: unknown arguments are refused; ``null`` for an
    argument with a default means the default (what a strict schema makes models send)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for k, v in data.items():
                # true/false is no number (JSON's lax reading would take true as 1), as in
                # the Python API
                if isinstance(v, bool) and k in cls.model_fields and \
                        cls.model_fields[k].annotation in (int, int | None):
                    raise ValueError(f"{k} must be a whole number, not {str(v).lower()}")
            return {k: v for k, v in data.items()
                    if not (v is None and k in cls.model_fields
                            and not cls.model_fields[k].is_required())}
        return data



class GetCurrentTaskArgs(ToolArgs):
    task: str | None = Field(
        None, description="Task name. Default: the task this server was started for. "
                          "With neither, the result lists the tasks that have a checkpoint.")


class SaveCheckpointArgs(ToolArgs):
    task: str | None = Field(None, description="Task name. Default: the server's task.")
    objective: str | None = Field(None, description="What the task must achieve.")
    constraints: list[str] | None = Field(None, description="Rules the work must respect.")
    plan: list[str] | None = Field(None, description="Remaining steps, in order.")
    completed: list[str] | None = Field(None, description="Steps already done.")
    evidence: list[str] | None = Field(None, description="Facts established, with sources.")
    source_refs: list[str] | None = Field(None, description="Documents or records relied on.")
    next_action: str | None = Field(None, description="The one thing to do next.")
    pending_identity_changes: list[str] | None = Field(
        None, description="Changes to identity facts the user asked for; a person confirms them.")
    notes: str | None = Field(None, description="Anything else the next worker needs.")


class GetDurableRecordsArgs(ToolArgs):
    limit: int = Field(40, ge=1, le=200, description="At most this many standard facts.")
    kind: FactKind | None = Field(None, description="Only facts of this kind.")


class SearchHistoryArgs(ToolArgs):
    query: str = Field(min_length=1, description="What to look for in past events.")
    k: int = Field(5, ge=1, le=MAX_K, description="At most this many results.")
    since: str | None = Field(None, description="Only events observed on/after this ISO date.")
    until: str | None = Field(None, description="Only events observed on/before this ISO date.")


class RecallArgs(ToolArgs):
    query: str = Field(min_length=1, validation_alias=AliasChoices("query", "need"),
                       description="What you need to know, in a sentence.")
    decision: Literal["planning", "lookup", "side_effect", "recovery"] = Field(
        "lookup", description="What the answer is for; side_effect flags every item for "
                              "verification before you act.")
    k: int = Field(5, ge=1, le=MAX_K, description="At most this many items.")
    budget_tokens: int = Field(800, ge=50, le=8000, description="Token budget for excerpts.")
    layers: list[Literal["facts", "episodes", "handoffs"]] | None = Field(
        None, description="Restrict to these layers. Default: the decision's layers (facts "
                          "and episodes); 'handoffs' searches earlier checkpoint versions and "
                          "closed tasks.")
    since: str | None = Field(None, description="Only items dated on/after this ISO date.")
    until: str | None = Field(None, description="Only items dated on/before this ISO date.")


#: Whose words a tool write carries (see :func:`memstrata.governance.safety.write_actor`).
Origin = Literal["user", "tool", "agent"]
ORIGIN_HELP = ("Whose words these are: 'user' (the person told you), 'tool' (a web page, "
               "file, e-mail, API or tool output you read), 'agent' (your own inference). "
               "Default: the server's actor. Tool and agent content waits for a person.")


class ProposeMemoryArgs(ToolArgs):
    claim: str = Field(min_length=1, description="The fact, in 1-3 sentences.")
    kind: FactKind = Field(description="What sort of fact it is.")
    subject: str = Field(min_length=1, description="Who or what it is about, e.g. 'alice'.")
    attribute: str = Field(min_length=1, description="The slot, e.g. 'standup_format'. A new "
                                                     "claim for the same slot supersedes the old.")
    source: str = Field(min_length=1, description="Where it came from: the message, file or "
                                                  "URL. If you cannot state a source, do not "
                                                  "propose it.")
    confidence: float = Field(DEFAULT_CONFIDENCE, ge=0.0, le=1.0,
                              description="How sure you are (0..1).")
    evidence: str | None = Field(None, description="A short quote supporting the claim.")
    origin: Origin | None = Field(None, description=ORIGIN_HELP)


class LogEpisodeArgs(ToolArgs):
    text: str = Field(min_length=1, description="What happened, in a sentence or two.")
    source: str = Field(min_length=1, description="Where it was observed (run, URL, tool).")
    event: str = Field("note", min_length=1, description="Short event type, e.g. "
                                                          "deploy_failed.")
    outcome: str | None = Field(None, description="How it ended, if known.")
    observed_at: str | None = Field(None, description="When it was true (ISO); default now.")
    evidence: str | None = Field(None, description="Pointer to the evidence.")
    supersedes: str | None = Field(None, description="episode:ID this entry corrects.")
    thread: str | None = Field(None, description="The conversation or ticket it belongs to "
                                                 "(default: this session).")
    origin: Origin | None = Field(None, description=ORIGIN_HELP)


class ScratchWriteArgs(ToolArgs):
    key: str = Field(min_length=1, description="Key within this session's scratchpad.")
    value: str = Field(description="Text to hold for this session only.")


class ScratchReadArgs(ToolArgs):
    key: str = Field(min_length=1, description="Key to read.")


class ScratchListArgs(ToolArgs):
    prefix: str = Field("", description="Only keys starting with this.")


class BeginOperationArgs(ToolArgs):
    key: str = Field(min_length=1, description="Idempotency key naming the side effect, "
                                               "e.g. publish:release-notes:v17.")
    intent: str = Field(min_length=1, description="What the side effect will do.")


class CompleteOperationArgs(ToolArgs):
    key: str = Field(min_length=1, description="The key given to begin_operation.")
    external_ref: str | None = Field(None, description="ID/URL the external system returned.")
    error: str | None = Field(None, description="Set instead when the side effect failed; a "
                                                "later begin_operation may retry it.")

    @model_validator(mode="after")
    def _one_outcome(self) -> CompleteOperationArgs:
        if self.external_ref is not None and self.error is not None:
            raise ValueError("give external_ref (it happened) or error (it failed), not both")
        return self


class ForgetArgs(ToolArgs):
    match: str | None = Field(None, description="Forget records containing this text.")
    subject: str | None = Field(None, description="Forget facts about this subject.")
    record_ids: list[str] | None = Field(None, description="Forget these refs (fact:ID, ...).")
    dry_run: bool = Field(False, description="Only count what would be forgotten.")

    @model_validator(mode="after")
    def _selector(self) -> ForgetArgs:
        if self.match is None and self.subject is None and not self.record_ids:
            raise ValueError("name what to forget: match, subject or record_ids")
        return self



class GetArgs(ToolArgs):
    ref: str = Field(min_length=1, description="A reference recall or search returned, e.g. "
                                               "fact:01J... or episode:01J...")


class FeedbackArgs(ToolArgs):
    ref: str = Field(min_length=1, description="The fact:ID or episode:ID the signal is about.")
    signal: Literal["useful", "contradicted", "superseded", "ignored"] = Field(
        description="How the item served: repeated contradiction retires a fact.")
    note: str | None = Field(None, description="Why, in a sentence (optional).")


class ListFactsArgs(ToolArgs):
    status: Literal["active", "pending_review", "superseded", "retired", "expired",
                    "rejected"] | None = Field(
        None, description="Only facts of this status. Default: every status.")
    limit: int = Field(50, ge=1, le=200, description="At most this many facts.")


class RetireFactArgs(ToolArgs):
    ref: str = Field(min_length=1, description="The fact:ID to take out of the current set.")
    reason: str = Field(min_length=1, description="Why it no longer holds.")



class CloseTaskArgs(ToolArgs):
    task: str | None = Field(None, description="The task to close. Default: the server's task.")
    outcome: str | None = Field(None, description="How it ended, in a sentence (logged as an "
                                                  "episode).")


__all__ = [
    "BeginOperationArgs",
    "CloseTaskArgs",
    "CompleteOperationArgs",
    "FeedbackArgs",
    "ForgetArgs",
    "GetArgs",
    "GetCurrentTaskArgs",
    "GetDurableRecordsArgs",
    "ListFactsArgs",
    "LogEpisodeArgs",
    "ProposeMemoryArgs",
    "RecallArgs",
    "RetireFactArgs",
    "SaveCheckpointArgs",
    "ScratchListArgs",
    "ScratchReadArgs",
    "ScratchWriteArgs",
    "SearchHistoryArgs",
    "ToolArgs",
]
