"""The MCP streamable-HTTP endpoint of ``memstrata serve`` (mounted at ``/mcp``).

Contract: one MCP server (:func:`memstrata.interfaces.mcp_server.build_server`) for the
whole process, whose tools act, request by request, in the scope of the request's API key
and ``X-Memstrata-*`` headers (:meth:`memstrata.interfaces.service.app.Service.authenticate`,
the same check as the REST API, made on every request) with the tools its role allows.
A request without a valid key, or over its rate, is answered 401/429 before the MCP
transport sees it.

Sessions: MCP over this endpoint is the handshake era of the protocol (``initialize``, then
an ``Mcp-Session-Id`` on every request), because a session is what a run belongs to. A
request of the session-less 2026 era is refused with the protocol's "unsupported protocol
version" error naming the handshake versions (HTTP 400), which an ``auto`` client (the MCP
SDK's default) answers by falling back to the handshake. Each (session, binding) pair gets
its own run (:class:`~memstrata.interfaces.mcp_server.MemoryTools`): two sessions never
share a scratchpad, and a request naming another scope or task starts a different run,
never the first one's. ``X-Memstrata-Task`` names the request's default task, as on REST.

Ownership: a session belongs to the API key whose ``initialize`` opened it
(:class:`SessionActivity` records the key when the response carries the new
``Mcp-Session-Id``). A request of any other key presenting that id, or presenting an id this
endpoint never issued, is answered 404 "Session not found", exactly as the SDK answers an
unknown session, before the SDK sees it: another key can neither use nor end (``DELETE``)
the session, nor learn that it exists. A session's runs are never reachable from REST
(their ids are random; a REST run id always starts ``api:<key id>``,
:func:`.core.rest_run_id`).

A session's runs end, and their scratchpads are discarded, when the session ends: its
key's ``DELETE``, a request of its key the SDK answers 404 (the session is gone), or no
request in flight for longer than the session manager's idle timeout (after which the SDK
has closed it), and at shutdown.

A ``POST`` body is read here, within the server's body limit (413 beyond), before the SDK
sees the request, so a client that disconnects mid-body ends the request as a client
disconnect (:data:`.app.CLIENT_GONE`), not as an error of the SDK's transport.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from ...errors import MemstrataError
from ...models import Scope
from ..mcp_server import Binding, MemoryTools, build_server
from .operations import Call, tools_for

if TYPE_CHECKING:
    from .core import Service

_CALL = "memstrata_call"
_SESSION_HEADER = "mcp-session-id"
_VERSION_HEADER = "mcp-protocol-version"
#: Seconds past the SDK's idle timeout before an idle session's runs are ended here (the
#: SDK has closed the session by then, so no request can reach its runs again).
IDLE_GRACE_S = 60.0
#: At most one sweep for idle sessions per this many seconds.
SWEEP_EVERY_S = 30.0


@dataclass
class _Session:
    in_flight: int = 0
    last_seen: float = 0.0
    over: bool = False
    owner: str | None = None


class SessionActivity:
    """Who opened each MCP session (:meth:`opened`, :meth:`owner`), its requests in flight
    and the time of the last one: when a session is over (its runs may be ended), and which
    have been idle past ``idle_after`` seconds (None: never)."""

    def __init__(self, idle_after: float | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_after = idle_after
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._swept = clock()

    def opened(self, sid: str, owner: str) -> None:
        """Session ``sid`` was just issued to ``owner`` (an API key id)."""
        self._sessions[sid] = _Session(last_seen=self._clock(), owner=owner)

    def owner(self, sid: str) -> str | None:
        """The key that opened ``sid``; None for an id never issued (or already forgotten:
        over, or idle past the limit)."""
        entry = self._sessions.get(sid)
        return entry.owner if entry is not None else None

    def begin(self, sid: str) -> None:
        """A request of session ``sid`` starts."""
        self._sessions.setdefault(sid, _Session(last_seen=self._clock())).in_flight += 1

    def end(self, sid: str, *, over: bool) -> bool:
        """A request of ``sid`` is done; ``over``: it showed the session is over (a DELETE,
        or the SDK no longer knows the id). True, once, when the session is over and none
        of its requests is in flight any more (its open event stream, say)."""
        entry = self._sessions.get(sid)
        if entry is None:
            return False
        entry.in_flight -= 1
        entry.last_seen = self._clock()
        entry.over = entry.over or over
        if entry.over and entry.in_flight <= 0:
            del self._sessions[sid]
            return True
        return False

    def idle(self) -> list[str]:
        """Forget and return the sessions with nothing in flight for longer than the limit
        (checked at most once per :data:`SWEEP_EVERY_S`)."""
        now = self._clock()
        if self.idle_after is None or now - self._swept < SWEEP_EVERY_S:
            return []
        self._swept = now
        limit = self.idle_after + IDLE_GRACE_S
        gone = [sid for sid, entry in self._sessions.items()
                if entry.in_flight <= 0 and now - entry.last_seen > limit]
        for sid in gone:
            del self._sessions[sid]
        return gone


class McpEndpoint:
    """An ASGI app: authenticate, then hand the request to the MCP session manager."""

    def __init__(self, service: Service) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.service = service
        self.server = build_server(service.mem, Scope(tenant=service.mem.default_tenant),
                                   bind=self._binding)
        self.tools: MemoryTools = self.server.memstrata_tools  # type: ignore[attr-defined]
        self.manager = StreamableHTTPSessionManager(
            app=self.server, max_request_body_size=service.config.max_body)
        self.activity = SessionActivity(self.manager.session_idle_timeout)

    @staticmethod
    def _binding(ctx: Any) -> Binding:
        request = getattr(ctx, "request", None)
        state = getattr(request, "state", None)
        call: Call | None = getattr(state, _CALL, None) if state is not None else None
        if request is None or call is None:  # never reached: every request passed __call__
            raise MemstrataError("an MCP request without an authenticated key")
        if not request.headers.get(_SESSION_HEADER):  # never: the SDK refuses it (400 or 404)
            raise MemstrataError("an MCP request outside a session")
        return Binding(call.scope, actor=call.key.actor, principal=call.principal,
                       allowed=tools_for(call.key.role), owner=call.key.id, task=call.task)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            async with self.manager.run():
                yield
        finally:
            self.tools.close()

    async def _end(self, sids: list[str]) -> None:
        for sid in sids:
            await anyio.to_thread.run_sync(self.tools.end_session, MemoryTools.http_session(sid))

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        from starlette.requests import Request

        from .core import error_response

        request = Request(scope, receive)
        try:
            call = self.service.authenticate(request)
        except MemstrataError as exc:
            await error_response(exc, request)(scope, receive, send)
            return
        version = request.headers.get(_VERSION_HEADER)
        if version is not None and version not in _handshake_versions():
            await _unsupported_version(version)(scope, receive, send)
            return
        scope.setdefault("state", {})[_CALL] = call
        await self._end(self.activity.idle())
        sid = request.headers.get(_SESSION_HEADER)
        if sid and self.activity.owner(sid) != call.key.id:
            await _session_not_found()(scope, receive, send)  # another key's, or none
            return
        if request.method == "POST":
            replay = await self._read_body(request)
            if replay is None:
                await _too_big(self.service, request)(scope, receive, send)
                return
            receive = replay
        if not sid:
            await self.manager.handle_request(scope, receive, self._opening(send, call))
            return
        status = [0]

        async def send_status(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        self.activity.begin(sid)
        try:
            await self.manager.handle_request(scope, receive, send_status)
        finally:
            deleted = request.method == "DELETE" and 200 <= status[0] < 300
            if self.activity.end(sid, over=deleted or status[0] == 404):
                with anyio.CancelScope(shield=True):
                    await self._end([sid])


    async def _read_body(self, request: Any) -> Callable[[], Any] | None:
        """Read the request's body (a disconnect raises ``ClientDisconnect``, which the app
        logs as the client's); a ``receive`` replaying it to the SDK, or None when it is over
        the body limit."""
        from .core import read_body

        raw = await read_body(request, self.service.config.max_body)
        if raw is None:
            return None
        receive = request.receive
        pending = [True]

        async def replay() -> Any:
            if pending[0]:
                pending[0] = False
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        return replay

    def _opening(self, send: Any, call: Call) -> Callable[[MutableMapping[str, Any]], Any]:
        """``send`` for a request without a session id: a response that issues a session
        id records the request's key as the session's owner before the client sees it."""
        async def send_opening(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == _SESSION_HEADER.encode():
                        self.activity.opened(value.decode("latin-1"), call.key.id)
            await send(message)

        return send_opening


def _session_not_found() -> Any:
    """The SDK's answer to an unknown session id (HTTP 404), word for word."""
    from mcp_types import INVALID_REQUEST
    from starlette.responses import JSONResponse

    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
        "code": INVALID_REQUEST, "message": "Session not found"}}, status_code=404)


def _too_big(service: Service, request: Any) -> Any:
    from starlette.responses import JSONResponse

    from .core import too_big

    return JSONResponse(too_big(service.config.max_body, request.state.request_id),
                        status_code=413)


def _handshake_versions() -> tuple[str, ...]:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    return tuple(HANDSHAKE_PROTOCOL_VERSIONS)


def _unsupported_version(requested: str) -> Any:
    """The JSON-RPC "unsupported protocol version" error (HTTP 400) naming the handshake
    versions, as the SDK words it."""
    from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
    from starlette.responses import JSONResponse

    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
        "code": UNSUPPORTED_PROTOCOL_VERSION, "message": "Unsupported protocol version",
        "data": {"supported": list(_handshake_versions()), "requested": requested}}},
        status_code=400)


__all__ = ["IDLE_GRACE_S", "SWEEP_EVERY_S", "McpEndpoint", "SessionActivity"]
