"""The REST operations of ``memstrata serve``: one table, each entry one library call.

Contract:
- :data:`OPERATIONS` lists every operation: its path (``POST /v1/<group>/<verb>``), the
  argument model its JSON body is validated with, the least role that may call it
  (:data:`memstrata.interfaces.service.keys.ROLES`) and the JSON schema of its result. The OpenAPI
  document (:func:`memstrata.interfaces.service.openapi.document`) and the inspector's pages are
  built from this table, so what is documented is what runs.
- Every tool of :data:`memstrata.interfaces.tools.TOOLS` is an operation, with the tool's
  own argument model and result schema, run by a
  :class:`~memstrata.interfaces.tools.ToolDispatcher` bound to the request's scope, key
  principal and actor; :data:`TOOL_ROLES` says which tools need more than ``agent`` (the
  same rule for the MCP endpoint).
- A handler receives a :class:`Call` (the request's scope, key and run), never a scope
  from the body: every record it reads or changes is reached through the call's scope and
  principal. A library error propagates as itself; the app maps it to a status code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ...arguments import ToolArgs
from ...errors import AccessDenied, NotFound, ValidationError
from ...models import Fact, Scope
from ...scoping import shared_beyond
from ..tools import TOOLS, TOOLS_BY_NAME, ToolDispatcher, forget_result, write_receipt
from . import requests as rq
from .keys import ApiKey, KeyStore, Role, role_at_least

if TYPE_CHECKING:
    from ...memory import Memory

#: Tools that need more than the ``agent`` role (the REST API and the MCP endpoint).
TOOL_ROLES: dict[str, Role] = {"retire_fact": "reviewer", "forget": "admin"}

#: Where each tool lives in the REST API.
TOOL_PATHS = {
    "get_current_task": "checkpoints/current", "save_checkpoint": "checkpoints/save",
    "close_task": "checkpoints/close", "get_durable_records": "facts/durable",
    "search_history": "episodes/search", "recall": "recall",
    "propose_memory": "facts/propose", "log_episode": "episodes/log",
    "scratch_write": "scratch/write", "scratch_read": "scratch/read",
    "scratch_list": "scratch/list", "begin_operation": "ledger/begin",
    "complete_operation": "ledger/complete", "get": "get", "feedback": "feedback",
    "list_facts": "facts/list", "retire_fact": "facts/retire", "forget": "forget",
}


def tools_for(role: str) -> frozenset[str]:
    """The tools a key of ``role`` may call."""
    return frozenset(t.name for t in TOOLS if role_at_least(role, TOOL_ROLES.get(t.name,
                                                                                 "agent")))


@dataclass
class Call:
    """One authenticated request: the library, the key and the scope it acts in."""

    mem: Memory
    keys: KeyStore
    key: ApiKey
    scope: Scope
    run_id: str
    task: str | None = None

    @property
    def principal(self) -> str | None:
        return self.key.principal

    @property
    def person(self) -> str:
        """Who a review or activation is recorded as."""
        return self.key.principal or self.key.label or f"key:{self.key.id}"

    @cached_property
    def dispatcher(self) -> ToolDispatcher:
        return ToolDispatcher(self.mem, self.scope, task=self.task, actor=self.key.actor,
                              principal=self.principal, run_id=self.run_id,
                              allowed=tools_for(self.key.role),
                              person=role_at_least(self.key.role, "reviewer"))


Handler = Callable[[Call, Any], dict[str, Any]]


@dataclass(frozen=True)
class Endpoint:
    """One REST operation."""

    name: str
    path: str
    summary: str
    args: type[ToolArgs]
    handler: Handler
    result: dict[str, Any]
    role: Role = "agent"
    read_only: bool = False
    tool: str | None = None

    @property
    def group(self) -> str:
        return self.path.removeprefix("/v1/").split("/")[0]


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def fact_detail(f: Fact) -> dict[str, Any]:
    """A fact as a reviewer sees it: claim, provenance, status, dates and why."""
    out: dict[str, Any] = {
        "ref": f.ref, "id": f.id, "kind": f.kind, "subject": f.subject,
        "attribute": f.attribute, "claim": f.claim, "tier": f.tier, "actor": f.actor,
        "source": f.source, "since": _iso(f.valid_from or f.created_at), "status": f.status,
        "created_at": f.created_at.isoformat(), "confidence": f.confidence,
        "sensitivity": f.sensitivity, "evidence": f.provenance.evidence, "reason": f.reason,
        "reviewer": f.reviewer, "supersedes": f.supersedes, "superseded_by": f.superseded_by,
        "valid_to": _iso(f.valid_to), "expires_at": _iso(f.expires_at), "readers": f.readers,
        "flags": list(f.flags)}
    if f.status == "pending_review":
        out["why"] = _why_pending(f)
    return out


def _why_pending(f: Fact) -> str:
    if f.tier == "identity":
        return "an identity change: only a person confirms who someone is"
    reasons = [f.reason] if f.reason else []
    if any(flag.startswith(("injection", "untrusted")) for flag in f.flags):
        reasons.append("the text looks like an instruction injected into content")
    if f.sensitivity in ("pii", "restricted", "confidential"):
        reasons.append(f"it is {f.sensitivity}")
    if not reasons:
        reasons.append(f"a claim from a{'n' if f.actor[0] in 'aeiou' else ''} {f.actor} "
                       "waits for a person")
    return "; ".join(reasons)


def _fact_id(raw: str) -> str:
    return raw.removeprefix("fact:")


# -- handlers -----------------------------------------------------------------

def _whoami(c: Call, a: rq.WhoamiArgs) -> dict[str, Any]:
    return {"key": c.key.id, "tenant": c.key.tenant, "role": c.key.role,
            "scope": c.scope.model_dump(), "principal": c.principal, "actor": c.key.actor,
            "operations": [op.name for op in OPERATIONS if c.key.may(op.role)]}


def _review_list(c: Call, a: rq.ReviewListArgs) -> dict[str, Any]:
    items = [fact_detail(f) for f in c.mem.review.pending(c.scope, principal=c.principal,
                                                          limit=a.limit)]
    return {"items": items, "count": len(items)}


def _own(c: Call, fact_id: str) -> str:
    """The fact's id, once a key bound to users, projects or agents is known to change only
    what its scope holds: a fact that applies beyond it (a tenant-wide one, seen by a
    reviewer bound to alice) is everyone's, and its review is an unbound key's."""
    fid = _fact_id(fact_id)
    if c.key.bound:
        fact = c.mem.facts.get(fid, c.scope, principal=c.principal)
        if shared_beyond(fact.scope, c.scope):
            raise AccessDenied(f"fact {fid} applies beyond {c.scope} (to {fact.scope}), and "
                               "this key is bound to users, projects or agents; nothing "
                               "changed", hint="a key not bound to users or projects (or the "
                                               "operator's CLI) decides on shared facts")
    return fid


def _review_approve(c: Call, a: rq.ReviewApproveArgs) -> dict[str, Any]:
    return write_receipt(c.mem.review.approve(_own(c, a.fact_id), by=c.person, claim=a.claim,
                                              scope=c.scope, principal=c.principal))


def _review_reject(c: Call, a: rq.ReviewRejectArgs) -> dict[str, Any]:
    fact = c.mem.review.reject(_own(c, a.fact_id), reason=a.reason, by=c.person,
                               scope=c.scope, principal=c.principal)
    return {"rejected": fact.ref, "status": fact.status}


def _history(c: Call, a: rq.FactHistoryArgs) -> dict[str, Any]:
    versions = c.mem.facts.history(_fact_id(a.fact_id), c.scope, principal=c.principal)
    return {"ref": f"fact:{_fact_id(a.fact_id)}", "versions": [fact_detail(f) for f in versions]}


def _undo(c: Call, a: rq.UndoSupersedeArgs) -> dict[str, Any]:
    fid = _own(c, a.fact_id)
    restored = c.mem.facts.undo_supersede(fid, reason=f"{a.reason} (by {c.person})",
                                          scope=c.scope, principal=c.principal)
    return {"restored": restored.ref, "status": restored.status, "undone": f"fact:{fid}"}


def _by_subject(c: Call, a: rq.FactsBySubjectArgs) -> dict[str, Any]:
    facts = c.mem.facts.list(c.scope, status=a.status, principal=c.principal, limit=a.limit,
                             subject=a.subject)
    return {"facts": [fact_detail(f) for f in facts]}


def _context(c: Call, a: rq.ContextArgs) -> dict[str, Any]:
    ctx = c.mem.context(c.scope, task=a.task, query=a.query, budget_tokens=a.budget_tokens,
                        principal=c.principal)
    return {"text": ctx.text, "tokens": ctx.tokens, "budget_tokens": ctx.budget_tokens,
            "manifest": [m.model_dump(mode="json") for m in ctx.manifest]}


def _browse(c: Call, a: rq.BrowseEpisodesArgs) -> dict[str, Any]:
    eps = c.mem.episodes.log(c.scope, principal=c.principal, limit=a.limit, thread=a.thread,
                             since=a.since, until=a.until)
    return {"episodes": [{**e.model_dump(mode="json", exclude={"scope"}), "ref": e.ref}
                         for e in eps]}


def _versions(c: Call, a: rq.TaskArgs) -> dict[str, Any]:
    return {"task": a.task, "versions": [cp.model_dump(mode="json", exclude={"scope"})
                                         for cp in c.mem.checkpoints.versions(c.scope, a.task)]}


def _tasks(c: Call, a: rq.ListTasksArgs) -> dict[str, Any]:
    return {"tasks": c.mem.checkpoints.tasks(c.scope, include_closed=a.include_closed)}


def _operations(c: Call, a: rq.ListOperationsArgs) -> dict[str, Any]:
    ops = c.mem.ledger.list(c.scope, status=a.status, limit=a.limit)
    return {"operations": [o.model_dump(mode="json", exclude={"scope"}) for o in ops]}


def _forget_preview(c: Call, a: rq.ForgetPreviewArgs) -> dict[str, Any]:
    if a.match is None and a.subject is None and not a.record_ids:
        raise ValidationError("a forget preview needs match, subject or record_ids",
                              hint="say what to forget; a scope is never wiped whole here")
    # what the forget itself would reach (the tool's rule: the key's principal, else the
    # scope's user)
    report = c.mem.forget(c.scope, match=a.match, subject=a.subject, record_ids=a.record_ids,
                          dry_run=True, principal=c.principal or c.scope.user, as_reader=True,
                          actor=c.dispatcher.changer)
    return forget_result(report)


def _procedures(c: Call, a: rq.ListProceduresArgs) -> dict[str, Any]:
    return {"procedures": [p.model_dump(mode="json", exclude={"scope"})
                           for p in c.mem.procedures.list(scope=c.scope)]}


def _activate(c: Call, a: rq.ProcedureArgs) -> dict[str, Any]:
    proc = c.mem.procedures.activate(a.name, a.version, by=c.person, scope=c.scope)
    return {"name": proc.name, "version": int(proc.version or a.version), "status": proc.status}


def _export(c: Call, a: rq.ExportArgs) -> dict[str, Any]:
    from ..memory_files import collect

    return {"files": collect(c.mem, c.scope, principal=c.principal).render()}


def _keys_list(c: Call, a: rq.ListKeysArgs) -> dict[str, Any]:
    return {"keys": [k.summary() for k in c.keys.list(c.key.tenant) if c.key.reaches(k)]}


def _keys_create(c: Call, a: rq.CreateKeyArgs) -> dict[str, Any]:
    c.key.check_mint(a.users, a.projects, a.agents, a.principal)
    key, token = c.keys.create(c.key.tenant, role=a.role, users=a.users, projects=a.projects,
                               agents=a.agents, principal=a.principal, actor=a.actor,
                               label=a.label, rate_per_minute=a.rate_per_minute)
    return {"key": key.summary(), "token": token,
            "note": "the token is shown once; it is stored only as a hash"}


def _keys_revoke(c: Call, a: rq.RevokeKeyArgs) -> dict[str, Any]:
    if c.key.bound:  # a key it may not see is not found (as one that does not exist)
        found = c.keys.get(c.key.tenant, a.key_id.lower()) if a.key_id.isalnum() else None
        if found is not None and not c.key.reaches(found):
            raise NotFound(f"no key {a.key_id.lower()!r} in tenant {c.key.tenant!r}",
                           hint="`memstrata keys list` shows the keys")
    return {"key": c.keys.revoke(c.key.tenant, a.key_id).summary()}


def _tool_operation(name: str) -> Endpoint:
    tool = TOOLS_BY_NAME[name]

    def run(c: Call, a: Any) -> dict[str, Any]:
        if name == "retire_fact":  # a change of one fact: within the key's bounds
            _own(c, a.ref)
        return tool.handler(c.dispatcher, a)

    return Endpoint(name=name, path=f"/v1/{TOOL_PATHS[name]}", summary=tool.description,
                     args=tool.args, handler=run, result=tool.output_schema(),
                     role=TOOL_ROLES.get(name, "agent"), read_only=tool.read_only, tool=name)


def _op(name: str, path: str, summary: str, args: type[ToolArgs], handler: Handler,
        result: dict[str, Any], role: Role = "agent", *, read_only: bool = False) -> Endpoint:
    return Endpoint(name=name, path=f"/v1/{path}", summary=summary, args=args,
                     handler=handler, result=result, role=role, read_only=read_only)


OPERATIONS: tuple[Endpoint, ...] = (
    *(_tool_operation(t.name) for t in TOOLS),
    _op("whoami", "whoami", "The key's tenant, role, scope and the operations it may call.",
        rq.WhoamiArgs, _whoami, rq.WHOAMI_RESULT, read_only=True),
    _op("facts_by_subject", "facts/by-subject", "The facts about one subject, any status.",
        rq.FactsBySubjectArgs, _by_subject, rq.FACTS_RESULT, read_only=True),
    _op("fact_history", "facts/history", "Every version of a fact's slot, oldest first: who "
        "said what, when, replaced by what and why.",
        rq.FactHistoryArgs, _history, rq.HISTORY_RESULT, read_only=True),
    _op("undo_supersede", "facts/undo-supersede", "Undo a supersession: the fact it replaced "
        "is current again; the undone one is retired with the reason.",
        rq.UndoSupersedeArgs, _undo, rq.UNDO_RESULT, "reviewer"),
    _op("review_list", "review/list", "The review queue: facts waiting for a person, with "
        "their provenance and why each waits.",
        rq.ReviewListArgs, _review_list, rq.REVIEW_LIST_RESULT, "reviewer", read_only=True),
    _op("review_approve", "review/approve", "Approve a pending fact (with claim=: edit it "
        "first). A secret in the edit is refused.",
        rq.ReviewApproveArgs, _review_approve, rq.REVIEW_RESULT, "reviewer"),
    _op("review_reject", "review/reject", "Reject a pending fact; the reason is recorded.",
        rq.ReviewRejectArgs, _review_reject, rq.REJECT_RESULT, "reviewer"),
    _op("context", "context", "What the agent sees first at session start for this scope "
        "and task, with the manifest of why each item entered (or did not).",
        rq.ContextArgs, _context, rq.CONTEXT_RESULT, read_only=True),
    _op("browse_episodes", "episodes/browse", "Episodes of this scope in time order, by "
        "thread and dates.",
        rq.BrowseEpisodesArgs, _browse, rq.EPISODES_RESULT, read_only=True),
    _op("checkpoint_versions", "checkpoints/versions", "Every saved version of a task's "
        "checkpoint, oldest first.",
        rq.TaskArgs, _versions, rq.VERSIONS_RESULT, read_only=True),
    _op("list_tasks", "checkpoints/tasks", "The tasks of this scope that have a checkpoint.",
        rq.ListTasksArgs, _tasks, rq.TASKS_RESULT, read_only=True),
    _op("list_operations", "ledger/list", "The operations of the ledger, oldest first.",
        rq.ListOperationsArgs, _operations, rq.OPERATIONS_RESULT, read_only=True),
    _op("forget_preview", "forget/preview", "What a forget would delete, counted per layer; "
        "nothing is deleted.",
        rq.ForgetPreviewArgs, _forget_preview, rq.FORGET_PREVIEW_RESULT, "reviewer",
        read_only=True),
    _op("list_procedures", "procedures/list", "The procedures of this scope (the active "
        "version of each, else the latest).",
        rq.ListProceduresArgs, _procedures, rq.PROCEDURES_RESULT, read_only=True),
    _op("activate_procedure", "procedures/activate", "Activate a procedure version if its "
        "eval cases pass.",
        rq.ProcedureArgs, _activate, rq.ACTIVATED_RESULT, "admin"),
    _op("export", "export", "The scope's three memory files (identity, working context, "
        "episodic), rendered from the store.",
        rq.ExportArgs, _export, rq.EXPORT_RESULT, "admin", read_only=True),
    _op("list_keys", "keys/list", "The API keys of this tenant (never their secrets).",
        rq.ListKeysArgs, _keys_list, rq.KEYS_RESULT, "admin", read_only=True),
    _op("create_key", "keys/create", "Create an API key of this tenant; the token is shown "
        "once.", rq.CreateKeyArgs, _keys_create, rq.CREATED_KEY_RESULT, "admin"),
    _op("revoke_key", "keys/revoke", "Revoke an API key of this tenant, now.",
        rq.RevokeKeyArgs, _keys_revoke, rq.REVOKED_KEY_RESULT, "admin"),
)

OPERATIONS_BY_PATH: dict[str, Endpoint] = {op.path: op for op in OPERATIONS}

__all__ = ["OPERATIONS", "OPERATIONS_BY_PATH", "TOOL_PATHS", "TOOL_ROLES", "Call",
           "Endpoint", "fact_detail", "tools_for"]
