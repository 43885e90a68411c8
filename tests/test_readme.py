"""The README's front door: the quick start runs as written, the commands exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_starts_with_the_two_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert first_block is not None
    lines = [ln for ln in first_block.group(1).splitlines() if ln.strip()]
    assert lines[0].startswith("make demo") and lines[1].startswith("make test")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_quick_start_runs_as_written(tmp_path: Path) -> None:
    block = re.search(r"## Quick start \(Python\)\n\n```python\n(.*?)```", README, re.S)
    assert block is not None
    code = block.group(1).replace("/tmp/memstrata-quickstart.db", str(tmp_path / "qs.db"))
    assert 10 <= len(code.strip().splitlines()) <= 25
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env={"MEMSTRATA_HOME": str(tmp_path / "home"),
                                            "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "superseding ['Prefers async standup updates', 'Live standups are back" in text
    assert "wrote draft (15 chars)" in text
    assert "Deploy preview failed: stale build cache" in text
    assert "Ship v17 notes" in text and "Live standups are back this quarter" in text


def _runnable(block: str) -> str:
    """A README block without the statements marked ``# needs a model`` (they call a model
    provider over the network); everything else runs as written."""
    out: list[str] = []
    depth = 0
    skipping = False
    for line in block.splitlines():
        if "# needs a model" in line and not skipping:
            skipping = True
            depth = 0
        if skipping:
            code = line.split("#", 1)[0]
            depth += code.count("(") + code.count("[") + code.count("{")
            depth -= code.count(")") + code.count("]") + code.count("}")
            if depth <= 0:
                skipping = False
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def _agent_blocks() -> list[str]:
    section = README.split("## Use it from your agent", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_agent_setups_run_as_written(tmp_path: Path) -> None:
    """Every Python block of "Use it from your agent" runs, less its model calls."""
    blocks = _agent_blocks()
    assert len(blocks) == 3
    outputs = []
    bin_dir = Path(sys.executable).parent
    for i, block in enumerate(blocks):
        code = _runnable(block)
        compile(block, f"readme-block-{i}", "exec")  # the full block is valid Python too
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=tmp_path, timeout=120,
                             env={"MEMSTRATA_HOME": str(tmp_path / "home"),
                                  "PATH": f"{bin_dir}:/usr/bin:/bin"})
        assert out.returncode == 0, (i, out.stderr[-2000:])
        outputs.append(out.stdout)
    assert "Alice reviews docs on Fridays" in outputs[1]
    assert "['begin_operation', 'close_task', 'complete_operation']" in outputs[2]
