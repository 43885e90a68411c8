"""The REST API and the MCP endpoint of ``memstrata serve``, over real HTTP, on every backend.

Every operation is called with every role; keys of one tenant never read or change another
tenant's records (REST and MCP); the scope comes from the key, never from the body;
revoked keys, oversized bodies and keys over their rate are refused; the request log
carries ids and statuses, never content.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import LiveServer
from memstrata import Scope
from memstrata.interfaces.service.keys import ROLES, role_at_least
from memstrata.interfaces.service.operations import OPERATIONS

ALICE = Scope(tenant="acme", user="alice")
PREF = {"kind": "preference", "subject": "alice", "attribute": "drink", "source": "chat:1"}


def _seed(server: LiveServer) -> dict[str, str]:
    """Records of alice in tenant acme: a current fact superseding another, a pending
    agent claim, an episode, a checkpoint and a procedure."""
    mem = server.mem
    old = mem.facts.propose(ALICE, claim="Alice drinks coffee", actor="user", **PREF)
    new = mem.facts.propose(ALICE, claim="Alice drinks green tea now", actor="user", **PREF)
    pending = mem.facts.propose(ALICE, claim="Alice uses vim keybindings", kind="preference",
                                subject="alice", attribute="editor_keys", actor="agent",
                                source="chat:2")
    ep = mem.episodes.append(ALICE, text="The deploy of the billing service failed",
                             event="deploy_failed", actor="tool", source="ci:812")
    mem.checkpoints.save(ALICE, "release", objective="ship the billing fix")
    mem.checkpoints.save(ALICE, "release", next_action="collect the PRs")
    mem.checkpoints.save(ALICE, "other-task", objective="a task to close")
    mem.procedures.propose({"name": "deploy", "owner": "alice", "steps": ["build"],
                            "cases": [{"state": {"conditions": []},
                                       "expect": {"next_step": "build"}}]}, scope=ALICE)
    assert old.record and new.record and pending.record and pending.status == "pending"
    return {"old": old.record.id, "new": new.record.id, "pending": pending.record.id,
            "episode": ep.id}


def _bodies(ids: dict[str, str]) -> dict[str, dict[str, Any]]:
    """A valid body for every operation (changing ones act on their own records)."""
    return {
        "get_current_task": {"task": "release"},
        "save_checkpoint": {"task": "release", "plan": ["write notes"]},
        "close_task": {"task": "other-task"},
        "get_durable_records": {},
        "search_history": {"query": "billing deploy"},
        "recall": {"query": "what does alice drink?"},
        "propose_memory": {"claim": "Alice likes short answers", "kind": "preference",
                           "subject": "alice", "attribute": "answer_style",
                           "source": "chat:3"},
        "log_episode": {"text": "Notes were drafted", "source": "run:1"},
        "scratch_write": {"key": "draft", "value": "v1"},
        "scratch_read": {"key": "draft"},
        "scratch_list": {},
        "begin_operation": {"key": "publish:notes", "intent": "publish the notes"},
        "complete_operation": {"key": "publish:notes", "external_ref": "post/1"},
        "get": {"ref": f"fact:{ids['new']}"},
        "feedback": {"ref": f"fact:{ids['new']}", "signal": "useful"},
        "list_facts": {"status": "active"},
        "retire_fact": {"ref": f"fact:{ids['old']}", "reason": "no longer true"},
        "forget": {"match": "zzz-nothing-matches", "dry_run": True},
        "whoami": {},
        "facts_by_subject": {"subject": "alice"},
        "fact_history": {"fact_id": ids["new"]},
        "undo_supersede": {"fact_id": ids["new"], "reason": "the old one was right"},
        "review_list": {},
        "review_approve": {"fact_id": ids["pending"], "claim": "Alice uses vim keys"},
        "review_reject": {"fact_id": ids["pending"], "reason": "not what she said"},
        "context": {"task": "release"},
        "browse_episodes": {"since": "2000-01-01"},
        "checkpoint_versions": {"task": "release"},
        "list_tasks": {},
        "list_operations": {},
        "forget_preview": {"match": "billing"},
        "list_procedures": {},
        "activate_procedure": {"name": "deploy", "version": 1},
        "export": {},
        "list_keys": {},
        "create_key": {"role": "agent", "users": ["alice"], "label": "ci"},
        "revoke_key": {"key_id": "01aaaaaaaaaaaaaaaaaaaaaaaa"},
    }


#: Operations whose valid body above answers something else than 200 by design.
EXPECTED = {"revoke_key": 404}


def test_every_operation_answers_for_an_admin(served: LiveServer) -> None:
    ids = _seed(served)
    bodies = _bodies(ids)
    assert set(bodies) == {op.name for op in OPERATIONS}
    # the ones that change the seeded facts run last, in this order
    last = ("undo_supersede", "retire_fact", "review_reject")
    order = sorted(OPERATIONS, key=lambda op: last.index(op.name) + 1 if op.name in last else 0)
    with served.client(served.key("acme", role="admin", users=["alice"])) as http:
        for op in order:
            res = http.post(op.path, json=bodies[op.name])
            want = EXPECTED.get(op.name, 200)
            if op.name == "review_reject":
                want = 409  # approved just before: no longer pending
            assert res.status_code == want, (op.name, res.text)
            assert res.headers["x-request-id"]
    mem = served.mem
    approved = mem.facts.get(ids["pending"], ALICE)
    assert approved.status == "active" and approved.claim == "Alice uses vim keys"
    # the undo made the coffee fact current again, then it was retired
    assert mem.facts.get(ids["new"], ALICE).status == "retired"
    assert mem.facts.get(ids["old"], ALICE).status == "retired"
    assert [h.claim for h in mem.facts.history(ids["old"], ALICE)] == ["Alice drinks coffee"]


def test_each_role_may_call_exactly_its_operations(served: LiveServer) -> None:
    ids = _seed(served)
    bodies = _bodies(ids)
    tokens = {role: served.key("acme", role=role, users=["alice"]) for role in ROLES}
    for role, token in tokens.items():
        with served.client(token) as http:
            for op in OPERATIONS:
                if role_at_least(role, op.role):
                    continue
                res = http.post(op.path, json=bodies[op.name])
                assert res.status_code == 403, (role, op.name, res.text)
                assert res.json()["type"] == "AccessDenied"
    # what an agent may not do changed nothing
    assert served.mem.facts.get(ids["new"], ALICE).status == "active"
    assert served.mem.facts.get(ids["pending"], ALICE).status == "pending_review"


def test_a_key_of_one_tenant_never_reaches_another(served: LiveServer) -> None:
    ids = _seed(served)
    globex = served.key("globex", role="admin", users=["alice"])
    with served.client(globex) as http:
        assert http.post("/v1/recall", json={"query": "alice drinks tea"}).json()["items"] == []
        assert http.post("/v1/review/list").json()["items"] == []
        for path, body in (("/v1/get", {"ref": f"fact:{ids['new']}"}),
                           ("/v1/get", {"ref": f"episode:{ids['episode']}"}),
                           ("/v1/facts/history", {"fact_id": ids["new"]}),
                           ("/v1/review/approve", {"fact_id": ids["pending"]}),
                           ("/v1/review/reject", {"fact_id": ids["pending"], "reason": "x"}),
                           ("/v1/facts/retire", {"ref": f"fact:{ids['new']}", "reason": "x"}),
                           ("/v1/facts/undo-supersede", {"fact_id": ids["new"],
                                                         "reason": "x"}),
                           ("/v1/feedback", {"ref": f"fact:{ids['new']}",
                                             "signal": "contradicted"})):
            res = http.post(path, json=body)
            assert res.status_code == 404, (path, res.text)
        res = http.post("/v1/forget/preview", json={"match": "billing"})
        assert res.json()["total"] == 0
        res = http.post("/v1/forget", json={"match": "billing"})
        assert res.status_code == 200 and res.json()["total"] == 0
        # naming the other tenant, in a header or in the body, is refused
        res = http.post("/v1/recall", json={"query": "tea"}, headers={
            "X-Memstrata-Tenant": "acme"})
        assert res.status_code == 403 and "tenant" in res.json()["error"]
        res = http.post("/v1/facts/propose", json={**_bodies(ids)["propose_memory"],
                                                   "tenant": "acme"})
        assert res.status_code == 403 and res.json()["type"] == "AccessDenied"
    mem = served.mem
    assert mem.facts.get(ids["new"], ALICE).status == "active"
    assert mem.facts.get(ids["pending"], ALICE).status == "pending_review"
    assert mem.episodes.get(ids["episode"], ALICE).text.startswith("The deploy")


def test_the_scope_is_the_keys_and_headers_only_narrow_it(served: LiveServer) -> None:
    ids = _seed(served)
    alice_key = served.key("acme", role="reviewer", users=["alice"])
    team_key = served.key("acme", role="agent", users=["alice", "bob"])
    with served.client(alice_key) as http:
        res = http.post("/v1/review/list", headers={"X-Memstrata-User": "bob"})
        assert res.status_code == 403 and "bob" in res.json()["error"]
        res = http.post("/v1/facts/propose", json={**_bodies(ids)["propose_memory"],
                                                   "user": "bob"})
        assert res.status_code == 403
        assert http.post("/v1/review/list").json()["count"] == 1
    with served.client(team_key) as http:
        res = http.post("/v1/recall", json={"query": "tea"})
        assert res.status_code == 403 and "name one" in res.json()["error"]
        res = http.post("/v1/facts/propose", json=_bodies(ids)["propose_memory"],
                        headers={"X-Memstrata-User": "bob"})
        assert res.status_code == 200 and res.json()["status"] == "pending"
        res = http.post("/v1/recall", json={"query": "what does alice drink"},
                        headers={"X-Memstrata-User": "bob"})
        assert all("drink" not in i["excerpt"] for i in res.json()["items"])
    bob = served.mem.facts.list(Scope(tenant="acme", user="bob"), status="pending_review")
    assert [f.scope.user for f in bob] == ["bob"]


def test_restricted_records_need_the_reviewer_to_be_a_reader(served: LiveServer) -> None:
    res = served.mem.facts.propose(ALICE, claim="Alice's salary review is in March",
                                   kind="system_fact", subject="alice", attribute="salary",
                                   actor="agent", source="hr:1", readers=["rita"])
    assert res.record is not None and res.status == "pending"
    rita = served.key("acme", role="reviewer", users=["alice"], principal="rita")
    other = served.key("acme", role="reviewer", users=["alice"], principal="otto")
    with served.client(other) as http:
        assert http.post("/v1/review/list").json()["items"] == []
        res2 = http.post("/v1/review/approve", json={"fact_id": res.record.id})
        assert res2.status_code == 404
    with served.client(rita) as http:
        items = http.post("/v1/review/list").json()["items"]
        assert [i["id"] for i in items] == [res.record.id]
        assert items[0]["why"]
        assert http.post("/v1/review/approve",
                         json={"fact_id": res.record.id}).json()["status"] == "committed"


def test_revoked_unknown_and_missing_keys_are_refused(served: LiveServer) -> None:
    key, token = served.keys.create("acme", role="agent", users=["alice"])
    with served.client(token) as http:
        assert http.post("/v1/whoami").status_code == 200
        served.keys.revoke("acme", key.id)
        res = http.post("/v1/whoami")
        assert res.status_code == 401 and res.headers["www-authenticate"] == "Bearer"
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    for bad in (forged, "msk.x.y.z", "not-a-key", token.replace("msk.", "msk.Z")):
        with served.client(bad) as http:
            res = http.post("/v1/whoami")
            assert res.status_code == 401, bad
            assert res.json()["error"] == "the API key is unknown, malformed or revoked"
    assert httpx.post(f"{served.url}/v1/whoami").status_code == 401
    assert httpx.get(f"{served.url}/healthz").json() == {"ok": True}


def test_an_admin_key_bound_to_a_user_manages_only_that_users_keys(served: LiveServer) -> None:
    """An admin key of alice creates keys only for alice (reading as alice), lists only
    those, and finds no other key to revoke (before: it minted an unbound admin key that
    read bob's facts, listed every key and revoked bob's). A tenant-wide admin still
    manages them all."""
    served.mem.facts.propose(Scope(tenant="acme", user="bob"), claim="Bob's salary is 123k",
                             kind="profile", subject="bob", attribute="salary", actor="user",
                             source="hr:1")
    bob_key, bob_token = served.keys.create("acme", role="agent", users=["bob"])
    with served.client(served.key("acme", role="admin", users=["alice"])) as http:
        for body in ({"role": "admin"}, {"role": "agent", "users": ["bob"]},
                     {"role": "agent", "users": ["alice", "bob"]},
                     {"role": "agent", "users": ["alice"], "principal": "rita"}):
            res = http.post("/v1/keys/create", json=body)
            assert res.status_code == 403 and res.json()["hint"], (body, res.text)
        made = http.post("/v1/keys/create", json={"role": "reviewer", "users": ["alice"],
                                                    "projects": ["p1"]})
        assert made.status_code == 200 and made.json()["key"]["users"] == ["alice"]
        with served.client(made.json()["token"], user="bob") as minted:  # reads no bob
            assert minted.post("/v1/facts/list", json={}).status_code == 403
        listed = http.post("/v1/keys/list").json()["keys"]
        assert bob_key.id not in {k["id"] for k in listed}
        assert {tuple(k["users"]) for k in listed} == {("alice",)}
        gone = http.post("/v1/keys/revoke", json={"key_id": bob_key.id})
        assert gone.status_code == 404
        assert gone.json()["error"] == http.post(
            "/v1/keys/revoke", json={"key_id": "01aaaaaaaaaaaaaaaaaaaaaaaa"}).json()["error"] \
            .replace("01aaaaaaaaaaaaaaaaaaaaaaaa", bob_key.id)
        assert http.post("/v1/keys/revoke", json={"key_id": made.json()["key"]["id"]}
                         ).status_code == 200
    with served.client(bob_token) as http:
        assert http.post("/v1/whoami").status_code == 200
    with served.client(served.key("acme", role="admin")) as http:
        assert bob_key.id in {k["id"] for k in http.post("/v1/keys/list").json()["keys"]}
        assert http.post("/v1/keys/revoke", json={"key_id": bob_key.id}).status_code == 200
    with served.client(bob_token) as http:
        assert http.post("/v1/whoami").status_code == 401


def test_a_wrong_method_gets_the_documented_error_shape(served: LiveServer) -> None:
    """Every operation is a POST; another method gets 405 with ``{"error", "hint", "type",
    "request_id"}`` and ``Allow: POST`` (before: a plain-text "Method Not Allowed")."""
    token = served.key("acme", role="agent", users=["alice"])
    with served.client(token) as http:
        for method in ("GET", "PUT", "DELETE"):
            res = http.request(method, "/v1/recall")
            assert res.status_code == 405 and res.headers["allow"] == "POST", method
            body = res.json()
            assert {"error", "hint", "type", "request_id"} <= set(body) and body["hint"]


def test_bodies_over_the_limit_are_refused_before_they_are_read(served: LiveServer) -> None:
    token = served.key("acme", role="agent", users=["alice"])
    before = served.mem.facts.list(ALICE)
    big = {"claim": "x" * 300_000, "kind": "preference", "subject": "alice",
           "attribute": "a", "source": "s"}
    with served.client(token) as http:
        res = http.post("/v1/facts/propose", json=big)
        assert res.status_code == 413 and res.json()["request_id"]

        def chunks() -> Any:  # no Content-Length: the limit applies to what arrives
            for _ in range(40):
                yield b"x" * 10_000

        res = http.post("/v1/facts/propose", content=chunks())
        assert res.status_code == 413
        assert http.post("/v1/facts/propose", content=b"{not json").status_code == 422
        assert http.post("/v1/facts/propose", json=[1, 2]).status_code == 422
    assert served.mem.facts.list(ALICE) == before


def test_a_key_over_its_rate_waits(served: LiveServer) -> None:
    token = served.key("acme", role="agent", users=["alice"], rate_per_minute=3)
    with served.client(token) as http:
        codes = [http.post("/v1/whoami").status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429]
        res = http.post("/v1/whoami")
        assert int(res.headers["retry-after"]) >= 1 and res.json()["type"] == "RateLimited"
    with served.client(served.key("acme", role="agent", users=["alice"])) as http:
        assert http.post("/v1/whoami").status_code == 200  # another key has its own bucket


def test_the_request_log_has_ids_and_never_content(served: LiveServer,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    token = served.key("acme", role="agent", users=["alice"])
    with caplog.at_level(logging.INFO, logger="memstrata.service"), served.client(token) as http:
        res = http.post("/v1/facts/propose", json={
            "claim": "Alice's door code is 4417", "kind": "preference", "subject": "alice",
            "attribute": "door", "source": "chat:9"})
        rid = res.headers["x-request-id"]
    lines = [json.loads(r.getMessage()) for r in caplog.records
             if r.name == "memstrata.service"]
    mine = [line for line in lines if line["request_id"] == rid]
    assert len(mine) == 1
    assert mine[0]["status"] == 200 and mine[0]["path"] == "/v1/facts/propose"
    assert mine[0]["tenant"] == "acme" and mine[0]["role"] == "agent" and mine[0]["key"]
    text = caplog.text
    assert "4417" not in text and "door code" not in text and token not in text


def test_openapi_document_lists_every_operation(served: LiveServer) -> None:
    spec = httpx.get(f"{served.url}/openapi.json").json()
    assert spec["openapi"].startswith("3.1")
    assert {p for p in spec["paths"]} == {op.path for op in OPERATIONS}
    propose = spec["paths"]["/v1/facts/propose"]["post"]
    body = propose["requestBody"]["content"]["application/json"]["schema"]
    assert body["additionalProperties"] is False and "claim" in body["required"]
    assert propose["x-memstrata-role"] == "agent"


# -- the MCP endpoint -----------------------------------------------------------

async def _mcp(server: LiveServer, token: str, calls: list[tuple[str, dict[str, Any]]]
               ) -> tuple[list[str], list[dict[str, Any]]]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(f"{server.url}/mcp", http_client=http),
                            read_timeout_seconds=60) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        results = []
        for name, args in calls:
            res = await client.call_tool(name, args)
            results.append(dict(res.structured_content or {}))
        return names, results


def test_the_mcp_endpoint_acts_in_the_keys_scope(served: LiveServer) -> None:
    ids = _seed(served)
    agent = served.key("acme", role="agent", users=["alice"])
    names, results = asyncio.run(_mcp(served, agent, [
        ("recall", {"query": "what does alice drink?"}),
        ("forget", {"match": "billing"}),
        ("scratch_write", {"key": "k", "value": "v"}),
        ("scratch_read", {"key": "k"}),
    ]))
    assert "forget" not in names and "retire_fact" not in names and "recall" in names
    assert any("green tea" in i["excerpt"] for i in results[0]["items"])
    assert results[1]["type"] == "AccessDenied"
    assert results[3]["value"] == "v"
    globex = served.key("globex", role="admin", users=["alice"])
    names, results = asyncio.run(_mcp(served, globex, [
        ("recall", {"query": "what does alice drink?"}),
        ("get", {"ref": f"fact:{ids['new']}"}),
        ("forget", {"match": "billing"}),
    ]))
    assert "forget" in names
    assert results[0]["items"] == [] and results[1]["type"] == "NotFound"
    assert results[2]["total"] == 0
    assert served.mem.episodes.get(ids["episode"], ALICE).event == "deploy_failed"
    res = httpx.post(f"{served.url}/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                "method": "tools/list"})
    assert res.status_code == 401


def test_keys_are_stored_hashed_and_private_to_their_tenant(served: LiveServer, backend: str,
                                                            store_url: str) -> None:
    acme = served.key("acme", role="admin", users=["alice"])
    served.key("globex", role="admin")
    secret = acme.split(".")[-1]
    if backend == "sqlite":
        raw = served.mem.db.url.removeprefix("sqlite:///")
        blob = b"".join(p.read_bytes() for p in Path(raw).parent.glob("memory.db*"))
        assert secret.encode() not in blob
        return
    import psycopg

    with psycopg.connect(store_url) as conn:  # the application role, as the server runs
        assert conn.execute("SELECT count(*) FROM api_keys").fetchone() == (0,)
        conn.execute("SELECT set_config('app.tenant', 'acme', false)")
        rows = conn.execute("SELECT tenant, secret_hash FROM api_keys").fetchall()
        assert [r[0] for r in rows] == ["acme"] and secret not in rows[0][1]
        assert conn.execute("UPDATE api_keys SET role = 'admin' WHERE tenant = 'globex'"
                            ).rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO api_keys (tenant, id, secret_hash, role, actor, "
                         "created_at) VALUES ('globex', 'x', 'h', 'admin', 'user', now())")


def test_a_key_bound_to_a_user_changes_only_what_that_scope_holds(served: LiveServer) -> None:
    """A reviewer bound to alice approves, rejects, retires and undoes alice's facts, not a
    tenant-wide one everyone reads (before: it approved a tenant-wide pending fact, which
    became current for bob, and retired a tenant-wide fact from under him); a key bound to
    nobody decides on those. Nothing changes on a refusal."""
    tenant_wide = Scope(tenant="acme")
    shared = served.mem.facts.propose(tenant_wide, claim="Deploys freeze on Fridays",
                                      kind="constraint", subject="deploys",
                                      attribute="freeze", actor="user", source="chat:1").record
    waiting = served.mem.facts.propose(tenant_wide, claim="Releases ship on Tuesdays",
                                       kind="constraint", subject="releases",
                                       attribute="day", actor="agent", source="chat:2").record
    own = served.mem.facts.propose(ALICE, claim="Alice reviews the docs releases",
                                   kind="relationship", subject="alice",
                                   attribute="reviews", actor="agent", source="chat:3").record
    assert shared is not None and waiting is not None and own is not None
    assert waiting.status == "pending_review" and own.status == "pending_review"
    bound = served.key("acme", role="reviewer", users=["alice"])
    with served.client(bound) as http:
        for path, body in (("/v1/review/approve", {"fact_id": waiting.id}),
                           ("/v1/review/reject", {"fact_id": waiting.id, "reason": "no"}),
                           ("/v1/facts/retire", {"ref": shared.ref, "reason": "gone"})):
            res = http.post(path, json=body)
            assert res.status_code == 403, (path, res.text)
            assert "bound" in res.json()["error"] and res.json()["hint"]
        assert http.post("/v1/review/approve",
                         json={"fact_id": own.id}).json()["status"] == "committed"
    assert served.mem.facts.get(shared.id, tenant="acme").status == "active"
    assert served.mem.facts.get(waiting.id, tenant="acme").status == "pending_review"
    unbound = served.key("acme", role="reviewer")
    with served.client(unbound, **{"X-Memstrata-User": "alice"}) as http:
        assert http.post("/v1/review/approve",
                         json={"fact_id": waiting.id}).json()["status"] == "committed"
        assert http.post("/v1/facts/retire", json={"ref": shared.ref, "reason": "gone"}
                         ).status_code == 200
