"""The MCP server: memstrata's tools (:mod:`memstrata.interfaces.tools`) over the ``mcp`` SDK.

Contract:
- Tools are rendered from :data:`memstrata.interfaces.tools.TOOLS` one to one: same
  names, same JSON schemas, same handlers. A call returns the handler's dict
  as ``structured_content`` (and as JSON text), described by the tool's ``outputSchema``
  (:mod:`memstrata.interfaces.tool_results`); a library error or invalid
  arguments come back as a tool error (``is_error``) carrying
  ``{"error", "hint", "type"}``, so the model can read and correct it.
- The scope is fixed when the server is built (from ``memstrata mcp``'s
  flags or the configuration), or, with ``bind`` (``memstrata serve``), by each request's
  own binding; no tool argument can change it.
- Each client session gets its own :class:`~memstrata.interfaces.tools.ToolDispatcher`
  for each binding its requests carry, hence its own run: scratch keys are private to
  the session (and to the scope it acts in) and discarded when the server shuts down,
  or earlier when its transport reports the session's end (:meth:`MemoryTools.end_session`;
  ``memstrata serve`` does); ledger operations carry the run id, so a key begun by a
  session that died reads ``unknown`` to the next one. Nothing of one request's binding
  is reused for a request with another binding.
- Transports: stdio (:func:`serve_stdio`) and streamable HTTP bound to
  127.0.0.1 only (:func:`serve_http`): there is no authentication, so the
  server never listens on another interface. On stdio, end of input is not a
  cancel: every request read before it is answered before the server exits
  (``printf ... | memstrata mcp`` gets all its replies), within
  :data:`memstrata.interfaces.mcp_stdio.STDIN_EOF_GRACE_S`.
- Resources: ``memstrata://identity``, ``memstrata://working-context``,
  ``memstrata://episodic`` (the three memory files of the scope, rendered from the store)
  and ``memstrata://task/TASK`` (the checkpoint of TASK; the request's default task is
  listed). The prompt ``session_start`` loads the read protocol and what the session
  starts with. Any other resource is the protocol's "resource not found" error
  (:data:`RESOURCE_NOT_FOUND`), any other prompt "invalid params" (``-32602``); a library
  error reading one is a JSON-RPC error with its message and ``{"hint", "type"}`` as data,
  never a traceback.
- The default task (``get_current_task``, ``save_checkpoint``, the task resource, the
  prompt) is the binding's (``memstrata serve``: the request's ``X-Memstrata-Task``), else
  the server's (``memstrata mcp --task``).
- Library calls run in a worker thread so a slow embedder never stalls the
  event loop.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..models import Scope, make_scope
from .tools import TOOLS, TOOLS_BY_NAME, ToolDispatcher

if TYPE_CHECKING:
    from mcp.server import Server

    from ..memory import Memory

HOST = "127.0.0.1"
DEFAULT_PORT = 8765
#: MCP's "resource not found" error code (the handshake-era protocol revisions).
RESOURCE_NOT_FOUND = -32002

INSTRUCTIONS = """\
memstrata is your memory, split into layers with different rules. It is a prior, not
permission: verify anything consequential against its source or the user.

At the start of a session:
1. get_durable_records: identity facts (who you work for, what always applies) and the
   current durable facts of this scope. Identity comes first and always applies.
2. get_current_task: the current checkpoint of your task, in full. Resume from its
   next_action instead of starting over.

While working:
- search_history or recall only when the task needs past events or facts you do not
  have; an empty result is a valid answer, not a reason to guess.
- recall with decision="side_effect" before a consequential action: every item comes back
  flagged for verification, naming the source to check.
- get opens a reference that recall or search_history returned; feedback says how it
  served (contradicted, by a more authoritative source, demotes and eventually retires it).
- scratch_write / scratch_read / scratch_list hold values for this session only; they are
  discarded when the session ends and never become durable memory.
- Before any side effect (publish, send, pay, deploy): begin_operation with a stable key.
  If it reports "succeeded", do not repeat it; "in_progress" means another live run is
  doing it: do not repeat it, begin again later; "unknown" means an earlier run began it and
  never finished, so check the external system first: complete_operation with its reference
  if it happened, else complete_operation with error=..., then begin_operation to retry.
  Afterwards, complete_operation with the external reference (or the error).
- save_checkpoint after each meaningful step, so a fresh worker can resume.
- log_episode for events worth finding later (what happened, when, where observed).

Writing durable memory:
- propose_memory for a stable fact worth keeping (a preference, decision, lesson), with
  its source. The write policy decides; most proposals wait for a person's review. If you
  cannot state a source, do not propose it. Never store secrets. A pending proposal's reply
  says how your user approves it; list_facts with status pending_review shows the queue.
- retire_fact only when the user says a fact no longer holds.
- Never write identity. If the user asks to change something about who they are or what
  always applies, record it in save_checkpoint's pending_identity_changes; a person
  confirms it.
- forget when the user asks you to forget something; it deletes for real within this
  scope only.

Writes return receipts (what was stored and its reference), not echoes of the content:
do not read back what you just wrote. The scope (tenant, user, project) is fixed by this
server; tools take no arguments naming a user or tenant.
"""


@dataclass(frozen=True)
class Binding:
    """Who a request acts as: its scope, actor, reader name, the tools it may call and its
    default task (None: the server's). A run is cached by (session, binding), and ``owner``
    (an API key id, say) is part of the binding, so two callers never share a session's run
    even if one learns the other's session id."""

    scope: Scope
    actor: str = "agent"
    principal: str | None = None
    allowed: frozenset[str] | None = None
    owner: str = ""
    task: str | None = None


class MemoryTools:
    """The dispatchers of one server: one run per client session and binding.

    Over stdio a process serves exactly one client, so the process owns one
    run. Over streamable HTTP each ``mcp-session-id`` gets its own runs;
    requests without a session id (stateless mode) share the process's runs.
    ``bind``: the binding of each request (``memstrata serve`` derives it from the
    request's API key and scope headers, request by request); by default every request
    has the server's fixed scope and actor. A dispatcher is cached by (session, binding):
    a request whose binding differs from an earlier one of its session (another user of a
    multi-user key, say) gets a run of its own, never the earlier request's.
    """

    PROCESS = "process"

    def __init__(self, mem: Memory, scope: Scope, *, task: str | None = None,
                 actor: str = "agent", bind: Callable[[Any], Binding] | None = None) -> None:
        self.mem = mem
        self.scope = scope
        self.task = task
        self.actor = actor
        self._bind = bind
        self._sessions: dict[str, dict[Binding, ToolDispatcher]] = {}
        self._lock = threading.Lock()

    def binding(self, ctx: Any) -> Binding:
        """The binding of the request ``ctx`` belongs to."""
        if self._bind is not None:
            return self._bind(ctx)
        return Binding(self.scope, self.actor)

    def task_of(self, b: Binding) -> str | None:
        """The default task of a request with binding ``b``: its own, else the server's."""
        return b.task if b.task is not None else self.task

    @staticmethod
    def http_session(session_id: str) -> str:
        """The session key of the streamable-HTTP session ``session_id``."""
        return f"http:{session_id}"

    @staticmethod
    def session_key(ctx: Any) -> str:
        """The client session a request belongs to (see the class docstring)."""
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        if headers is not None:
            sid = headers.get("mcp-session-id")
            if sid:
                return MemoryTools.http_session(sid)
        return MemoryTools.PROCESS

    def for_request(self, ctx: Any) -> ToolDispatcher:
        """The dispatcher of the request's client session and binding (created on its
        first call)."""
        b = self.binding(ctx)
        session = self.session_key(ctx)
        with self._lock:
            dispatchers = self._sessions.setdefault(session, {})
            dispatcher = dispatchers.get(b)
            if dispatcher is None:
                dispatcher = ToolDispatcher(self.mem, b.scope, task=self.task_of(b),
                                            actor=b.actor,
                                            principal=b.principal, allowed=b.allowed)
                dispatchers[b] = dispatcher
            return dispatcher

    def end_session(self, session: str) -> None:
        """End the runs of the client session ``session`` (a :meth:`session_key`): their
        scratchpads are discarded; a later request of that session starts new runs."""
        with self._lock:
            dispatchers = list(self._sessions.pop(session, {}).values())
        for dispatcher in dispatchers:
            dispatcher.close()

    def close(self) -> None:
        """End every session's run (their scratchpads are discarded)."""
        with self._lock:
            dispatchers = [d for ds in self._sessions.values() for d in ds.values()]
            self._sessions.clear()
        for dispatcher in dispatchers:
            dispatcher.close()


def tool_listing() -> list[Any]:
    """The tools as the server lists them (``tools/list``: ``mcp.types.Tool`` objects with
    title, input and output schemas and annotations); ``memstrata tools --format mcp``
    prints the same."""
    import mcp_types as types

    return [
        types.Tool(
            name=t.name, title=t.display_title, description=t.description,
            input_schema=t.input_schema(), output_schema=t.output_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=t.read_only, destructive_hint=t.destructive,
                idempotent_hint=t.idempotent or t.read_only, open_world_hint=False),
        )
        for t in TOOLS
    ]


def build_server(mem: Memory, scope: Scope | dict[str, Any], *, task: str | None = None,
                 actor: str = "agent", name: str = "memstrata",
                 bind: Callable[[Any], Binding] | None = None) -> Server[Any]:
    """An MCP server exposing memstrata's tools for one fixed scope (``bind``: for the
    scope each request's binding names instead, see :class:`MemoryTools`).

    The returned server has a ``memstrata_tools`` attribute (:class:`MemoryTools`);
    call its ``close()`` when the server stops.
    """
    import anyio
    import mcp_types as types
    from mcp.server import Server

    from ..version import __version__

    tools = MemoryTools(mem, make_scope(scope), task=task, actor=actor, bind=bind)
    listing = tool_listing()
    schemas = {t.name: t.input_schema() for t in TOOLS}
    files = {"identity": "identity.md", "working-context": "working-context.md",
             "episodic": "episodic.md"}

    def read_file(b: Binding, name: str) -> str:
        from .memory_files import collect

        return collect(mem, b.scope, principal=b.principal, marked=True).render()[files[name]]

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        b = tools.binding(ctx)
        scope, task = b.scope, tools.task_of(b)
        listed = [types.Resource(name=name, title=f"memstrata {fname}",
                                 uri=f"memstrata://{name}", mime_type="text/markdown",
                                 description=f"{fname} of {scope}, rendered from the "
                                             "store (read identity and working context first)")
                  for name, fname in files.items()]
        if task is not None:
            listed.append(types.Resource(
                name="task", title=f"checkpoint of {task}",
                uri=f"memstrata://task/{task}", mime_type="text/markdown",
                description="the current checkpoint of the session's task, in full"))
        return types.ListResourcesResult(resources=listed)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        from ..errors import MemstrataError, NotFound
        from ..retrieval.context import checkpoint_text

        uri = str(params.uri)
        name = uri.removeprefix("memstrata://") if uri.startswith("memstrata://") else ""
        b = tools.binding(ctx)
        try:
            if name in files:
                text = await anyio.to_thread.run_sync(read_file, b, name)
            elif name.startswith("task/"):
                cp = await anyio.to_thread.run_sync(mem.checkpoints.current, b.scope,
                                                    name.removeprefix("task/"))
                text = checkpoint_text(cp) if cp is not None else "no checkpoint saved yet"
            else:
                raise NotFound(f"no resource {uri}",
                               hint="resources/list names them: memstrata://identity, "
                                    "memstrata://working-context, memstrata://episodic, "
                                    "memstrata://task/TASK")
        except MemstrataError as exc:
            raise protocol_error(exc, uri=uri) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type="text/markdown", text=text)])

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(
            name="session_start", title="Start a session with memory",
            description="Load identity, durable facts and the current task, then work by "
                        "memstrata's read/write protocol.",
            arguments=[types.PromptArgument(name="task", required=False,
                                            description="The task to resume.")])])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult:
        from mcp.shared.exceptions import MCPError

        from ..errors import MemstrataError

        if params.name != "session_start":
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}",
                           data={"hint": "prompts/list names the one prompt: session_start",
                                 "type": "NotFound"})
        b = tools.binding(ctx)
        task = (params.arguments or {}).get("task") or tools.task_of(b)
        try:
            ctx_text = await anyio.to_thread.run_sync(
                lambda: mem.context(b.scope, task=task, principal=b.principal).text)
        except MemstrataError as exc:
            raise protocol_error(exc) from None
        body = (f"{INSTRUCTIONS}\nWhat memory holds for this session ({b.scope}):\n\n"
                f"{ctx_text or '(nothing yet)'}")
        return types.GetPromptResult(
            description="session start", messages=[types.PromptMessage(
                role="user", content=types.TextContent(type="text", text=body))])

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        allowed = tools.binding(ctx).allowed
        return types.ListToolsResult(tools=[t for t in listing
                                            if allowed is None or t.name in allowed])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        dispatcher = tools.for_request(ctx)
        arguments = dict(params.arguments or {})
        result = await anyio.to_thread.run_sync(dispatcher.dispatch, params.name, arguments)
        return types.CallToolResult(
            content=[types.TextContent(type="text",
                                       text=json.dumps(result, ensure_ascii=False,
                                                       default=str))],
            structured_content=result,
            is_error="error" in result,
        )

    server: Server[Any] = Server(
        name, version=__version__, title="memstrata",
        description="Layered, governed memory for LLM agents", instructions=INSTRUCTIONS,
        on_list_tools=list_tools, on_call_tool=call_tool,
        on_list_resources=list_resources, on_read_resource=read_resource,
        on_list_prompts=list_prompts, on_get_prompt=get_prompt,
        get_tool_input_schema=schemas.get,
    )
    server.memstrata_tools = tools  # type: ignore[attr-defined]
    return server


def protocol_error(exc: Any, *, uri: str | None = None) -> Exception:
    """A library error met serving a resource or a prompt, as the JSON-RPC error the SDK
    answers with (``MCPError``): NotFound of a resource is :data:`RESOURCE_NOT_FOUND`, an
    invalid argument ``-32602``, anything else ``-32603``; the data carries the error's
    hint and type (and the ``uri``)."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    from ..errors import NotFound, ValidationError
    from .tools import error_result

    if isinstance(exc, NotFound) and uri is not None:
        code = RESOURCE_NOT_FOUND
    elif isinstance(exc, ValidationError | NotFound):
        code = types.INVALID_PARAMS
    else:
        code = types.INTERNAL_ERROR
    result = error_result(exc)
    data = {"hint": result.get("hint"), "type": result.get("type")}
    if uri is not None:
        data["uri"] = uri
    return MCPError(code, str(result.get("error")), data=data)


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over this process's stdin/stdout until it disconnects.

    The SDK cancels the requests still running when its read stream ends; a
    client that writes its requests and closes stdin (a pipe, a script) would
    lose their replies. The streams are wrapped so that end of input waits
    until every request read has been answered or cancelled by the client.
    """
    from mcp.server.stdio import stdio_server

    from .mcp_stdio import AnswerBeforeEof

    try:
        async with stdio_server() as (read_stream, write_stream):
            drain = AnswerBeforeEof(read_stream, write_stream)
            await server.run(drain.reader, drain.writer,
                             server.create_initialization_options())
    finally:
        _close(server)


async def serve_http(server: Server[Any], *, port: int = DEFAULT_PORT,
                     path: str = "/mcp", log_level: str = "warning") -> None:
    """Serve streamable HTTP on 127.0.0.1:``port`` (loopback only) until stopped."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=path, host=HOST)
    config = uvicorn.Config(app, host=HOST, port=port, log_level=log_level)
    try:
        await uvicorn.Server(config).serve()
    finally:
        _close(server)


def _close(server: Server[Any]) -> None:
    tools = getattr(server, "memstrata_tools", None)
    if tools is not None:
        tools.close()


def tool_names() -> list[str]:
    """Names of the tools the server exposes (the same as :data:`TOOLS_BY_NAME`)."""
    return list(TOOLS_BY_NAME)


__all__ = [
    "DEFAULT_PORT",
    "HOST",
    "INSTRUCTIONS",
    "RESOURCE_NOT_FOUND",
    "Binding",
    "MemoryTools",
    "build_server",
    "protocol_error",
    "serve_http",
    "serve_stdio",
    "tool_listing",
    "tool_names",
]
