"""The ASGI application of ``memstrata serve``: the REST API, the MCP endpoint and the
inspector in one process (Starlette; served by uvicorn).

Contract:
- Every request but ``GET /healthz`` and ``GET /openapi.json`` needs an API key
  (``Authorization: Bearer msk...``; the inspector's pages also accept the key in an
  HttpOnly, SameSite=Strict cookie set by its sign-in form). The key decides the tenant,
  the role and the principal; the scope is :meth:`ApiKey.scope_for` of the key and the
  ``X-Memstrata-User``/``-Project``/``-Agent``/``-Tenant`` headers, never the body.
- ``POST /v1/...`` runs one :data:`~memstrata.interfaces.service.operations.OPERATIONS` entry: the
  body (a JSON object, or empty; :func:`.core.decode_body`: one that is not JSON or nests
  deeper than :data:`.core.MAX_JSON_DEPTH` is a 422) is validated by its argument model;
  the answer is the operation's result (200) or ``{"error", "hint", "type", "request_id"}``
  with a status by error type (:data:`.core.STATUS`). A library call runs in a worker
  thread.
- Limits: request bodies over ``max_body`` bytes are refused (413): by their
  Content-Length before anything is read, else as they stream in (never buffered past
  the limit; the MCP transport applies the same limit). Each key has a token bucket of
  its ``rate_per_minute`` (or the server's); a request past it gets 429 with
  ``Retry-After``.
- ``/mcp`` is the MCP streamable-HTTP endpoint over the same tools; each request is
  authenticated the same way and the tools act in the scope of that request's key and
  headers with the tools its role allows
  (:func:`memstrata.interfaces.service.operations.tools_for`); each MCP session has runs of
  its own (:mod:`.mcp_http`).
- One JSON log line per request on the ``memstrata.service`` logger: request id, method,
  path, status, duration, key id, tenant and role. Never a body, a header value or a
  record's content. The request id is returned in ``X-Request-Id``.
- A client that goes away before its request is answered (mid-body, say) is not a
  server error: its line has status :data:`CLIENT_GONE` (499, as nginx logs it), nothing
  is sent to the closed connection and no traceback is logged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from ...errors import MemstrataError
from ...ids import new_id
from .core import Service, ServiceConfig, decode_body, error_response, read_body, too_big
from .keys import ApiKey
from .operations import OPERATIONS_BY_PATH

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from ...memory import Memory

log = logging.getLogger("memstrata.service")
#: The status logged for a request whose client disconnected before it was answered.
CLIENT_GONE = 499

# -- ASGI pieces --------------------------------------------------------------

ASGIApp = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Any]],
                    Callable[[MutableMapping[str, Any]], Awaitable[None]]], Awaitable[None]]


class Guard:
    """Outermost layer: request id, body-size limit, one JSON log line per request.
    ``service`` is the :class:`Service` behind the app."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service
        self.max_body = service.config.max_body

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        from starlette.requests import ClientDisconnect

        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = new_id()
        scope.setdefault("state", {})["request_id"] = rid
        started = time.perf_counter()
        status = {"code": 500}
        logged = [False]
        started_response = [False]
        gone = [False]  # the client disconnected before the response started

        async def receive_watched() -> MutableMapping[str, Any]:
            message: MutableMapping[str, Any] = await receive()
            if message["type"] == "http.disconnect" and not started_response[0]:
                gone[0] = True
                status["code"] = CLIENT_GONE
            return message

        def log_once() -> None:
            # The line is written before the last byte of the response leaves, so a client
            # holding a complete response can always find its request's line.
            if logged[0]:
                return
            logged[0] = True
            key: ApiKey | None = scope.get("state", {}).get("key")
            log.info(json.dumps({
                "request_id": rid, "method": scope.get("method"), "path": scope.get("path"),
                "status": status["code"],
                "ms": round((time.perf_counter() - started) * 1000, 2),
                "key": key.id if key else None, "tenant": key.tenant if key else None,
                "role": key.role if key else None}))

        async def send_logged(message: MutableMapping[str, Any]) -> None:
            if gone[0]:
                return  # nobody is listening; the line says 499, not what the app made of it
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                started_response[0] = True
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", rid.encode()))
                message["headers"] = headers
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                log_once()
            await send(message)

        try:
            length = _content_length(scope)
            if length is not None and length > self.max_body:
                await _send_json(send_logged, 413, too_big(self.max_body, rid))
                return
            await self.app(scope, receive_watched, send_logged)
        except ClientDisconnect:
            gone[0] = True  # raised by a body read after the disconnect: not a server error
            status["code"] = CLIENT_GONE
        finally:
            log_once()


def _content_length(scope: MutableMapping[str, Any]) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _send_json(send: Any, status: int, body: dict[str, Any],
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": data})


def build_app(mem: Memory, config: ServiceConfig | None = None) -> Guard:
    """The whole service for one open store."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from .openapi import document

    service = Service(mem, config)
    spec = document()

    async def rest(request: Request) -> Response:
        if request.method != "POST":  # the documented error shape, as every other refusal
            return JSONResponse({"error": f"{request.method} is not allowed here: every "
                                          "operation is a POST", "hint": "POST a JSON body "
                                          "(GET /openapi.json lists the operations)",
                                 "type": "ValidationError",
                                 "request_id": request.state.request_id},
                                status_code=405, headers={"Allow": "POST"})
        op = OPERATIONS_BY_PATH.get(request.url.path)
        if op is None:
            return JSONResponse({"error": f"no operation {request.url.path}",
                                 "hint": "GET /openapi.json lists them", "type": "NotFound",
                                 "request_id": request.state.request_id}, status_code=404)
        try:
            call = service.authenticate(request)
        except MemstrataError as exc:
            return error_response(exc, request)
        raw = await read_body(request, service.config.max_body)
        if raw is None:
            return JSONResponse(too_big(service.config.max_body, request.state.request_id),
                                status_code=413)
        try:
            body = decode_body(raw)
        except MemstrataError as exc:
            return error_response(exc, request)
        status, result = await service.invoke(call, op, body)
        if status != 200:
            result = {**result, "request_id": request.state.request_id}
        return JSONResponse(result, status_code=status)

    async def openapi(request: Request) -> Response:
        return JSONResponse(spec)

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    routes: list[Any] = [Route("/healthz", health, methods=["GET"]),
                         Route("/openapi.json", openapi, methods=["GET"]),
                         Route("/v1/{path:path}", rest,
                               methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])]
    mcp_app = None
    if service.config.mcp:
        from .mcp_http import McpEndpoint

        mcp_app = McpEndpoint(service)
        routes.append(Route("/mcp", mcp_app, methods=["GET", "POST", "DELETE"]))
    if service.config.inspector:
        from .inspector import inspector_routes

        routes.extend(inspector_routes(service))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if mcp_app is None:
            yield
            return
        async with mcp_app.running():
            yield

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.service = service
    return Guard(app, service)


__all__ = ["CLIENT_GONE", "Guard", "ServiceConfig", "build_app"]
