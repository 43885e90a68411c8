"""``memstrata serve`` and ``memstrata keys``, as a person runs them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from click.testing import CliRunner

from conftest import free_port
from memstrata.cli import cli

CLI = "from memstrata.cli import main; main()"


def test_serve_with_no_flags_prints_the_url_and_a_one_time_admin_key(tmp_path: Path) -> None:
    env = {**os.environ, "MEMSTRATA_HOME": str(tmp_path / "home")}
    env.pop("MEMSTRATA_URL", None)
    port = free_port()
    tokens = []
    for _ in range(2):  # a restart prints a new key and the old one stops working
        proc = subprocess.Popen([sys.executable, "-c", CLI, "serve", "--port", str(port)],
                                env=env, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            lines = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                line = proc.stderr.readline()
                lines.append(line)
                found = re.search(r"admin key .*: (msk\.\S+)", line)
                if found:
                    tokens.append(found.group(1))
                    break
            assert tokens, "".join(lines)
            assert f"http://127.0.0.1:{port}" in "".join(lines)
            url = f"http://127.0.0.1:{port}"
            while True:
                try:
                    if httpx.get(f"{url}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            who = httpx.post(f"{url}/v1/whoami",
                             headers={"Authorization": f"Bearer {tokens[-1]}"})
            assert who.status_code == 200 and who.json()["role"] == "admin"
            if len(tokens) == 2:
                old = httpx.post(f"{url}/v1/whoami",
                                 headers={"Authorization": f"Bearer {tokens[0]}"})
                assert old.status_code == 401
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
    assert (tmp_path / "home" / "memory.db").exists()


def test_keys_create_list_revoke(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    run = CliRunner()
    res = run.invoke(cli, ["keys", "create", "--url", url, "--tenant", "acme", "--role",
                           "reviewer", "--user", "alice", "--principal", "rita", "--json"])
    assert res.exit_code == 0, res.output
    made = json.loads(res.output)
    assert made["token"].startswith("msk.") and made["key"]["users"] == ["alice"]
    listed = json.loads(run.invoke(cli, ["keys", "list", "--url", url, "--tenant", "acme",
                                         "--json"]).output)
    assert [k["id"] for k in listed] == [made["key"]["id"]]
    assert made["token"].split(".")[-1] not in (tmp_path / "m.db").read_bytes().decode(
        "latin-1")
    other = json.loads(run.invoke(cli, ["keys", "list", "--url", url, "--tenant", "globex",
                                        "--json"]).output)
    assert other == []
    res = run.invoke(cli, ["keys", "revoke", "--url", url, "--tenant", "globex",
                           made["key"]["id"]])
    assert res.exit_code == 1 and "no key" in res.output  # another tenant cannot revoke it
    res = run.invoke(cli, ["keys", "revoke", "--url", url, "--tenant", "acme",
                           made["key"]["id"]])
    assert res.exit_code == 0 and "revoked" in res.output
    res = run.invoke(cli, ["keys", "list", "--url", url, "--tenant", "acme", "--active"])
    assert "nothing to show" in res.output
    res = run.invoke(cli, ["keys", "create", "--url", url, "--role", "owner"])
    assert res.exit_code == 2
    res = run.invoke(cli, ["keys", "create", "--url", url, "--users", "al ice"])
    assert res.exit_code == 1 and "hint" in res.output
