"""``memstrata serve`` and ``memstrata mcp`` as processes: what their stderr and restarts say.

Each start of ``serve`` revokes the previous startup admin key, ``--no-admin-key`` or not. A
client that disconnects in the middle of its request body (REST, ``/mcp``, the inspector's
sign-in) is logged as a client disconnect (499), never as a 500 with a traceback. ``memstrata
mcp`` (stdio) answers an unknown resource and an unknown prompt with the protocol's errors,
with no traceback on stderr.

The processes run this interpreter (``sys.executable -c``) with the environment of the
tests, so they run the code under test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from conftest import free_port

CLI = "from memstrata.cli import main; main()"


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "MEMSTRATA_HOME": str(home)}
    env.pop("MEMSTRATA_URL", None)
    return env


@contextmanager
def serving(home: Path, *flags: str) -> Iterator[tuple[str, Path]]:
    """``memstrata serve`` over ``home``'s store: its URL and the file its stderr goes to."""
    port = free_port()
    log = home / f"serve-{time.monotonic_ns()}.log"
    home.mkdir(exist_ok=True)
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-c", CLI, "serve", "--port", str(port),
                                 *flags], env=_env(home), stderr=err, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url, log
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def _admin_key(log: Path) -> str | None:
    found = re.search(r"admin key .*: (msk\.\S+)", log.read_text())
    return found.group(1) if found else None


def test_each_start_revokes_the_previous_startup_key_whatever_the_flags(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    with serving(home) as (url, log):
        first = _admin_key(log)
        assert first is not None
        assert httpx.post(f"{url}/v1/whoami",
                          headers={"Authorization": f"Bearer {first}"}).status_code == 200
    with serving(home, "--no-admin-key") as (url, log):
        assert _admin_key(log) is None
        old = httpx.post(f"{url}/v1/whoami", headers={"Authorization": f"Bearer {first}"})
        assert old.status_code == 401


def _hang_up_mid_body(url: str, path: str, token: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as conn:
        conn.sendall((f"POST {path} HTTP/1.1\r\nHost: {host}\r\n"
                      f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                      "Accept: application/json, text/event-stream\r\n"
                      'Content-Length: 5000\r\n\r\n{"text": "abc').encode())
        time.sleep(0.3)


def test_a_client_that_hangs_up_mid_body_is_logged_as_gone_not_as_a_server_error(
        tmp_path: Path) -> None:
    paths = ["/v1/episodes/log", "/mcp", "/login"]
    with serving(tmp_path / "home") as (url, log):
        token = _admin_key(log)
        assert token is not None
        for path in paths:
            _hang_up_mid_body(url, path, token)
        deadline = time.monotonic() + 10
        while sum('"status": 499' in line for line in log.read_text().splitlines()) < 3:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        ok = httpx.post(f"{url}/v1/whoami", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200  # the server carries on
    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    gone = [line for line in lines if line["status"] == 499]
    assert sorted(str(line["path"]) for line in gone) == sorted(paths)
    assert not [line for line in lines if line["status"] == 500]
    assert "Traceback" not in text and "Exception in ASGI application" not in text


def test_stdio_answers_unknown_resources_and_prompts_with_protocol_errors(
        tmp_path: Path) -> None:
    version = list(HANDSHAKE_PROTOCOL_VERSIONS)[-1]
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "resources/read",
         "params": {"uri": "memstrata://nope"}},
        {"jsonrpc": "2.0", "id": 3, "method": "prompts/get",
         "params": {"name": "no_such_prompt"}},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/read",
         "params": {"uri": "memstrata://identity"}},
    ]
    done = subprocess.run(
        [sys.executable, "-c", CLI, "mcp", "--url", f"sqlite:///{tmp_path / 'm.db'}",
         "--user", "alice"], env=_env(tmp_path / "home"), capture_output=True, text=True,
        input="".join(json.dumps(m) + "\n" for m in messages), timeout=120)
    replies = {r.get("id"): r for r in map(json.loads, done.stdout.splitlines())}
    resource, prompt = replies[2]["error"], replies[3]["error"]
    assert resource["code"] == -32002 and resource["data"]["type"] == "NotFound"
    assert prompt["code"] == -32602 and "session_start" in prompt["data"]["hint"]
    assert "result" in replies[4]
    assert "Traceback" not in done.stderr
