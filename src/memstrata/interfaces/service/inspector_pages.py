"""The HTML of the inspector's pages (:mod:`memstrata.interfaces.service.inspector`).

Contract:
- Pure functions from operation results (the dicts the REST API answers) to HTML text;
  they never call the library, so a page can show only what an operation returned for the
  request's key.
- Every value that comes from the store, the request or an error is escaped with
  :func:`html.escape` (quotes included) by :func:`e`, attributes and URLs too; URLs are
  built with :func:`urllib.parse.urlencode`. No page carries a script.
- Elements tests and people look for have stable ids, classes and ``data-ref`` attributes:
  ``#flash``, ``#error``, ``#whoami``, ``li.item[data-ref]`` (review; ``.flagged`` when
  quarantined; each detail in ``dd.f-<label>``, e.g. ``dd.f-why``),
  ``tr.fact[data-ref]`` (facts), ``li.version[data-ref][data-status]`` (timeline),
  ``tr.episode[data-ref]``, ``#context-text`` and ``tr.entry[data-ref]`` (context),
  ``#forget-counts tr[data-layer]`` and ``#forget-total`` (forget).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

#: The query parameters that choose the scope, as the X-Memstrata-* headers do.
SCOPE_PARAMS = ("user", "project", "agent")

NAV = (("review", "/review", "Review"), ("facts", "/facts", "Facts"),
       ("episodes", "/episodes", "Episodes"), ("context", "/context", "Context"),
       ("forget", "/forget", "Forget"))

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#1d2b3a;color:#fff;padding:.5em 1em;display:flex;gap:1em;align-items:center;
flex-wrap:wrap}
header a{color:#cfe3ff;text-decoration:none;padding:.2em .5em;border-radius:4px}
header a.active{background:#34506e;color:#fff}
header .brand{font-weight:700;margin-right:1em}
#whoami{margin-left:auto;font-size:12px;color:#d8dee6}
header form{display:inline;margin:0}
main{padding:1em 1.5em;max-width:1100px}
h1{font-size:20px;margin:.3em 0 .6em}
.flash,.error{padding:.6em .9em;border-radius:5px;margin:.6em 0}
.flash.ok{background:#e3f4e6;border:1px solid #9fd3a8}
.flash.error,.error{background:#fdeaea;border:1px solid #e6a1a1}
.hint{color:#5b6570;font-size:13px}
ul.items,ul.timeline{list-style:none;padding:0}
li.item,li.version{background:#fff;border:1px solid #d9dee4;border-radius:6px;padding:.7em 1em;
margin:.6em 0}
li.version.current{border-color:#4d8b5a;box-shadow:0 0 0 1px #4d8b5a}
.claim{font-size:15px;font-weight:600;margin:.2em 0}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:.1em 1em;margin:.4em 0;
font-size:13px}
dl.meta dt{color:#5b6570}
dl.meta dd{margin:0}
.actions{display:flex;gap:1em;flex-wrap:wrap;align-items:flex-end;margin-top:.5em}
.actions form{margin:0}
textarea{width:28em;height:3.2em}
table{border-collapse:collapse;background:#fff;width:100%;margin:.5em 0}
th,td{border:1px solid #d9dee4;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#eef1f4}
tr.excluded{color:#7a838c}
pre{background:#fff;border:1px solid #d9dee4;padding:.8em;white-space:pre-wrap}
.status{font-size:12px;padding:0 .4em;border-radius:3px;background:#eef1f4}
.status.active{background:#dff0e2}
.status.pending_review{background:#fff3d6}
.status.superseded,.status.retired,.status.rejected,.status.expired{background:#eceff2;
color:#5b6570}
form.filters{display:flex;gap:.8em;flex-wrap:wrap;align-items:flex-end;margin:.4em 0 1em}
label{display:flex;flex-direction:column;font-size:12px;color:#5b6570}
label.pick{flex-direction:row;gap:.4em;float:right}
li.item.flagged{border-left:4px solid #c0392b}
.flagged .f-flags{color:#a02a1e;font-weight:600}
"""


def e(value: Any) -> str:
    """``value`` as escaped HTML text (None: empty)."""
    return escape("" if value is None else str(value), quote=True)


def when(value: Any) -> str:
    """An ISO timestamp as a short ``<time>`` element (the full value in its title)."""
    if not value:
        return ""
    text = str(value)
    return f'<time datetime="{e(text)}" title="{e(text)}">{e(text[:16].replace("T", " "))}</time>'


@dataclass(frozen=True)
class Frame:
    """What every signed-in page shares: the key's whoami, the chosen scope, a message."""

    who: Mapping[str, Any] | None = None
    scope_q: Mapping[str, str] = field(default_factory=dict)
    flash: str | None = None
    level: str = "ok"
    #: The session's form token, carried by every form that posts (``csrf``).
    csrf: str = ""

    def href(self, path: str, **params: Any) -> str:
        """``path`` with the scope parameters and ``params`` (empty ones left out), escaped
        for an attribute."""
        query = {**self.scope_q, **{k: str(v) for k, v in params.items()
                                    if v is not None and v != ""}}
        return e(path + ("?" + urlencode(query) if query else ""))


def problem(result: Mapping[str, Any], element_id: str = "error") -> str:
    """An error result (``{"error", "hint", "type"}``) as a box."""
    hint = result.get("hint")
    return (f'<div class="error" id="{e(element_id)}" data-type="{e(result.get("type"))}">'
            f'<p class="msg">{e(result.get("error"))}</p>'
            + (f'<p class="hint">Hint: {e(hint)}</p>' if hint else "") + "</div>")


def _whoami(who: Mapping[str, Any] | None) -> str:
    if not who or "error" in who:
        return '<span id="whoami">not signed in</span>'
    scope = who.get("scope") or {}
    parts = [f"{k}={v}" for k, v in scope.items() if v is not None and k != "tenant"]
    principal = f" · principal {e(who.get('principal'))}" if who.get("principal") else ""
    return (f'<span id="whoami" data-tenant="{e(who.get("tenant"))}" '
            f'data-role="{e(who.get("role"))}">tenant {e(who.get("tenant"))} · role '
            f'{e(who.get("role"))}{principal} · scope {e(", ".join(parts) or "tenant-wide")}'
            "</span>")


def layout(title: str, body: str, frame: Frame | None = None, active: str = "") -> str:
    """The whole document: head, the nav bar (when signed in), the flash, the body."""
    nav = ""
    if frame is not None:
        links = "".join(
            f'<a href="{frame.href(path)}" id="nav-{name}"'
            + (' class="active" aria-current="page"' if name == active else "")
            + f">{e(label)}</a>" for name, path, label in NAV)
        nav = (f'<header><span class="brand">memstrata inspector</span>{links}'
               f"{_whoami(frame.who)}"
               f'<form method="post" action="/logout">{_token(frame)}'
               '<button id="signout" type="submit">Sign out</button></form></header>')
    flash = ""
    if frame is not None and frame.flash:
        level = "error" if frame.level == "error" else "ok"
        flash = f'<div id="flash" class="flash {level}" role="status">{e(frame.flash)}</div>'
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{e(title)} · memstrata</title><style>{CSS}</style></head>"
            f"<body>{nav}<main><h1>{e(title)}</h1>{flash}{body}</main></body></html>")


def _meta(pairs: Iterable[tuple[str, str]]) -> str:
    """A definition list of (label, HTML) pairs; empty values left out."""
    rows = "".join(f"<dt>{e(k)}</dt><dd class=\"f-{e(k.lower().replace(' ', '-'))}\">{v}</dd>"
                   for k, v in pairs if v)
    return f'<dl class="meta">{rows}</dl>'


def _status(value: Any) -> str:
    return f'<span class="status {e(value)}">{e(value)}</span>'


def _subject_link(frame: Frame, item: Mapping[str, Any]) -> str:
    return (f'<a class="subject" href="{frame.href("/facts", subject=item.get("subject"))}">'
            f'{e(item.get("subject"))}</a> / {e(item.get("attribute"))}')


# -- pages --------------------------------------------------------------------------

def signin_page(error: Mapping[str, Any] | None = None) -> str:
    """The sign-in form: paste an API key (the scope fields are optional)."""
    body = (problem(error) if error else "") + (
        '<form id="signin" method="post" action="/login">'
        '<p><label>API key<input id="key" name="key" type="password" autocomplete="off" '
        'size="60" required placeholder="msk...."></label></p>'
        '<p class="filters"><label>User (optional)<input id="signin-user" name="user">'
        '</label> <label>Project (optional)<input id="signin-project" name="project">'
        '</label></p><p><button id="signin-submit" type="submit">Sign in</button></p></form>'
        '<p class="hint">The key is kept in an HttpOnly, SameSite=Strict cookie of this '
        "browser session; every page acts with the key's role and scope, as the API does.</p>")
    return layout("Sign in", body)


def review_page(frame: Frame, result: Mapping[str, Any]) -> str:
    """The review queue with per-item and bulk actions."""
    if "error" in result:
        return layout("Review queue", problem(result), frame, "review")
    items = list(result.get("items") or [])
    if not items:
        return layout("Review queue", '<p id="empty">Nothing waits for review.</p>', frame,
                      "review")
    out = []
    for it in items:
        ref, fid = str(it.get("ref")), str(it.get("id"))
        meta = _meta([
            ("Kind", e(it.get("kind"))), ("Slot", _subject_link(frame, it)),
            ("Tier", e(it.get("tier"))), ("Actor", e(it.get("actor"))),
            ("Source", e(it.get("source"))), ("Evidence", e(it.get("evidence"))),
            ("Sensitivity", e(it.get("sensitivity"))), ("Created", when(it.get("created_at"))),
            ("Flags", e(", ".join(it.get("flags") or []))), ("Why", e(it.get("why")))])
        flagged = any(str(f).startswith(("injection", "quarantined"))
                      for f in it.get("flags") or [])
        out.append(
            f'<li class="item{" flagged" if flagged else ""}" data-ref="{e(ref)}" '
            f'data-id="{e(fid)}">'
            f'<label class="pick"><input type="checkbox" class="select" form="bulk" '
            f'name="fact_id" value="{e(fid)}"> select</label>'
            f'<p class="claim">{e(it.get("claim"))}</p>{meta}<div class="actions">'
            f'<form class="approve" method="post" action="{frame.href("/review/approve")}">'
            f'{_token(frame)}<input type="hidden" name="fact_id" value="{e(fid)}">'
            '<button type="submit" class="approve">Approve</button></form>'
            f'<form class="edit" method="post" action="{frame.href("/review/approve")}">'
            f'{_token(frame)}<input type="hidden" name="fact_id" value="{e(fid)}">'
            f'<input type="hidden" name="original" value="{e(it.get("claim"))}">'
            f'<textarea name="claim" class="claim-edit">{e(it.get("claim"))}</textarea>'
            '<button type="submit" class="edit-approve">Edit and approve</button></form>'
            f'<form class="reject" method="post" action="{frame.href("/review/reject")}">'
            f'{_token(frame)}<input type="hidden" name="fact_id" value="{e(fid)}">'
            '<input name="reason" class="reason" placeholder="why (recorded)" required>'
            '<button type="submit" class="reject">Reject</button></form></div></li>')
    bulk = (f'<form id="bulk" method="post" action="{frame.href("/review/bulk")}" '
            f'class="filters">{_token(frame)}<button type="submit" name="action" '
            'value="approve" '
            'id="approve-selected">Approve selected</button>'
            '<input name="reason" id="bulk-reason" placeholder="reason for rejecting">'
            '<button type="submit" name="action" value="reject" id="reject-selected">'
            "Reject selected</button></form>")
    body = (f'<p><span id="count">{len(items)}</span> waiting for a person.</p>{bulk}'
            f'<ul class="items" id="items">{"".join(out)}</ul>')
    return layout("Review queue", body, frame, "review")


def facts_page(frame: Frame, subject: str | None, status: str | None,
               result: Mapping[str, Any]) -> str:
    """Facts about a subject (or all facts of the scope), any status."""
    statuses = ("", "active", "pending_review", "superseded", "retired", "expired", "rejected")
    options = "".join(f'<option value="{s}"' + (" selected" if s == (status or "") else "")
                      + f">{s or 'any status'}</option>" for s in statuses)
    form = ('<form class="filters" method="get" action="/facts">'
            + _scope_inputs(frame) +
            f'<label>Subject<input name="subject" id="subject" value="{e(subject)}"></label>'
            f'<label>Status<select name="status">{options}</select></label>'
            '<button type="submit">Show</button></form>')
    title = f"Facts about {subject}" if subject else "Facts"
    if "error" in result:
        return layout(title, form + problem(result), frame, "facts")
    rows = "".join(
        f'<tr class="fact" data-ref="{e(f.get("ref"))}" data-status="{e(f.get("status"))}">'
        f'<td class="claim">{e(f.get("claim"))}</td><td>{_subject_link(frame, f)}</td>'
        f'<td>{_status(f.get("status"))}</td><td>{e(f.get("tier"))}</td>'
        f'<td>{e(f.get("actor"))} via {e(f.get("source"))}</td>'
        f'<td>{when(f.get("created_at"))}</td>'
        f'<td><a class="timeline" href="{frame.href("/facts/" + quote(str(f.get("id")), safe=""))}"'
        ">timeline</a></td></tr>" for f in result.get("facts") or [])
    table = _table("facts", ("Claim", "Subject / attribute", "Status", "Tier", "Said by",
                             "Created", ""), rows, "No facts.")
    return layout(title, form + table, frame, "facts")


def timeline_page(frame: Frame, fact_id: str, result: Mapping[str, Any]) -> str:
    """A fact's supersession timeline, oldest first, with the undo form on the current one."""
    title = f"Timeline of fact:{fact_id}"
    if "error" in result:
        return layout(title, problem(result), frame, "facts")
    out = []
    for v in result.get("versions") or []:
        current = v.get("status") == "active"
        meta = _meta([
            ("Status", _status(v.get("status"))), ("Slot", _subject_link(frame, v)),
            ("Said by", f'{e(v.get("actor"))} via {e(v.get("source"))}'),
            ("Created", when(v.get("created_at"))), ("Valid from", when(v.get("since"))),
            ("Valid to", when(v.get("valid_to"))),
            ("Supersedes", e(f"fact:{v['supersedes']}" if v.get("supersedes") else "")),
            ("Replaced by", e(f"fact:{v['superseded_by']}" if v.get("superseded_by") else "")),
            ("Reason", e(v.get("reason"))), ("Reviewer", e(v.get("reviewer"))),
            ("Evidence", e(v.get("evidence")))])
        undo = ""
        if current and v.get("supersedes"):
            action = frame.href(f"/facts/{quote(str(v.get('id')), safe='')}/undo")
            undo = (f'<form class="undo" method="post" action="{action}">{_token(frame)}'
                    '<input name="reason" class="reason" required placeholder="why undo">'
                    '<button type="submit" class="undo">Undo supersession</button></form>')
        out.append(f'<li class="version{" current" if current else ""}" '
                   f'data-ref="{e(v.get("ref"))}" data-status="{e(v.get("status"))}">'
                   f'<p class="claim">{e(v.get("claim"))}</p>{meta}{undo}</li>')
    body = (f'<ul class="timeline" id="timeline">{"".join(out)}</ul>' if out
            else '<p id="empty">No versions.</p>')
    return layout(title, body, frame, "facts")


def episodes_page(frame: Frame, filters: Mapping[str, str | None],
                  result: Mapping[str, Any]) -> str:
    """Episodes by thread and date, in time order."""
    inputs = "".join(
        f'<label>{e(label)}<input name="{name}" id="{name}" value="{e(filters.get(name))}"'
        f' placeholder="{e(ph)}"></label>'
        for name, label, ph in (("thread", "Thread", "a session, run or ticket"),
                                ("since", "Since", "2026-08-01"),
                                ("until", "Until", "2026-08-31")))
    form = (f'<form class="filters" method="get" action="/episodes">{_scope_inputs(frame)}'
            f'{inputs}<button type="submit">Show</button></form>')
    if "error" in result:
        return layout("Episodes", form + problem(result), frame, "episodes")
    rows = "".join(
        f'<tr class="episode" data-ref="{e(ep.get("ref"))}"><td>{when(ep.get("observed_at"))}'
        f'</td><td class="thread">{e(ep.get("thread"))}</td><td>{e(ep.get("event"))}</td>'
        f'<td>{e((ep.get("provenance") or {}).get("actor"))} via '
        f'{e((ep.get("provenance") or {}).get("source"))}</td>'
        f'<td class="text">{e(ep.get("text"))}</td><td>{e(ep.get("outcome"))}</td></tr>'
        for ep in result.get("episodes") or [])
    table = _table("episodes", ("Observed", "Thread", "Event", "Said by", "Text", "Outcome"),
                   rows, "No episodes.")
    return layout("Episodes", form + table, frame, "episodes")


def context_page(frame: Frame, task: str | None, query: str | None,
                 result: Mapping[str, Any]) -> str:
    """The assembled context and its manifest."""
    form = (f'<form class="filters" method="get" action="/context">{_scope_inputs(frame)}'
            f'<label>Task<input name="task" id="task" value="{e(task)}"></label>'
            f'<label>Query<input name="query" id="query" size="40" value="{e(query)}"></label>'
            '<button type="submit">Assemble</button></form>'
            '<p class="hint">What the agent sees first, and why each item entered.</p>')
    if "error" in result:
        return layout("Context", form + problem(result), frame, "context")
    rows = "".join(
        f'<tr class="entry {"included" if m.get("included") else "excluded"}" '
        f'data-ref="{e(m.get("ref"))}" data-included="{"true" if m.get("included") else "false"}"'
        f'><td>{e(m.get("ref"))}</td><td>{e(m.get("layer"))}</td>'
        f'<td>{"yes" if m.get("included") else "no"}</td><td>{e(m.get("reason"))}</td>'
        f'<td>{e(m.get("tokens"))}</td></tr>' for m in result.get("manifest") or [])
    body = (f'{form}<p id="tokens">{e(result.get("tokens"))} of '
            f'{e(result.get("budget_tokens"))} tokens</p>'
            f'<pre id="context-text">{e(result.get("text"))}</pre><h2>Manifest</h2>'
            + _table("manifest", ("Ref", "Layer", "Included", "Reason", "Tokens"), rows))
    return layout("Context", body, frame, "context")


def forget_page(frame: Frame, match: str | None, subject: str | None,
                preview: Mapping[str, Any] | None,
                error: Mapping[str, Any] | None = None) -> str:
    """The forget form; with a preview, its counts and the Delete button."""
    form = (f'<form class="filters" id="forget-form" method="get" action="/forget">'
            f'{_scope_inputs(frame)}'
            f'<label>Text containing<input name="match" id="match" value="{e(match)}"></label>'
            f'<label>Subject<input name="subject" id="forget-subject" value="{e(subject)}">'
            '</label><button type="submit" id="preview">Preview</button></form>')
    body = form + (problem(error, "delete-error") if error else "")
    if preview is not None and "error" in preview:
        body += problem(preview)
    elif preview is not None:
        counts = preview.get("counts") or {}
        rows = "".join(f'<tr data-layer="{e(layer)}"><td>{e(layer)}</td>'
                       f'<td class="count">{e(n)}</td></tr>' for layer, n in counts.items())
        hidden = "".join(f'<input type="hidden" name="{name}" value="{e(value)}">'
                         for name, value in (("match", match), ("subject", subject)) if value)
        body += ('<h2>Would be deleted</h2>' + _table("forget-counts", ("Layer", "Records"), rows)
                 + f'<p>Total: <span id="forget-total">{e(preview.get("total"))}</span></p>'
                 f'<form method="post" id="delete-form" action="{frame.href("/forget")}">'
                 f'{_token(frame)}{hidden}<button type="submit" id="delete">Delete</button> '
                 '<span class="hint">deletes for real, everywhere the content lives '
                 "(needs an admin key)</span></form>")
    return layout("Forget", body, frame, "forget")


def _table(table_id: str, headers: Iterable[str], rows: str, empty: str | None = None) -> str:
    """A table of pre-rendered ``<tr>`` rows under escaped headers; with ``empty``, the
    note shown instead when there are no rows."""
    if not rows and empty is not None:
        return f'<p id="empty">{e(empty)}</p>'
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    return (f'<table id="{e(table_id)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def _token(frame: Frame) -> str:
    """The hidden ``csrf`` input of a form that posts (the session's form token)."""
    return f'<input type="hidden" name="csrf" value="{e(frame.csrf)}">' if frame.csrf else ""


def _scope_inputs(frame: Frame) -> str:
    """Hidden inputs carrying the chosen scope through a GET form."""
    return "".join(f'<input type="hidden" name="{e(k)}" value="{e(v)}">'
                   for k, v in frame.scope_q.items())


__all__ = ["SCOPE_PARAMS", "Frame", "context_page", "e", "episodes_page", "facts_page",
           "forget_page", "layout", "problem", "review_page", "signin_page", "timeline_page"]
