"""The MCP server, driven by the official SDK's client: over stdio, over HTTP and in-process."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memstrata import Memory, Scope
from memstrata.interfaces.mcp_server import INSTRUCTIONS, build_server
from memstrata.interfaces.tools import TOOLS

ALICE = Scope(user="alice", project="docs-site")
BOB = Scope(user="bob", project="docs-site")
CLI = "from memstrata.cli import main; main()"


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"MEMSTRATA_HOME": str(home), "MEMSTRATA_EMBEDDER": "none"})
    for var in ("MEMSTRATA_URL", "MEMSTRATA_USER", "MEMSTRATA_PROJECT", "MEMSTRATA_TENANT",
                "MEMSTRATA_CONFIG"):
        env.pop(var, None)
    return env


def _seed(db: Path) -> dict[str, str]:
    """Bob's private records and one of Alice's, written before the server starts."""
    with Memory.open(f"sqlite:///{db}", embedder=None) as mem:
        bob_fact = mem.facts.propose(BOB, claim="Bob is interviewing at another company",
                                     kind="profile", subject="bob", attribute="job_search",
                                     actor="user", source="chat:bob")
        bob_ep = mem.episodes.append(BOB, text="Bob's salary review: asked for a raise",
                                     event="review", actor="user", source="hr:bob")
        mem.facts.propose(ALICE, claim="Alice prefers written status updates",
                          kind="preference", subject="alice", attribute="status_updates",
                          actor="user", source="chat:alice")
    assert bob_fact.record is not None
    return {"bob_fact": bob_fact.record.ref, "bob_episode": bob_ep.ref}


# One valid call per tool, in an order that makes every call meaningful.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_durable_records", {}),
    ("get_current_task", {}),
    ("save_checkpoint", {"objective": "Ship v17 notes", "next_action": "collect PRs"}),
    ("log_episode", {"text": "Preview deploy failed: stale cache", "event": "deploy_failed",
                     "source": "ci:run/812"}),
    ("search_history", {"query": "deploy failed"}),
    ("recall", {"query": "status updates", "decision": "planning"}),
    ("propose_memory", {"claim": "Deploy previews need a cache purge", "kind": "lesson",
                        "subject": "deploys", "attribute": "preview_cache",
                        "source": "ci:run/812"}),
    ("scratch_write", {"key": "draft", "value": "Intro paragraph"}),
    ("scratch_read", {"key": "draft"}),
    ("scratch_list", {}),
    ("begin_operation", {"key": "publish:v17", "intent": "POST the notes"}),
    ("complete_operation", {"key": "publish:v17", "external_ref": "post-1"}),
    ("forget", {"match": "stale cache"}),
]


async def _exercise(client: Client, seeded: dict[str, str]) -> dict[str, Any]:
    listed = await client.list_tools()
    names = {t.name for t in listed.tools}
    assert names == {t.name for t in TOOLS}
    for tool in listed.tools:
        assert tool.title and tool.title[0].isupper()
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert "user" not in tool.input_schema["properties"]
    assert client.instructions is not None and "get_durable_records" in client.instructions
    results: dict[str, Any] = {}
    for name, args in CALLS:
        res = await client.call_tool(name, args)
        assert not res.is_error, (name, res.content)
        assert isinstance(res.structured_content, dict), name
        results[name] = res.structured_content
    # another user's records, through arguments or by reference: refused or empty
    refused = await client.call_tool("get_durable_records", {"user": "bob"})
    assert refused.is_error
    assert "scope is fixed" in refused.structured_content["error"]
    escape = await client.call_tool("search_history", {"query": "salary", "tenant": "other"})
    assert escape.is_error
    found = await client.call_tool("search_history", {"query": "salary review raise"})
    assert not found.is_error and found.structured_content["hits"] == []
    forgot = await client.call_tool("forget", {"record_ids": [seeded["bob_fact"],
                                                              seeded["bob_episode"]]})
    assert not forgot.is_error and forgot.structured_content["total"] == 0
    bad = await client.call_tool("complete_operation", {"key": "never-begun"})
    assert bad.is_error and bad.structured_content["type"] == "NotFound"
    return results


def _check_results(results: dict[str, Any]) -> None:
    assert [f["claim"] for f in results["get_durable_records"]["facts"]] == [
        "Alice prefers written status updates"]
    assert results["get_current_task"]["checkpoint"] is None
    assert results["save_checkpoint"]["saved"] == "checkpoint:release-v17@1"
    assert results["search_history"]["hits"][0]["ref"] == results["log_episode"]["logged"]
    assert results["propose_memory"]["status"] == "pending"
    assert results["scratch_write"] == {"receipt": "wrote draft (15 chars)"}
    assert results["scratch_read"]["value"] == "Intro paragraph"  # same session, same run
    assert results["scratch_list"]["keys"] == ["draft"]
    assert results["begin_operation"]["status"] == "pending"
    assert results["complete_operation"]["status"] == "succeeded"
    assert results["forget"]["counts"]["episodes"] == 1


def _bob_untouched(db: Path) -> None:
    with Memory.open(f"sqlite:///{db}", embedder=None) as mem:
        assert [f.claim for f in mem.facts.current(BOB)] == [
            "Bob is interviewing at another company"]
        assert mem.episodes.search(BOB, "salary")


def test_stdio_server_in_a_subprocess(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    seeded = _seed(db)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", CLI, "mcp", "--url", f"sqlite:///{db}", "--user", "alice",
              "--project", "docs-site", "--task", "release-v17"],
        env=_env(tmp_path / "home"), cwd=str(tmp_path))

    async def main() -> dict[str, Any]:
        async with Client(params, read_timeout_seconds=60) as client:
            return await _exercise(client, seeded)

    results = asyncio.run(main())
    _check_results(results)
    _bob_untouched(db)
    with Memory.open(f"sqlite:///{db}", embedder=None) as mem:
        # the server ended its run when the client disconnected: scratch discarded
        assert mem.stats()["rows"]["scratch"] == 0
        op = mem.ledger.get(ALICE, "publish:v17")
        assert op is not None and op.status == "succeeded" and op.run_id


def test_stdio_answers_every_request_read_before_stdin_closes(tmp_path: Path) -> None:
    """A script that writes its requests and closes stdin still gets every reply.

    The SDK cancels the handlers still running at end of input; without the
    server's drain the tool calls (run in a worker thread) lose their replies.
    """
    db = tmp_path / "memory.db"
    _seed(db)
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "log_episode",
                    "arguments": {"text": "Piped deploy note", "event": "note",
                                  "source": "pipe:1"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "get_durable_records", "arguments": {}}},
    ]
    out = subprocess.run(
        [sys.executable, "-c", CLI, "mcp", "--url", f"sqlite:///{db}", "--user", "alice",
         "--project", "docs-site"],
        input="".join(json.dumps(line) + "\n" for line in lines), capture_output=True,
        text=True, env=_env(tmp_path / "home"), timeout=120)
    replies = {r["id"]: r for r in map(json.loads, out.stdout.splitlines()) if "id" in r}
    assert sorted(replies) == [1, 2, 3, 4], out.stderr
    logged = replies[3]["result"]["structuredContent"]["logged"]
    claims = [f["claim"] for f in replies[4]["result"]["structuredContent"]["facts"]]
    assert claims == ["Alice prefers written status updates"]
    with Memory.open(f"sqlite:///{db}", embedder=None) as mem:
        assert mem.get(logged, scope=ALICE) is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path, dict[str, str]]]:
    db = tmp_path / "memory.db"
    seeded = _seed(db)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "mcp", "--http", "--port", str(port), "--url",
         f"sqlite:///{db}", "--user", "alice", "--project", "docs-site", "--task",
         "release-v17"], env=_env(tmp_path / "home"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode() if proc.stderr else "")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", db, seeded
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_streamable_http_server_on_loopback(
        http_server: tuple[str, Path, dict[str, str]]) -> None:
    url, db, seeded = http_server

    async def main() -> dict[str, Any]:
        async with Client(url, read_timeout_seconds=60) as client:
            return await _exercise(client, seeded)

    _check_results(asyncio.run(main()))
    _bob_untouched(db)


def test_in_process_server_maps_library_errors(tmp_path: Path) -> None:
    with Memory.open(f"sqlite:///{tmp_path}/m.db", embedder=None) as mem:
        server = build_server(mem, ALICE)
        assert server.instructions == INSTRUCTIONS

        async def main() -> None:
            async with Client(server) as client:
                res = await client.call_tool("save_checkpoint", {"objective": "x"})
                assert res.is_error
                assert "no task" in res.structured_content["error"]
                assert res.structured_content["hint"]
                res = await client.call_tool("no_such_tool", {})
                assert res.is_error and "unknown tool" in res.structured_content["error"]
                res = await client.call_tool("propose_memory", {
                    "claim": "The deploy key is ghp_Zq8x4LmN2vB7cR1tY6uI0oP3aS5dF9gH2jK4",
                    "kind": "system_fact", "subject": "deploy", "attribute": "key",
                    "source": "ci:log"})
                assert not res.is_error and res.structured_content["status"] == "rejected"
                assert "ghp_" not in str(res.content)

        asyncio.run(main())
        server.memstrata_tools.close()  # type: ignore[attr-defined]


def test_mcp_without_its_extra_says_what_to_install(tmp_path: Path) -> None:
    """A fresh process where the ``mcp`` package cannot be imported: exit 2 and the hint."""
    code = ("import sys, importlib.util as u; real = u.find_spec; "
            "u.find_spec = lambda n, *a: None if n == 'mcp' else real(n, *a); "
            "from memstrata.cli import main; sys.argv = ['memstrata', 'mcp']; main()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"MEMSTRATA_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 2, out.stderr
    assert "pip install 'memstrata[mcp]'" in out.stderr and "Traceback" not in out.stderr


def test_resources_and_the_session_start_prompt(mem: Memory) -> None:
    mem.facts.propose(ALICE, claim="Alice prefers async standups", kind="preference",
                      subject="alice", attribute="standup_format", actor="user", source="chat")
    mem.checkpoints.save(ALICE, "release-v17", objective="Ship v17 notes",
                         next_action="collect merged PRs")
    server = build_server(mem, ALICE, task="release-v17")

    async def main() -> None:
        async with Client(server) as client:
            listed = await client.list_resources()
            uris = {str(r.uri) for r in listed.resources}
            assert uris == {"memstrata://identity", "memstrata://working-context",
                            "memstrata://episodic", "memstrata://task/release-v17"}
            working = await client.read_resource("memstrata://working-context")
            assert "Alice prefers async standups" in working.contents[0].text
            task = await client.read_resource("memstrata://task/release-v17")
            assert "collect merged PRs" in task.contents[0].text
            assert task.contents[0].text.startswith("## Current task: release-v17")
            prompts = await client.list_prompts()
            assert [p.name for p in prompts.prompts] == ["session_start"]
            got = await client.get_prompt("session_start", {})
            text = got.messages[0].content.text
            assert "get_durable_records" in text and "Ship v17 notes" in text
            # a closed task never reads as the work in hand: it says so, with its outcome
            mem.checkpoints.close(ALICE, "release-v17", outcome="abandoned: v17 was skipped")
            closed = (await client.read_resource("memstrata://task/release-v17")).contents[0]
            assert closed.text.startswith("## Closed task: release-v17") and \
                "outcome: abandoned: v17 was skipped" in closed.text
            assert "Current task" not in closed.text and \
                "Next action when it closed: collect merged PRs" in closed.text

    asyncio.run(main())
    server.memstrata_tools.close()  # type: ignore[attr-defined]
