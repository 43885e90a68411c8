"""The README's main-job command: `memstrata demo` on a fresh machine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

CLI = "from memstrata.cli import main; main()"


def test_demo_runs_from_the_command_line(tmp_path: Path) -> None:
    home = tmp_path / "fresh-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
    env.update({"MEMSTRATA_HOME": str(home), "COLUMNS": "120"})
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CLI, "demo"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    elapsed = time.perf_counter() - started
    print(f"memstrata demo took {elapsed:.1f} s")  # measured, not asserted
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    summary = re.search(r"(\d+)/(\d+) checks passed", text)
    assert summary is not None and summary.group(1) == summary.group(2)
    assert int(summary.group(2)) >= 14
    assert "✗" not in text
    for step in ("1. Alice states a preference", "3. A fresh worker resumes",
                 "4. Publishing exactly once", "5. Six weeks later", "6. A secret is refused",
                 "7. Forgetting for real"):
        assert step in text
    assert "manifest: what entered and why" in text
    assert '"status": "unknown"' in text and '"status": "rejected"' in text
    assert "ghp_Zq8x4LmN2vB7cR1tY6uI0oP3aS5dF9gH2jK4" not in text.split("propose_memory")[-1]
    assert not (home / "memory.db").exists()  # the user's own store is never touched
