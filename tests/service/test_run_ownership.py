"""Runs and MCP sessions belong to whoever opened them, on every backend, over real HTTP.

A run named over REST is a run of the request's key: another key naming the same run id
(an MCP session's id, read off an episode's thread, or another key's default run) gets a
scratchpad of its own and never reads or overwrites the first one's. An MCP session belongs
to the key whose ``initialize`` opened it: any other key presenting its id, to call a tool
or to end it, is answered 404 as for an unknown session, and the session goes on intact.
Parallel tool calls at the start of a session open exactly one run, which ends with the
session. ``X-Memstrata-Task`` is a session's default task, as on REST.

The MCP requests are raw JSON-RPC over httpx (:class:`RawSession`), so the tests can present
a session id with another key, send calls in parallel and read the HTTP status.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from conftest import LiveServer
from memstrata import Memory, Scope
from memstrata.interfaces.tools import ToolDispatcher

ALICE = Scope(tenant="acme", user="alice")
PROTOCOL = list(HANDSHAKE_PROTOCOL_VERSIONS)[-1]


def _message(res: httpx.Response) -> Any:
    """The JSON-RPC message of a response (a JSON body, or the last event of a stream)."""
    if res.headers.get("content-type", "").startswith("text/event-stream"):
        found = None
        for line in res.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                found = json.loads(line[5:])
        return found
    return res.json() if res.content else None


class RawSession:
    """One MCP session of ``token`` over plain HTTP."""

    def __init__(self, server: LiveServer, token: str, **headers: str) -> None:
        self.url = f"{server.url}/mcp"
        self.headers = {"Authorization": f"Bearer {token}",
                        "Accept": "application/json, text/event-stream", **headers}
        self.sid = ""
        self._next = 0
        self._lock = threading.Lock()
        res = self.post({"method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}})
        assert res.status_code == 200, res.text
        self.sid = res.headers["mcp-session-id"]
        self.post({"method": "notifications/initialized"}, notify=True)

    def post(self, msg: dict[str, Any], *, notify: bool = False, token: str | None = None
             ) -> httpx.Response:
        body: dict[str, Any] = {"jsonrpc": "2.0", **msg}
        if not notify:
            with self._lock:
                self._next += 1
                body["id"] = self._next
        return httpx.post(self.url, json=body, headers=self._headers(token), timeout=60)

    def _headers(self, token: str | None) -> dict[str, str]:
        headers = dict(self.headers)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if self.sid:
            headers["Mcp-Session-Id"] = self.sid
            headers["Mcp-Protocol-Version"] = PROTOCOL
        return headers

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        res = self.post({"method": "tools/call", "params": {"name": name, "arguments": args}})
        assert res.status_code == 200, res.text
        return dict(_message(res)["result"]["structuredContent"])

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A JSON-RPC request's whole answer (``result`` or ``error``)."""
        res = self.post({"method": method, "params": params})
        assert res.status_code == 200, res.text
        return dict(_message(res))

    def delete(self, token: str | None = None) -> httpx.Response:
        return httpx.delete(self.url, headers=self._headers(token), timeout=30)


def _runs(mem: Memory, tenant: str = "acme") -> list[dict[str, Any]]:
    with mem.db.transaction(tenant, write=False) as tx:
        rows = tx.all("SELECT run_id, ended_at FROM runs WHERE tenant = ? ORDER BY run_id",
                      (tenant,))
    return [{"run_id": r["run_id"], "ended": r["ended_at"] is not None} for r in rows]


def _scratch_keys(mem: Memory, run_id: str, scope: Scope = ALICE) -> list[str]:
    return sorted(mem.scratch_store.keys(scope, run_id, "", mem.clock.now()))


def _eventually(check: Callable[[], bool], what: str) -> None:
    """A session's runs end just after its DELETE is answered: wait for it (10 s at most)."""
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_another_key_cannot_reach_a_sessions_or_a_keys_run_by_naming_it(
        served: LiveServer) -> None:
    victim = served.key("acme", role="agent", users=["alice"], label="alice's desktop agent")
    other = served.key("acme", role="agent", users=["alice"], label="another agent")
    session = RawSession(served, victim)
    session.call("scratch_write", {"key": "plan", "value": "session-private draft"})
    session.call("log_episode", {"text": "worked on the release notes", "source": "chat:1"})
    with served.client(other) as http:
        threads = [e["thread"] for e in http.post("/v1/episodes/browse", json={}).json()[
            "episodes"]]
        [run] = [t.removeprefix("run:") for t in threads]  # what the other key learns
        named = {"X-Memstrata-Run": run}
        read = http.post("/v1/scratch/read", json={"key": "plan"}, headers=named).json()
        assert read == {"key": "plan", "found": False, "value": None}
        res = http.post("/v1/scratch/write", json={"key": "plan", "value": "injected"},
                        headers=named)
        assert res.status_code == 200, res.text
    assert session.call("scratch_read", {"key": "plan"})["value"] == "session-private draft"
    assert _scratch_keys(served.mem, run) == ["plan"]

    # the default REST run of a key (api:<key id>) is the key's alone too
    victim_id = served.keys.authenticate(victim).id
    with served.client(victim) as http:
        http.post("/v1/scratch/write", json={"key": "todo", "value": "victim's own"})
    with served.client(other) as http:
        read = http.post("/v1/scratch/read", json={"key": "todo"},
                         headers={"X-Memstrata-Run": f"api:{victim_id}"}).json()
        assert read["found"] is False
    with served.client(victim) as http:
        assert http.post("/v1/scratch/read", json={"key": "todo"}).json()["value"] == \
            "victim's own"


def test_a_run_name_is_a_run_of_the_key_that_sends_it(served: LiveServer) -> None:
    first = served.key("acme", role="agent", users=["alice"])
    second = served.key("acme", role="agent", users=["alice"])
    named = {"X-Memstrata-Run": "nightly-import"}
    with served.client(first) as http:
        http.post("/v1/scratch/write", json={"key": "cursor", "value": "42"}, headers=named)
        again = http.post("/v1/scratch/read", json={"key": "cursor"}, headers=named).json()
        assert again["value"] == "42"  # the same key and name: the same run
        logged = http.post("/v1/episodes/log", json={"text": "import ran", "source": "cron:1"},
                           headers=named).json()["logged"]
        res = http.post("/v1/scratch/read", json={"key": "cursor"},
                        headers={"X-Memstrata-Run": "x" * 120})
        assert res.status_code == 422 and "longer than" in res.json()["error"]
    with served.client(second) as http:
        other = http.post("/v1/scratch/read", json={"key": "cursor"}, headers=named).json()
        assert other["found"] is False
    first_id = served.keys.authenticate(first).id
    thread = served.mem.episodes.get(logged.removeprefix("episode:"), ALICE).thread
    assert thread == f"run:api:{first_id}:nightly-import"


def test_only_the_key_that_opened_a_session_may_use_or_end_it(served: LiveServer) -> None:
    alice = served.key("acme", role="agent", users=["alice"])
    colleague = served.key("acme", role="admin")
    stranger = served.key("globex", role="agent", users=["mallory"])
    session = RawSession(served, alice)
    session.call("scratch_write", {"key": "k", "value": "work in progress"})
    for token in (stranger, colleague):
        gone = session.delete(token=token)
        assert gone.status_code == 404, gone.text
        assert gone.json()["error"]["message"] == "Session not found"
        used = session.post({"method": "tools/call", "params": {
            "name": "scratch_read", "arguments": {"key": "k"}}}, token=token)
        assert used.status_code == 404
    assert session.call("scratch_read", {"key": "k"})["value"] == "work in progress"
    never_issued = {**session._headers(None), "Mcp-Session-Id": "f" * 32}
    assert httpx.delete(session.url, headers=never_issued).status_code == 404
    [run] = [r["run_id"] for r in _runs(served.mem)]
    assert _scratch_keys(served.mem, run) == ["k"]
    assert session.delete().status_code == 200
    _eventually(lambda: _runs(served.mem) == [{"run_id": run, "ended": True}],
                "the session's run did not end with its key's DELETE")
    assert _scratch_keys(served.mem, run) == []


def test_parallel_calls_at_the_start_of_a_session_share_one_run(served: LiveServer) -> None:
    token = served.key("acme", role="agent", users=["alice"], rate_per_minute=100_000)
    for trial in range(5):
        session = RawSession(served, token)
        barrier = threading.Barrier(16)

        def write(i: int, session: RawSession = session,
                  barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            session.call("scratch_write", {"key": f"k{i:02d}", "value": "v"})

        workers = [threading.Thread(target=write, args=(i,)) for i in range(16)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        open_runs = [r["run_id"] for r in _runs(served.mem) if not r["ended"]]
        assert len(open_runs) == 1, (trial, open_runs)
        assert _scratch_keys(served.mem, open_runs[0]) == [f"k{i:02d}" for i in range(16)]
        assert session.delete().status_code == 200
        _eventually(lambda: all(r["ended"] for r in _runs(served.mem)),
                    "the session's run did not end")
        assert len(_runs(served.mem)) == trial + 1


def test_a_dispatcher_opens_one_run_however_many_threads_ask(mem: Memory) -> None:
    """What the test above needs, without HTTP in between: threads released together at a
    fresh dispatcher's first run (which an MCP session's parallel calls are) get one run."""
    for _ in range(10):
        dispatcher = ToolDispatcher(mem, ALICE)
        barrier = threading.Barrier(16)
        seen: list[str] = []

        def ask(d: ToolDispatcher = dispatcher, b: threading.Barrier = barrier,
                out: list[str] = seen) -> None:
            b.wait()
            out.append(d.run.run_id)

        workers = [threading.Thread(target=ask) for _ in range(16)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert len(set(seen)) == 1
        dispatcher.close()
    assert all(r["ended"] for r in _runs(mem, ALICE.tenant)) and len(_runs(mem, "acme")) == 10


def test_the_task_header_is_an_mcp_sessions_default_task(served: LiveServer) -> None:
    token = served.key("acme", role="agent", users=["alice"])
    task = {"X-Memstrata-Task": "release-v17"}
    with served.client(token) as http:
        saved = http.post("/v1/checkpoints/save", json={"objective": "ship it"}, headers=task)
        assert saved.status_code == 200, saved.text
    session = RawSession(served, token, **task)
    current = session.call("get_current_task", {})
    assert current["task"] == "release-v17" and current["checkpoint"]["objective"] == "ship it"
    saved_mcp = session.call("save_checkpoint", {"next_action": "tag the release"})
    assert saved_mcp["task"] == "release-v17" and saved_mcp["version"] == 2
    listed = session.request("resources/list", {})["result"]["resources"]
    assert "memstrata://task/release-v17" in [r["uri"] for r in listed]
    plain = RawSession(served, token)
    missing = plain.call("save_checkpoint", {"next_action": "x"})
    assert missing["type"] == "ValidationError"


def test_unknown_resources_and_prompts_are_protocol_errors(served: LiveServer) -> None:
    session = RawSession(served, served.key("acme", role="agent", users=["alice"]))
    resource = session.request("resources/read", {"uri": "memstrata://nope"})["error"]
    assert resource["code"] == -32002 and resource["data"]["uri"] == "memstrata://nope"
    assert "resources/list" in resource["data"]["hint"]
    prompt = session.request("prompts/get", {"name": "no_such_prompt"})["error"]
    assert prompt["code"] == -32602 and "session_start" in prompt["data"]["hint"]
    ok = session.request("prompts/get", {"name": "session_start"})
    assert "result" in ok
