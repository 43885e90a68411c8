"""The MCP streamable-HTTP endpoint of ``memstrata serve`` (mounted at ``/mcp``).

Contract: one MCP server (:func:`memstrata.interfaces.mcp_server.build_server`) for the
whole process, whose tools act, request by request, in the scope of the request's API key
(:meth:`memstrata.interfaces.service.app.Service.authenticate`, the same check as the REST API) with
the tools its role allows. A request without a valid key, or over its rate, is answered
401/429 before the MCP transport sees it. Each (key, MCP session) pair gets its own run,
so a session id presented with another key starts a different run, never the first one's.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, MutableMapping
from typing import TYPE_CHECKING, Any

from ...errors import MemstrataError
from ...models import Scope
from ..mcp_server import Binding, build_server
from .operations import Call, tools_for

if TYPE_CHECKING:
    from .core import Service

_CALL = "memstrata_call"


class McpEndpoint:
    """An ASGI app: authenticate, then hand the request to the MCP session manager."""

    def __init__(self, service: Service) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.service = service
        self.server = build_server(service.mem, Scope(tenant=service.mem.default_tenant),
                                   bind=self._binding)
        self.manager = StreamableHTTPSessionManager(
            app=self.server, max_request_body_size=service.config.max_body)

    @staticmethod
    def _binding(ctx: Any) -> Binding:
        request = getattr(ctx, "request", None)
        state = getattr(request, "state", None)
        call: Call | None = getattr(state, _CALL, None) if state is not None else None
        if call is None:  # never reached: every request passed __call__ first
            raise MemstrataError("an MCP request without an authenticated key")
        return Binding(call.scope, actor=call.key.actor, principal=call.principal,
                       allowed=tools_for(call.key.role), owner=call.key.id)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            async with self.manager.run():
                yield
        finally:
            self.server.memstrata_tools.close()  # type: ignore[attr-defined]

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        from starlette.requests import Request

        from .core import error_response

        request = Request(scope, receive)
        try:
            call = self.service.authenticate(request)
        except MemstrataError as exc:
            await error_response(exc, request)(scope, receive, send)
            return
        scope.setdefault("state", {})[_CALL] = call
        await self.manager.handle_request(scope, receive, send)


__all__ = ["McpEndpoint"]
