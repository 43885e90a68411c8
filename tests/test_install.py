"""The README's install, from the outside: fresh venvs with only the package (and then with
``[mcp]``) installed from its wheel, the dependencies from the registry, nothing from the
development venv. The README's commands work as written there, or fail with the install
hint."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True, timeout=600)
    [built] = out.glob("memstrata-*.whl")
    return built


def _venv(where: Path, spec: str) -> Path:
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(where)], check=True, timeout=300)
    subprocess.run([str(where / "bin" / "pip"), "install", "-q", spec], check=True,
                   capture_output=True, timeout=900)
    return where / "bin"


@pytest.fixture(scope="module")
def plain(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield _venv(tmp_path_factory.mktemp("plain") / "venv", str(wheel))


@pytest.fixture(scope="module")
def with_mcp(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield _venv(tmp_path_factory.mktemp("mcp") / "venv", f"memstrata[mcp] @ {wheel.as_uri()}")


def _env(tmp: Path, bin_dir: Path) -> dict[str, str]:
    return {"MEMSTRATA_HOME": str(tmp / "home"), "PATH": f"{bin_dir}:/usr/bin:/bin"}


def test_the_plain_install_runs_the_quick_start_and_the_cli(plain: Path,
                                                            tmp_path: Path) -> None:
    env = _env(tmp_path, plain)
    freeze = subprocess.run([str(plain / "pip"), "freeze"], capture_output=True, text=True,
                            env=env).stdout.lower()
    assert "onnxruntime" not in freeze and "mcp==" not in freeze and "psycopg" not in freeze
    block = re.search(r"## Quick start \(Python\)\n\n```python\n(.*?)```", README, re.S)
    assert block is not None
    code = block.group(1).replace("/tmp/memstrata-quickstart.db", str(tmp_path / "qs.db"))
    out = subprocess.run([str(plain / "python"), "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Deploy preview failed: stale build cache" in out.stdout
    assert "wrote draft (15 chars)" in out.stdout
    # without the embeddings extra every path is lexical, and says so once
    assert out.stderr.count("every search is lexical only") == 1, out.stderr
    assert "pip install 'memstrata[embeddings]'" in out.stderr
    helped = subprocess.run(["memstrata", "--help"], capture_output=True, text=True, env=env)
    assert helped.returncode == 0 and "memstrata" in helped.stdout
    facts = subprocess.run(["memstrata", "facts", "list", "--user", "alice", "--json"],
                           capture_output=True, text=True, env=env)
    assert facts.returncode == 0 and json.loads(facts.stdout) == []
    assert "lexical only" not in facts.stderr  # a listing searches nothing
    # a search through the CLI (Memory.from_config) says it, on stderr, the JSON untouched
    recall = ["memstrata", "recall", "deploy preview", "--user", "alice", "--json"]
    searched = subprocess.run(recall, capture_output=True, text=True, env=env)
    assert searched.returncode == 0 and json.loads(searched.stdout)["items"] == []
    assert searched.stderr.count("every search is lexical only") == 1, searched.stderr
    chosen = subprocess.run(recall, capture_output=True, text=True,
                            env={**env, "MEMSTRATA_EMBEDDER": "none"})
    assert chosen.returncode == 0 and "lexical only" not in chosen.stderr  # chosen: no notice


def test_the_plain_install_names_the_extra_to_install(plain: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, plain)
    mcp = subprocess.run(["memstrata", "mcp", "--user", "alice"], capture_output=True,
                         text=True, env=env, stdin=subprocess.DEVNULL, timeout=60)
    assert mcp.returncode == 2 and "pip install 'memstrata[mcp]'" in mcp.stderr
    assert "Traceback" not in mcp.stderr
    for module, extra in (("langgraph_store", "langgraph"), ("agents_session", "agents"),
                          ("claude_memory", "anthropic")):
        out = subprocess.run([str(plain / "python"), "-c",
                              f"import memstrata.interfaces.{module}"],
                             capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode != 0 and f"pip install 'memstrata[{extra}]'" in out.stderr


def test_the_mcp_install_serves_the_tools(with_mcp: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, with_mcp)
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "readme-test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    out = subprocess.run(["memstrata", "mcp", "--user", "alice", "--project", "docs-site"],
                         input="".join(json.dumps(r) + "\n" for r in requests),
                         capture_output=True, text=True, env=env, timeout=120)
    replies = {r.get("id"): r for r in map(json.loads, out.stdout.splitlines()) if r}
    assert replies[1]["result"]["serverInfo"]["name"] == "memstrata", out.stderr
    names = {t["name"] for t in replies[2]["result"]["tools"]}
    assert {"recall", "search_history", "propose_memory", "get"} <= names
    # no embeddings extra here: the server says once that its searches are lexical
    assert out.stderr.count("every search is lexical only") == 1, out.stderr
