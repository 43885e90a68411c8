"""MCP sessions of ``memstrata serve``, over real HTTP with the SDK's client, on every backend.

Every MCP request acts in the scope its own headers name, within its key's limits: a
session of a multi-user key as bob never reads alice's episodes or scratch and writes as
bob; an admin key's tenant-wide session does not make a later session naming alice
tenant-wide; a request naming another user mid-session acts (or is refused) as that user.
Each session has its own scratchpad, discarded when the client ends the session. A request
of the session-less protocol era is refused with the version error the client falls back
on. The idle bookkeeping of sessions is checked with a clock of its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from conftest import LiveServer
from memstrata import Scope
from memstrata.interfaces.service.core import MAX_JSON_DEPTH
from memstrata.interfaces.service.mcp_http import IDLE_GRACE_S, SWEEP_EVERY_S, SessionActivity

ALICE = Scope(tenant="acme", user="alice")
BOB = Scope(tenant="acme", user="bob")
TENANT = Scope(tenant="acme")

Session = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


async def _session(server: LiveServer, token: str, user: str | None,
                   body: Callable[[Session, httpx.AsyncClient], Awaitable[Any]]) -> Any:
    """Run ``body`` in one MCP session of ``token`` (naming ``user``, if any); ``body`` gets
    a tool caller and the session's HTTP client (whose headers it may change)."""
    headers = {"Authorization": f"Bearer {token}"}
    if user is not None:
        headers["X-Memstrata-User"] = user
    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(f"{server.url}/mcp", http_client=http),
                            read_timeout_seconds=60) as client:
        async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
            return dict((await client.call_tool(name, args)).structured_content or {})

        return await body(call, http)


def _in_session(server: LiveServer, token: str, user: str | None,
                calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    async def body(call: Session, http: httpx.AsyncClient) -> list[dict[str, Any]]:
        return [await call(name, args) for name, args in calls]

    return list(asyncio.run(_session(server, token, user, body)))


def _episode_scope(server: LiveServer, ref: str, scope: Scope) -> Scope:
    """The scope of the episode ``ref`` (read in ``scope``, where it must apply)."""
    return server.mem.episodes.get(ref.removeprefix("episode:"), scope).scope


def _run_of(server: LiveServer, ref: str, scope: Scope) -> str:
    """The run an episode was logged by (its default thread is ``run:RUN_ID``)."""
    thread = server.mem.episodes.get(ref.removeprefix("episode:"), scope).thread
    assert thread is not None and thread.startswith("run:")
    return thread.removeprefix("run:")


def _scratch(server: LiveServer, scope: Scope, run_id: str, key: str) -> str | None:
    return server.mem.scratch_store.get(scope, run_id, key, server.mem.clock.now())


def _search(server: LiveServer, token: str, user: str | None, query: str) -> list[str]:
    with server.client(token, **({"user": user} if user else {})) as http:
        res = http.post("/v1/episodes/search", json={"query": query})
        assert res.status_code == 200, res.text
        return [h["excerpt"] for h in res.json()["hits"]]


def test_sessions_of_a_multi_user_key_act_in_their_own_users_scope(
        served: LiveServer) -> None:
    team = served.key("acme", role="agent", users=["alice", "bob"])
    [logged, _] = _in_session(served, team, "alice", [
        ("log_episode", {"text": "Alice's private diary: quokka therapy notes",
                         "source": "chat:a"}),
        ("scratch_write", {"key": "draft", "value": "alice's private scratch"}),
    ])
    [history, scratch, bob_logged, _] = _in_session(served, team, "bob", [
        ("search_history", {"query": "quokka therapy diary"}),
        ("scratch_read", {"key": "draft"}),
        ("log_episode", {"text": "Bob's note: the quokka enclosure is closed",
                         "source": "chat:b"}),
        ("save_checkpoint", {"task": "zoo", "objective": "bob's zoo visit"}),
    ])
    assert history["hits"] == []
    assert any("private diary" in e for e in _search(served, team, "alice",
                                                      "quokka therapy diary"))
    assert scratch == {"key": "draft", "found": False, "value": None}
    assert _episode_scope(served, logged["logged"], ALICE) == ALICE
    assert _episode_scope(served, bob_logged["logged"], BOB) == BOB
    assert served.mem.checkpoints.current(BOB, "zoo") is not None
    assert served.mem.checkpoints.current(ALICE, "zoo") is None
    assert all("Bob" not in e for e in _search(served, team, "alice", "quokka enclosure"))
    assert any("Bob's note" in e for e in _search(served, team, "bob", "quokka enclosure"))


def test_a_tenant_wide_session_does_not_make_a_later_users_session_tenant_wide(
        served: LiveServer) -> None:
    admin = served.key("acme", role="admin")
    [wide, _] = _in_session(served, admin, None, [
        ("log_episode", {"text": "Tenant notice: the office moves in May", "source": "hr:1"}),
        ("scratch_write", {"key": "draft", "value": "tenant-wide scratch"}),
    ])
    [alice_logged, scratch] = _in_session(served, admin, "alice", [
        ("log_episode", {"text": "Alice asked for a standing desk", "source": "chat:a"}),
        ("scratch_read", {"key": "draft"}),
    ])
    assert _episode_scope(served, wide["logged"], TENANT) == TENANT
    assert _episode_scope(served, alice_logged["logged"], ALICE) == ALICE
    assert scratch["found"] is False
    assert _search(served, admin, None, "standing desk") == []
    assert any("standing desk" in e for e in _search(served, admin, "alice", "standing desk"))


def test_every_request_of_a_session_acts_in_the_scope_its_headers_name(
        served: LiveServer) -> None:
    team = served.key("acme", role="agent", users=["alice", "bob"])

    async def body(call: Session, http: httpx.AsyncClient) -> None:
        alice_ep = await call("log_episode", {"text": "Alice's secret plan: a surprise party",
                                              "source": "chat:a"})
        await call("scratch_write", {"key": "draft", "value": "alice's"})
        http.headers["X-Memstrata-User"] = "bob"
        assert (await call("scratch_read", {"key": "draft"}))["found"] is False
        hits = (await call("search_history", {"query": "surprise party plan"}))["hits"]
        assert hits == []
        bob_ep = await call("log_episode", {"text": "Bob booked the venue", "source": "chat:b"})
        assert _episode_scope(served, bob_ep["logged"], BOB) == BOB
        http.headers["X-Memstrata-User"] = "carol"  # not one of the key's users
        with pytest.raises(MCPError):
            await call("scratch_read", {"key": "draft"})
        http.headers["X-Memstrata-User"] = "alice"
        assert (await call("scratch_read", {"key": "draft"}))["value"] == "alice's"
        mine = (await call("search_history", {"query": "surprise party plan"}))["hits"]
        assert any("secret plan" in h["excerpt"] for h in mine)
        assert _episode_scope(served, alice_ep["logged"], ALICE) == ALICE

    asyncio.run(_session(served, team, "alice", body))


def test_each_session_of_one_key_has_its_own_scratchpad_discarded_at_its_end(
        served: LiveServer) -> None:
    token = served.key("acme", role="agent", users=["alice"])
    seen: dict[str, Any] = {}

    async def second(call: Session, http: httpx.AsyncClient) -> None:
        seen["read"] = await call("scratch_read", {"key": "draft"})
        await call("scratch_write", {"key": "draft", "value": "second session's"})

    async def first(call: Session, http: httpx.AsyncClient) -> None:
        await call("scratch_write", {"key": "draft", "value": "first session's"})
        seen["run"] = _run_of(served, (await call("log_episode", {
            "text": "first session started", "source": "run:1"}))["logged"], ALICE)
        await _session(served, token, None, second)  # while the first is still open
        seen["own"] = await call("scratch_read", {"key": "draft"})
        assert _scratch(served, ALICE, seen["run"], "draft") is not None

    asyncio.run(_session(served, token, None, first))
    assert seen["read"]["found"] is False
    assert seen["own"]["value"] == "first session's"
    deadline = time.monotonic() + 10
    while _scratch(served, ALICE, seen["run"], "draft") is not None:
        assert time.monotonic() < deadline, "the ended session's scratchpad was kept"
        time.sleep(0.05)


def test_a_request_of_the_sessionless_protocol_era_is_refused_with_the_version_error(
        served: LiveServer) -> None:
    token = served.key("acme", role="agent", users=["alice"])
    res = httpx.post(f"{served.url}/mcp", json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "scratch_list", "arguments": {}}},
        headers={"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2026-07-28",
                 "Accept": "application/json, text/event-stream"})
    assert res.status_code == 400
    error = res.json()["error"]
    assert error["code"] == -32022 and error["data"]["requested"] == "2026-07-28"
    assert "2025-11-25" in error["data"]["supported"]
    unauthenticated = httpx.post(f"{served.url}/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                             "method": "tools/list"},
                                 headers={"MCP-Protocol-Version": "2026-07-28"})
    assert unauthenticated.status_code == 401


def test_the_deeply_nested_body_gets_the_typed_error(served: LiveServer) -> None:
    token = served.key("acme", role="agent", users=["alice"])
    with served.client(token) as http:
        for depth in (MAX_JSON_DEPTH, 1000, 5000):  # with the object around it: one deeper
            body = b'{"query": "x", "k": ' + b"[" * depth + b"]" * depth + b"}"
            res = http.post("/v1/recall", content=body,
                            headers={"Content-Type": "application/json"})
            assert res.status_code == 422, (depth, res.text)
            assert res.headers["content-type"] == "application/json"
            problem = res.json()
            assert set(problem) == {"error", "hint", "type", "request_id"}
            assert problem["type"] == "ValidationError" and "nests" in problem["error"]
        res = http.post("/v1/recall", content=b'{"query": "x", "k": ' + b"9" * 5000 + b"}")
        assert res.status_code == 422 and res.json()["type"] == "ValidationError"
        inner = MAX_JSON_DEPTH - 1  # with the object around it: at the limit
        shallow = b'{"query": "x", "k": ' + b"[" * inner + b"]" * inner + b"}"
        res = http.post("/v1/recall", content=shallow)  # within the limit: the model decides
        assert res.status_code == 422 and "invalid arguments" in res.json()["error"]


def test_sessions_idle_past_the_timeout_are_ended_once_nothing_is_in_flight() -> None:
    now = [1000.0]
    activity = SessionActivity(idle_after=60.0, clock=lambda: now[0])
    activity.begin("a")
    activity.begin("b")
    assert activity.end("b", over=False) is False
    now[0] += 60.0 + IDLE_GRACE_S + SWEEP_EVERY_S + 1
    assert activity.idle() == ["b"]  # "a" still has a request in flight
    assert activity.idle() == []  # swept at most once per SWEEP_EVERY_S
    assert activity.end("a", over=False) is False
    now[0] += 60.0 + IDLE_GRACE_S + SWEEP_EVERY_S + 1
    assert activity.idle() == ["a"]
    activity.begin("c")  # the session's event stream
    activity.begin("c")  # its DELETE
    assert activity.end("c", over=True) is False  # the stream is still open
    assert activity.end("c", over=False) is True  # and now it is closed
    assert activity.end("c", over=False) is False
    assert SessionActivity(idle_after=None).idle() == []
