"""What every part of ``memstrata serve`` shares: the limits, authentication of a request
into a :class:`~.operations.Call`, running one operation, and the mapping
of library errors to HTTP statuses.

Contract:
- :meth:`Service.authenticate` is the one check every route makes (the REST API, the MCP
  endpoint and the inspector): the bearer key (or, for the inspector's pages, the
  HttpOnly cookie), its rate (a token bucket per key; :class:`RateLimiter`), then the
  request's scope from the key and the ``X-Memstrata-*`` headers
  (:meth:`~memstrata.interfaces.service.keys.ApiKey.scope_for`).
- A REST run belongs to the key that names it (:func:`rest_run_id`): the run id is
  ``api:<key id>`` (no ``X-Memstrata-Run``) or ``api:<key id>:<name>``, so a header value
  can name only runs of the request's own key, never another key's run or an MCP
  session's (whose ids are random and carry no ``api:`` prefix).
- A request refused for its rate is still logged with its key: the key is set on the
  request (``request.state.key``) as soon as it is authenticated.
- :meth:`Service.invoke` checks the operation's role, validates the body with its argument
  model and runs the handler in a worker thread; it returns ``(status, result)`` and never
  raises a library error (each maps to a status by :data:`STATUS`).
- :func:`decode_body` turns a request body into JSON or a :class:`ValidationError` (422):
  not JSON, or arrays and objects nested deeper than :data:`MAX_JSON_DEPTH`, is refused
  before any model or handler sees it (the parser's recursion never escapes as a 500).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import pydantic

from ...errors import (
    AccessDenied,
    ActivationRefused,
    BackendError,
    ConfigError,
    Conflict,
    MemstrataError,
    NotFound,
    PolicyRejected,
    ProviderError,
    RateLimited,
    Unauthenticated,
    ValidationError,
)
from ...inputs import MAX_NAME, check_name
from ..tools import SCOPE_WORDS, error_result
from .keys import ApiKey, KeyStore
from .operations import Call, Endpoint

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ...memory import Memory

#: The HTTP status of each error type (the most specific class wins).
STATUS: tuple[tuple[type[MemstrataError], int], ...] = (
    (Unauthenticated, 401), (AccessDenied, 403), (NotFound, 404), (Conflict, 409),
    (ActivationRefused, 409), (RateLimited, 429), (ValidationError, 422),
    (PolicyRejected, 422), (ProviderError, 502), (BackendError, 503), (ConfigError, 503),
)
_BY_TYPE = {cls.__name__: status for cls, status in STATUS}
COOKIE = "memstrata_key"
#: The deepest nesting of arrays and objects a request body may have: far more than any
#: operation's arguments need, far less than what would exhaust the interpreter's stack in
#: the parser or in whatever later walks the value.
MAX_JSON_DEPTH = 100
SCOPE_HEADERS = ("tenant", "user", "project", "agent")


def status_of(error: dict[str, Any]) -> int:
    """The HTTP status of an error result (``{"type": ...}``)."""
    return _BY_TYPE.get(str(error.get("type")), 400)


@dataclass
class ServiceConfig:
    """Limits and defaults of one server."""

    max_body: int = 256 * 1024
    rate_per_minute: int = 600
    mcp: bool = True
    inspector: bool = True


class RateLimiter:
    """A token bucket per key: ``rate`` requests per minute, bursts up to ``rate``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key_id: str, rate: int) -> float:
        """Spend one token; returns 0, or the seconds to wait when none is left."""
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(key_id, (float(rate), now))
            tokens = min(float(rate), tokens + (now - last) * rate / 60.0)
            if tokens < 1.0:
                self._buckets[key_id] = (tokens, now)
                return (1.0 - tokens) * 60.0 / rate
            self._buckets[key_id] = (tokens - 1.0, now)
            return 0.0


class Service:
    """What every route shares: the library, the keys, the limits."""

    def __init__(self, mem: Memory, config: ServiceConfig | None = None) -> None:
        self.mem = mem
        self.keys = KeyStore(mem.db, mem.clock)
        self.config = config or ServiceConfig()
        self.limiter = RateLimiter()

    # -- authentication ---------------------------------------------------
    def token_of(self, request: Request, *, cookie: bool) -> str:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
        if cookie and request.cookies.get(COOKIE):
            return str(request.cookies[COOKIE])
        raise Unauthenticated("this request carries no API key",
                              hint="send 'Authorization: Bearer msk....'; an admin creates "
                                   "keys with `memstrata keys create`")

    def authenticate(self, request: Request, *, cookie: bool = False) -> Call:
        """The request's call (key, scope, run), or a typed error; spends a rate token."""
        key = self.keys.authenticate(self.token_of(request, cookie=cookie))
        request.state.key = key  # the request's log line names the key, even when refused
        wait = self.limiter.take(key.id, key.rate_per_minute or self.config.rate_per_minute)
        if wait > 0:
            raise RateLimited(f"key {key.id} is over its rate of "
                              f"{key.rate_per_minute or self.config.rate_per_minute} requests "
                              "per minute", hint=f"retry after {wait:.1f} s",
                              retry_after=wait)
        return self.call_for(key, request)

    def call_for(self, key: ApiKey, request: Request) -> Call:
        asked = {}
        for name in SCOPE_HEADERS:
            value = request.headers.get(f"x-memstrata-{name}")
            asked[name] = value.strip() if value is not None and value.strip() else None
        scope = key.scope_for(**asked)
        run = request.headers.get("x-memstrata-run")
        task = request.headers.get("x-memstrata-task")
        try:
            run_id = rest_run_id(key.id, check_name(run, "run") if run else None)
            task = check_name(task, "task") if task else None
        except ValueError as exc:
            raise ValidationError(str(exc), hint="X-Memstrata-Run and -Task are names") from None
        return Call(mem=self.mem, keys=self.keys, key=key, scope=scope, run_id=run_id,
                    task=task)

    # -- operations -------------------------------------------------------
    async def invoke(self, call: Call, op: Endpoint, body: Any) -> tuple[int, dict[str, Any]]:
        """Run ``op`` for ``call`` with a decoded JSON body; (status, result)."""
        if not call.key.may(op.role):
            return 403, {"error": f"{op.name} needs the {op.role} role; this key is "
                                  f"{call.key.role}",
                         "hint": "ask an admin for a key with that role",
                         "type": "AccessDenied"}
        if body is None:
            body = {}
        if not isinstance(body, dict):
            return 422, {"error": f"the body of {op.name} must be a JSON object",
                         "hint": "send {} for no arguments", "type": "ValidationError"}
        try:
            args = op.args.model_validate(body)
        except pydantic.ValidationError as exc:
            problem = _argument_problem(op, exc)
            return status_of(problem), problem
        try:
            result = await anyio.to_thread.run_sync(op.handler, call, args)
        except MemstrataError as exc:
            result = error_result(exc)
        if "error" in result:
            return status_of(result), result
        return 200, result


def rest_run_id(key_id: str, name: str | None) -> str:
    """The run a REST request of key ``key_id`` belongs to: its default run
    (``api:<key id>``) or the run it names with ``X-Memstrata-Run`` (``api:<key id>:<name>``).
    The key's id is part of every REST run id, so no header value reaches another key's
    run or an MCP session's; a ``ValueError`` when the id would exceed a run id's length."""
    prefix = f"api:{key_id}"
    if name is None:
        return prefix
    longest = MAX_NAME - len(prefix) - 1
    if len(name) > longest:
        raise ValueError(f"run {name[:20]!r}... is longer than {longest} characters")
    return f"{prefix}:{name}"


def retry_after(exc: MemstrataError) -> dict[str, str]:
    """The ``Retry-After`` header of a RateLimited error (whole seconds, at least 1); none
    for another error."""
    if not isinstance(exc, RateLimited):
        return {}
    return {"Retry-After": str(max(1, round(float(exc.details.get("retry_after", 1)))))}


def _argument_problem(op: Endpoint, exc: pydantic.ValidationError) -> dict[str, Any]:
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "body"
        if err["type"] == "extra_forbidden" and str(err["loc"][0]) in SCOPE_WORDS:
            return {"error": f"{loc!r} is not accepted: the scope comes from the API key",
                    "hint": "name a user or project with the X-Memstrata-User / "
                            "X-Memstrata-Project headers, within what the key allows",
                    "type": "AccessDenied"}
        problems.append(f"{loc}: {str(err['msg']).removeprefix('Value error, ')}")
    return {"error": f"invalid arguments for {op.name}: " + "; ".join(problems[:10]),
            "hint": f"{op.name} takes: {', '.join(op.args.model_fields) or 'no arguments'}",
            "type": "ValidationError"}



async def read_body(request: Request, limit: int) -> bytes | None:
    """The request body, or None when more than ``limit`` bytes arrive (a body sent without
    Content-Length is counted as it streams in, never buffered past the limit)."""
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)


def decode_body(raw: bytes) -> Any:
    """The JSON value of a request body (an empty body is ``{}``); a ValidationError when it
    is not JSON or nests arrays and objects deeper than :data:`MAX_JSON_DEPTH`."""
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except RecursionError:  # the parser's own stack: deeper than any limit below
        body = None
        depth = MAX_JSON_DEPTH + 1
    except ValueError as exc:  # not JSON, not UTF-8, or an integer past Python's digit limit
        raise ValidationError(f"the body is not JSON: {exc}",
                              hint="send a JSON object") from None
    else:
        depth = _depth(body)
    if depth > MAX_JSON_DEPTH:
        raise ValidationError(f"the body nests arrays and objects more than {MAX_JSON_DEPTH} "
                              "levels deep", hint="send the operation's arguments as a flat "
                                                  "JSON object")
    return body


def _depth(value: Any) -> int:
    """How deep arrays and objects nest in ``value`` (a scalar: 0); stops counting past
    :data:`MAX_JSON_DEPTH`. Iterative, so no depth can exhaust the stack."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def too_big(limit: int, rid: str) -> dict[str, Any]:
    return {"error": f"the request body is over {limit} bytes", "type": "ValidationError",
            "hint": "send less per request (split a batch)", "request_id": rid}


def error_response(exc: MemstrataError, request: Request) -> Response:
    from starlette.responses import JSONResponse

    body = {**error_result(exc), "request_id": request.state.request_id}
    headers = retry_after(exc)
    if isinstance(exc, Unauthenticated):
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(body, status_code=status_of(body), headers=headers)



__all__ = ["COOKIE", "MAX_JSON_DEPTH", "STATUS", "RateLimiter", "Service", "ServiceConfig",
           "decode_body", "error_response", "read_body", "rest_run_id", "retry_after",
           "status_of", "too_big"]
