"""Several processes on one SQLite file; crashes in the middle of writes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from memstrata.store.sqlite_driver import sqlite3

WRITER = textwrap.dedent("""
    import sys
    from memstrata import Memory, Scope
    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mem = Memory.open("sqlite:///" + path, embedder=None)
    scope = Scope(user="w", project="p")
    for i in range(n):
        mem.episodes.append(scope, text=f"{tag} event {i}", event="tick", source=tag,
                            actor="tool")
        if len(sys.argv) > 4:
            print(f"{tag}-{i}", flush=True)   # acknowledged only after commit
    mem.close()
""")


@pytest.mark.slow
def test_two_processes_append_2000_each(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    Memory.open(f"sqlite:///{db}", embedder=None).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), tag, "2000"])
             for tag in ("A", "B")]
    assert [p.wait(timeout=600) for p in procs] == [0, 0]
    c = sqlite3.connect(db)
    texts = [r[0] for r in c.execute("SELECT text FROM episodes")]
    assert len(texts) == 4000
    assert len(set(texts)) == 4000
    for tag in ("A", "B"):
        assert {f"{tag} event {i}" for i in range(2000)} <= set(texts)
    assert c.execute("SELECT count(*) FROM episodes_fts").fetchone()[0] == 4000
    mem = Memory.open(f"sqlite:///{db}", embedder=None)
    assert mem.doctor() == []


@pytest.mark.slow
def test_sigkill_mid_write_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    Memory.open(f"sqlite:///{db}", embedder=None).close()
    rng = random.Random(7)
    acked: set[str] = set()
    for round_ in range(20):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db), f"r{round_}", "100000",
                                 "ack"], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        # let it get going, then kill it at a random moment mid-stream
        first = proc.stdout.readline().strip()
        if first:
            acked.add(first)
        time.sleep(rng.uniform(0.05, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate()
        acked |= {line for line in rest.splitlines() if line}
        c = sqlite3.connect(db)
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        c.close()
    c = sqlite3.connect(db)
    stored = {f"{src}-{text.rsplit(' ', 1)[1]}" for src, text in
              c.execute("SELECT source, text FROM episodes")}
    assert acked, "the writers never acknowledged anything"
    assert acked <= stored
    mem = Memory.open(f"sqlite:///{db}", embedder=None)
    assert mem.doctor() == []


AT_EXIT = textwrap.dedent("""
    import atexit, sys
    from memstrata import Memory, Scope
    mem = Memory.open("sqlite:///" + sys.argv[1], embedder="hash:384")
    scope = Scope(user="u", project="p")
    mem.episodes.append(scope, text="The nightly backup moved to 02:00 UTC", actor="user",
                        source="chat")
    print("before", len(mem.recall(scope, "nightly backup").items), flush=True)
    # atexit handlers run after the interpreter stopped taking new worker-thread jobs
    atexit.register(lambda: print("at exit", len(mem.recall(scope, "nightly backup").items),
                                  flush=True))
""")


def test_a_recall_at_interpreter_exit_embeds_its_query_in_the_callers_thread(
        tmp_path: Path) -> None:
    """Past the interpreter's shutdown no worker thread takes a query: a recall in an atexit
    handler (a final flush, say) still answers, the query embedded where it is asked."""
    out = subprocess.run([sys.executable, "-c", AT_EXIT, str(tmp_path / "exit.db")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["before 1", "at exit 1"], out.stderr


def test_a_process_forked_after_a_recall_recalls_too(tmp_path: Path) -> None:
    """The threads that embed queries belong to the process that started them: a child
    forked after a recall (a pre-forking server) starts its own instead of waiting forever
    for its parent's."""
    db = tmp_path / "forked.db"
    scope = Scope(user="u", project="p")
    with Memory.open(f"sqlite:///{db}", embedder="hash:384") as mem:
        mem.episodes.append(scope, text="The nightly backup moved to 02:00 UTC", actor="user",
                            source="chat")
        assert mem.recall(scope, "when does the nightly backup run").items
    pid = os.fork()
    if pid == 0:  # the child: a store of its own on the same file, then a recall
        code = 1
        try:
            with Memory.open(f"sqlite:///{db}", embedder="hash:384") as child:
                code = 0 if child.recall(scope, "nightly backup").items else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked process's recall never returned")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0
