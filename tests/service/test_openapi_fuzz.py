"""Schemathesis against the served OpenAPI document: no 5xx, no schema violation.

The property-based fuzzer (``schemathesis run``, from PyPI) generates requests for every
operation from ``/openapi.json`` (valid and invalid bodies, boundary values) with an admin
key bound to one user, sends them over real HTTP to a running server on SQLite and on
PostgreSQL, and checks each answer: not a server error, a documented status code and
content type, and a body that matches the documented schema. At least 1,000 generated
requests must all pass.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LiveServer
from memstrata import Memory, Scope
from memstrata.interfaces.service.operations import OPERATIONS

CHECKS = ("not_a_server_error,response_schema_conformance,status_code_conformance,"
          "content_type_conformance")


@pytest.fixture
def fuzzed(mem: Memory, backend: str) -> LiveServer:
    from memstrata.interfaces.service.app import ServiceConfig

    if backend == "postgres+redis":
        pytest.skip("the fuzzer runs on SQLite and PostgreSQL; Redis holds scratch only")
    scope = Scope(tenant="acme", user="alice")
    mem.facts.propose(scope, claim="Alice drinks tea", kind="preference", subject="alice",
                      attribute="drink", actor="user", source="chat:1")
    mem.episodes.append(scope, text="The deploy failed", event="deploy_failed", actor="tool",
                        source="ci:1")
    mem.checkpoints.save(scope, "release", objective="ship it")
    return LiveServer(mem, ServiceConfig(rate_per_minute=1_000_000))


def test_no_5xx_and_no_schema_violation_over_1000_requests(fuzzed: LiveServer,
                                                            tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("schemathesis")
    assert exe.exists() or shutil.which("schemathesis"), "schemathesis is a dev dependency"
    server = fuzzed.start()
    try:
        token = server.key("acme", role="admin", users=["alice"])
        proc = subprocess.run(
            [str(exe), "run", f"{server.url}/openapi.json", "-H", f"Authorization: Bearer {token}",
             "--checks", CHECKS, "--max-examples", "30", "--seed", "20261201",
             "--no-color"],
            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    finally:
        server.stop()
    out = proc.stdout + proc.stderr
    found = re.search(r"(\d+) generated, (\d+) passed", out)
    assert proc.returncode == 0 and found is not None, out[-4000:]
    generated, passed = int(found.group(1)), int(found.group(2))
    assert generated >= 1000 and passed == generated, out[-4000:]
    assert f"Tested: {len(OPERATIONS)}" in out, out[-4000:]
