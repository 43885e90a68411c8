"""The inspector: server-rendered HTML pages at ``/`` for people reviewing an agent's memory.

Contract:
- :func:`inspector_routes` returns the Starlette routes the app mounts: ``/`` (sign-in),
  ``POST /login``, ``POST /logout``, ``/review`` (+ ``/review/approve``, ``/review/reject``,
  ``/review/bulk``), ``/facts`` and ``/facts/{id}`` (+ ``POST /facts/{id}/undo``),
  ``/episodes``, ``/context`` and ``/forget`` (``GET``: preview, ``POST``: delete).
- Every page and form action is authenticated by :meth:`.core.Service.authenticate` (the
  ``memstrata_key`` cookie, or a bearer header) and runs REST operations only, through
  :meth:`.core.Service.invoke` with the :data:`.operations.OPERATIONS_BY_PATH` entry: the
  role, scope and principal checks are exactly the API's, so a page never shows a record
  its key may not read and a form never does what the key may not do (the API's error is
  shown instead, with its status).
- The scope is chosen with the ``user`` / ``project`` / ``agent`` query parameters, read as
  the ``X-Memstrata-*`` headers are (within what the key allows); links and forms carry
  them on.
- Sign-in checks the pasted key (:meth:`~.keys.KeyStore.authenticate`) and its role (at
  least :data:`SIGN_IN_ROLE`: a reviewer or an admin; an agent key is refused with a 403
  sign-in page naming the roles) and keeps it in an HttpOnly, SameSite=Strict, Path=/
  session cookie; ``/logout`` clears it. A request without a valid key is redirected (303)
  to ``/`` with the error and its hint; one over its key's rate gets 429 with
  ``Retry-After``, as the API's.
- A form action answers 303 back to its page with a flash message (``flash``/``level``
  query parameters: what the operation returned, or its error and hint, signed with the
  session: ``sig``, :func:`form_token`; a message without a valid signature, one a link
  made up, is not shown); a delete refused by the API is shown on the forget page with the
  API's status.
- A form of another site does nothing. ``SameSite=Strict`` keeps the cookie from other
  sites, but a page on another port of the host, or a sibling subdomain, is the same site.
  So every form action refuses (403) a request whose ``Origin`` is not the inspector's
  own, and, signed in by the cookie, one whose ``csrf`` field is not the session's
  :func:`form_token`, which every form of a signed-in page carries and no other page can
  know. Signing in and out from another origin is refused too (another site would swap
  the session for its own key).
- Pages carry no script: a Content-Security-Policy allows none, framing is refused and
  nothing is cached (``no-store``). Everything shown is HTML-escaped
  (:mod:`.inspector_pages`).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from ...errors import AccessDenied, MemstrataError, Unauthenticated
from ..tools import error_result
from . import inspector_pages as pages
from .core import COOKIE, read_body, retry_after, status_of
from .keys import ROLES, Role, role_at_least
from .operations import OPERATIONS_BY_PATH, Call

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from .core import Service

WHOAMI = "/v1/whoami"
REVIEW_LIST = "/v1/review/list"
APPROVE = "/v1/review/approve"
REJECT = "/v1/review/reject"
BY_SUBJECT = "/v1/facts/by-subject"
LIST_FACTS = "/v1/facts/list"
HISTORY = "/v1/facts/history"
UNDO = "/v1/facts/undo-supersede"
BROWSE = "/v1/episodes/browse"
CONTEXT = "/v1/context"
FORGET_PREVIEW = "/v1/forget/preview"
FORGET = "/v1/forget"
#: Every operation the inspector runs (all must exist in the operations table).
USED = (WHOAMI, REVIEW_LIST, APPROVE, REJECT, BY_SUBJECT, LIST_FACTS, HISTORY, UNDO, BROWSE,
        CONTEXT, FORGET_PREVIEW, FORGET)

HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: under no-referrer a browser posts a form with
    # "Origin: null", which the inspector must refuse (a sandboxed frame of another site
    # sends that too)
    "Referrer-Policy": "same-origin",
}
_MAX_FLASH = 600
#: The least role that signs in to the inspector (its pages are a reviewer's).
SIGN_IN_ROLE: Role = "reviewer"
Form = dict[str, list[str]]


def form_token(key_token: str, purpose: str = "form") -> str:
    """What a signed-in page's forms carry (``csrf``), and what signs its flash messages
    (``purpose="flash:<level>:<message>"``): a hash of the session's key, which a page of
    another origin cannot read (the cookie is HttpOnly), and so cannot put in a form or a
    link."""
    return hashlib.sha256(f"memstrata inspector {purpose}\0{key_token}".encode()
                          ).hexdigest()[:32]


def _session_key(request: Request) -> str | None:
    """The key the request signs in with: a bearer header's, else the cookie's (as
    :meth:`.core.Service.token_of` reads them)."""
    bearer = _bearer(request)
    if bearer is not None:
        return bearer
    cookie = request.cookies.get(COOKIE)
    return str(cookie) if cookie else None


def _bearer(request: Request) -> str | None:
    """The request's usable bearer token (another ``Authorization``, a proxy's Basic one
    say, is none: the cookie signs such a request in, and its form needs the token)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _foreign(request: Request) -> bool:
    """Whether a form was posted by a page of another origin: its ``Origin`` header names
    another host or port than the request's ``Host`` (or is ``null``). The scheme is left
    out: behind a proxy that ends TLS the inspector sees ``http`` where the page was
    ``https``, and one host and port serve one scheme."""
    origin = request.headers.get("origin")
    if origin is None:
        return False  # browsers send it with every form they post; the token still applies
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return True  # "null": a sandboxed frame, a file, a data: URL
    return _host(parts.netloc) != _host(request.headers.get("host", ""))


def _host(netloc: str) -> str:
    """A host and port as compared for :func:`_foreign` (lower case, without the default
    ports)."""
    netloc = netloc.strip().lower()
    for default in (":80", ":443"):
        netloc = netloc.removesuffix(default)
    return netloc


def _html(text: str, status: int = 200, headers: Mapping[str, str] | None = None
          ) -> Response:
    from starlette.responses import HTMLResponse

    return HTMLResponse(text, status_code=status, headers={**HEADERS, **(headers or {})})


def _redirect(url: str) -> Response:
    from starlette.responses import RedirectResponse

    return RedirectResponse(url, status_code=303, headers=HEADERS)


def _url(path: str, params: Mapping[str, Any]) -> str:
    query = {k: str(v)[:_MAX_FLASH] for k, v in params.items() if v is not None and v != ""}
    return path + ("?" + urlencode(query) if query else "")


def _scope_q(request: Request) -> dict[str, str]:
    """The scope parameters of the request's query (non-empty ones)."""
    out = {}
    for name in pages.SCOPE_PARAMS:
        value = request.query_params.get(name, "").strip()
        if value:
            out[name] = value
    return out


def _scoped(request: Request) -> Request:
    """The request with its scope query parameters as ``X-Memstrata-*`` headers."""
    from starlette.requests import Request

    chosen = _scope_q(request)
    if not chosen:
        return request
    names = {f"x-memstrata-{k}".encode() for k in chosen}
    headers = [(k, v) for k, v in request.scope["headers"] if k not in names]
    headers += [(f"x-memstrata-{k}".encode(), v.encode()) for k, v in chosen.items()]
    return Request({**request.scope, "headers": headers}, request.receive)


def _said(result: Mapping[str, Any]) -> str:
    """An error result as one line: the message and its hint."""
    hint = result.get("hint")
    return f"{result.get('error')}" + (f" (hint: {hint})" if hint else "")


def _one(form: Form, name: str) -> str | None:
    """A form field's first value, stripped; empty is None."""
    values = form.get(name) or []
    value = values[0].strip() if values else ""
    return value or None


Page = Callable[["Inspector", "Request", Call], Awaitable["Response"]]

_FOREIGN = {"error": "this form was sent by a page of another site; nothing was done",
            "hint": "use the inspector's own pages (its address, its port)",
            "type": "AccessDenied"}
_NO_TOKEN = {"error": "this form does not come from a page of this session; nothing was "
                      "done", "hint": "reload the page and submit it again",
             "type": "AccessDenied"}


def _signed_in(page: Page) -> Callable[[Inspector, Request], Awaitable[Response]]:
    """A route handler that runs ``page`` with the request's call, or answers the refusal
    (:meth:`Inspector._call`) without running it."""

    @functools.wraps(page)
    async def handler(self: Inspector, request: Request) -> Response:
        if request.method == "POST" and _foreign(request):
            return _html(pages.layout("Not allowed", pages.problem(_FOREIGN)), 403)
        call = self._call(request)
        if not isinstance(call, Call):
            return call
        if request.method == "POST":
            form = await self._form(request)
            key = _session_key(request)
            by_cookie = _bearer(request) is None
            if by_cookie and (key is None or not hmac.compare_digest(
                    _one(form, "csrf") or "", form_token(key))):
                return _html(pages.layout("Not allowed", pages.problem(_NO_TOKEN)), 403)
            request.state.form = form
        return await page(self, request, call)

    return handler


class Inspector:
    """The handlers of the inspector's routes, over one :class:`Service`."""

    def __init__(self, service: Service) -> None:
        self.service = service

    # -- plumbing ---------------------------------------------------------------------
    def _call(self, request: Request) -> Call | Response:
        """The request's call, or the response refusing it."""
        try:
            return self.service.authenticate(_scoped(request), cookie=True)
        except Unauthenticated as exc:
            return _redirect(_url("/", {"error": str(exc), "hint": exc.hint}))
        except MemstrataError as exc:
            err = error_result(exc)
            frame = pages.Frame(scope_q=_scope_q(request))
            return _html(pages.layout("Not allowed", pages.problem(err), frame),
                         status_of(err), retry_after(exc))

    async def _run(self, call: Call, path: str,
                   body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        args = {k: v for k, v in body.items() if v is not None}
        return await self.service.invoke(call, OPERATIONS_BY_PATH[path], args)

    async def _frame(self, request: Request, call: Call) -> pages.Frame:
        _, who = await self._run(call, WHOAMI, {})
        level = "error" if request.query_params.get("level") == "error" else "ok"
        key = _session_key(request) or ""
        flash = request.query_params.get("flash") or None
        if flash is not None and not hmac.compare_digest(
                request.query_params.get("sig", ""), form_token(key, f"flash:{level}:{flash}")):
            flash = None  # a message a link made up, not one this session's action left
        return pages.Frame(who=who, scope_q=_scope_q(request), flash=flash, level=level,
                           csrf=form_token(key))

    async def _form(self, request: Request) -> Form:
        """The posted form (an oversized one, past the server's body limit, reads empty and
        so changes nothing); read once, by :func:`_signed_in`."""
        kept: Form | None = getattr(request.state, "form", None)
        if kept is not None:
            return kept
        raw = await read_body(request, self.service.config.max_body)
        return parse_qs((raw or b"").decode("utf-8", "replace"), keep_blank_values=True)

    @staticmethod
    def _back(request: Request, path: str, flash: str, ok: bool) -> Response:
        level = "ok" if ok else "error"
        flash = flash[:_MAX_FLASH]
        sig = form_token(_session_key(request) or "", f"flash:{level}:{flash}")
        return _redirect(_url(path, {**_scope_q(request), "flash": flash, "level": level,
                                     "sig": sig}))

    # -- sign-in ----------------------------------------------------------------------
    async def signin(self, request: Request) -> Response:
        error = request.query_params.get("error")
        shown = {"error": error, "hint": request.query_params.get("hint")} if error else None
        return _html(pages.signin_page(shown))

    async def login(self, request: Request) -> Response:
        if _foreign(request):  # another site signing the browser in with its own key
            return _html(pages.layout("Not allowed", pages.problem(_FOREIGN)), 403)
        form = await self._form(request)
        token = _one(form, "key") or ""
        try:
            key = self.service.keys.authenticate(token)
        except MemstrataError as exc:
            return _html(pages.signin_page(error_result(exc)), 401)
        if not role_at_least(key.role, SIGN_IN_ROLE):
            roles = " or ".join(ROLES[ROLES.index(SIGN_IN_ROLE):])
            refused = AccessDenied(f"the inspector is for people who review memory: it needs a "
                                   f"{roles} key; this key is {key.role}",
                                   hint=f"sign in with a {roles} key (`memstrata keys "
                                        "create --role reviewer`); an agent key works the API "
                                        "and /mcp")
            return _html(pages.signin_page(error_result(refused)), 403)
        scope = {k: v for k in ("user", "project") if (v := _one(form, k))}
        response = _redirect(_url("/review", scope))
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return response

    async def logout(self, request: Request) -> Response:
        if _foreign(request):
            return _html(pages.layout("Not allowed", pages.problem(_FOREIGN)), 403)
        response = _redirect("/")
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    # -- review -----------------------------------------------------------------------
    @_signed_in
    async def review(self, request: Request, call: Call) -> Response:
        status, result = await self._run(call, REVIEW_LIST, {"limit": 500})
        return _html(pages.review_page(await self._frame(request, call), result), status)

    @_signed_in
    async def approve(self, request: Request, call: Call) -> Response:
        form = await self._form(request)
        fact_id, claim = _one(form, "fact_id"), _one(form, "claim")
        if claim is not None and claim == _one(form, "original"):
            claim = None
        status, result = await self._run(call, APPROVE, {"fact_id": fact_id, "claim": claim})
        return self._back(request, "/review", self._approved(fact_id, claim, status, result),
                          status == 200)

    @staticmethod
    def _approved(fact_id: str | None, claim: str | None, status: int,
                  result: Mapping[str, Any]) -> str:
        if status != 200:
            return f"approving fact:{fact_id} failed: {_said(result)}"
        verb = "edited and approved" if claim is not None else "approved"
        return f"{verb} fact:{fact_id}: {result.get('status')} ({result.get('reason')})"

    @_signed_in
    async def reject(self, request: Request, call: Call) -> Response:
        form = await self._form(request)
        fact_id = _one(form, "fact_id")
        status, result = await self._run(call, REJECT, {"fact_id": fact_id,
                                                        "reason": _one(form, "reason")})
        said = (f"rejected {result.get('rejected')}: {result.get('status')}" if status == 200
                else f"rejecting fact:{fact_id} failed: {_said(result)}")
        return self._back(request, "/review", said, status == 200)

    @_signed_in
    async def bulk(self, request: Request, call: Call) -> Response:
        form = await self._form(request)
        ids = [i.strip() for i in form.get("fact_id", []) if i.strip()]
        action, reason = _one(form, "action"), _one(form, "reason")
        if action not in ("approve", "reject") or not ids:
            return self._back(request, "/review", "select items, then Approve selected or "
                              "Reject selected", False)
        done, failed = [], []
        for fid in ids:
            if action == "approve":
                status, result = await self._run(call, APPROVE, {"fact_id": fid})
            else:
                status, result = await self._run(call, REJECT, {"fact_id": fid,
                                                                "reason": reason})
            if status == 200:
                done.append(f"fact:{fid} ({result.get('status')})")
            else:
                failed.append(f"fact:{fid}: {_said(result)}")
        verb = "approved" if action == "approve" else "rejected"
        said = f"{verb} {len(done)}" + (f": {', '.join(done)}" if done else "")
        if failed:
            said += f"; {len(failed)} failed: {'; '.join(failed)}"
        return self._back(request, "/review", said, not failed)

    # -- facts ------------------------------------------------------------------------
    @_signed_in
    async def facts(self, request: Request, call: Call) -> Response:
        subject = request.query_params.get("subject", "").strip() or None
        status_q = request.query_params.get("status", "").strip() or None
        if subject is not None:
            status, result = await self._run(call, BY_SUBJECT, {"subject": subject,
                                                                "status": status_q})
        else:
            status, result = await self._run(call, LIST_FACTS, {"status": status_q,
                                                                "limit": 200})
        frame = await self._frame(request, call)
        return _html(pages.facts_page(frame, subject, status_q, result), status)

    @_signed_in
    async def timeline(self, request: Request, call: Call) -> Response:
        fact_id = str(request.path_params["fact_id"]).removeprefix("fact:")
        status, result = await self._run(call, HISTORY, {"fact_id": fact_id})
        frame = await self._frame(request, call)
        return _html(pages.timeline_page(frame, fact_id, result), status)

    @_signed_in
    async def undo(self, request: Request, call: Call) -> Response:
        fact_id = str(request.path_params["fact_id"]).removeprefix("fact:")
        form = await self._form(request)
        status, result = await self._run(call, UNDO, {"fact_id": fact_id,
                                                      "reason": _one(form, "reason")})
        if status != 200:
            return self._back(request, f"/facts/{quote(fact_id, safe='')}",
                              f"undoing the supersession by fact:{fact_id} failed: "
                              f"{_said(result)}", False)
        restored = str(result.get("restored", "")).removeprefix("fact:")
        return self._back(request, f"/facts/{quote(restored, safe='')}",
                          f"undone: {result.get('undone')} retired; {result.get('restored')} "
                          f"is {result.get('status')} again", True)

    # -- episodes, context ------------------------------------------------------------
    @_signed_in
    async def episodes(self, request: Request, call: Call) -> Response:
        filters = {k: request.query_params.get(k, "").strip() or None
                   for k in ("thread", "since", "until")}
        status, result = await self._run(call, BROWSE, {**filters, "limit": 500})
        frame = await self._frame(request, call)
        return _html(pages.episodes_page(frame, filters, result), status)

    @_signed_in
    async def context(self, request: Request, call: Call) -> Response:
        task = request.query_params.get("task", "").strip() or None
        query = request.query_params.get("query", "").strip() or None
        body: dict[str, Any] = {"task": task, "query": query}
        budget = request.query_params.get("budget_tokens", "").strip()
        if budget:
            body["budget_tokens"] = budget
        status, result = await self._run(call, CONTEXT, body)
        frame = await self._frame(request, call)
        return _html(pages.context_page(frame, task, query, result), status)

    # -- forget -----------------------------------------------------------------------
    @_signed_in
    async def forget(self, request: Request, call: Call) -> Response:
        if request.method == "POST":
            return await self._delete(request, call)
        match = request.query_params.get("match", "").strip() or None
        subject = request.query_params.get("subject", "").strip() or None
        frame = await self._frame(request, call)
        status, preview = 200, None
        if match is not None or subject is not None:
            status, preview = await self._run(call, FORGET_PREVIEW, {"match": match,
                                                                     "subject": subject})
        return _html(pages.forget_page(frame, match, subject, preview), status)

    async def _delete(self, request: Request, call: Call) -> Response:
        form = await self._form(request)
        match, subject = _one(form, "match"), _one(form, "subject")
        status, result = await self._run(call, FORGET, {"match": match, "subject": subject,
                                                        "dry_run": False})
        if status == 200:
            counts = ", ".join(f"{k}: {v}" for k, v in (result.get("counts") or {}).items())
            return self._back(request, "/forget", f"forgot {result.get('total')} records"
                              + (f" ({counts})" if counts else ""), True)
        preview = None
        if match is not None or subject is not None:
            _, preview = await self._run(call, FORGET_PREVIEW, {"match": match,
                                                                "subject": subject})
        frame = await self._frame(request, call)
        return _html(pages.forget_page(frame, match, subject, preview, result), status)


def inspector_routes(service: Service) -> list[Route]:
    """The inspector's routes over ``service`` (see the module docstring)."""
    from starlette.routing import Route

    missing = [p for p in USED if p not in OPERATIONS_BY_PATH]
    if missing:
        raise RuntimeError(f"the inspector needs operations that do not exist: {missing}")
    ins = Inspector(service)
    get, post = ["GET"], ["POST"]
    return [
        Route("/", ins.signin, methods=get),
        Route("/login", ins.login, methods=post),
        Route("/logout", ins.logout, methods=post),
        Route("/review", ins.review, methods=get),
        Route("/review/approve", ins.approve, methods=post),
        Route("/review/reject", ins.reject, methods=post),
        Route("/review/bulk", ins.bulk, methods=post),
        Route("/facts", ins.facts, methods=get),
        Route("/facts/{fact_id}", ins.timeline, methods=get),
        Route("/facts/{fact_id}/undo", ins.undo, methods=post),
        Route("/episodes", ins.episodes, methods=get),
        Route("/context", ins.context, methods=get),
        Route("/forget", ins.forget, methods=["GET", "POST"]),
    ]


__all__ = ["SIGN_IN_ROLE", "Inspector", "form_token", "inspector_routes"]
