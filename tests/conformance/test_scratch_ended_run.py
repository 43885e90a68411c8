"""A run that has ended takes no scratch writes, on every scratch store (SQLite, PostgreSQL,
Redis): :mod:`memstrata.layers.scratch`.

Before: ``run.scratch.write`` after the run ended returned a receipt and the entry stayed
for its 24 h TTL under the ended run ("discarded on exit" did not hold for a late write,
from a callback or thread that outlives the ``with`` block).
"""

from __future__ import annotations

import pytest

from memstrata import Conflict, Memory, Scope
from memstrata.layers.scratch import Scratch


def _entries(mem: Memory, scope: Scope, run_id: str) -> list[tuple[str, str]]:
    return mem.scratch_store.entries(scope, run_id, "", mem.clock.now())


def test_a_late_write_to_an_ended_run_is_refused(mem: Memory, alice: Scope) -> None:
    with mem.run(alice, task="t") as run:
        run.scratch.write("draft", "intro paragraph")
    with pytest.raises(Conflict, match="has ended") as info:
        run.scratch.write("late", "written after the run ended")
    assert "nothing was written" in str(info.value)
    with pytest.raises(Conflict):
        run.scratch.write_many([("a", "1"), ("b", "2")])
    assert _entries(mem, alice, run.run_id) == []
    assert run.scratch.list() == [] and not run.scratch.read("late").found


def test_the_scratchpad_of_a_run_log_refuses_writes_once_the_run_ends(
        mem: Memory, alice: Scope) -> None:
    """The rule itself, on a scratchpad given the run log (``runs=``)."""
    with mem.run(alice, run_id="r1") as run:
        pad = Scratch(mem.scratch_store, mem.clock, alice, run.run_id, runs=mem.runs)
        assert pad.write("k", "v") == "wrote k (1 chars)"
        assert pad.write_many([("x", "1")]) == 1
    with pytest.raises(Conflict):
        pad.write("k", "again")
    with pytest.raises(Conflict):
        pad.write_many([("x", "2"), ("y", "3")])
    assert _entries(mem, alice, "r1") == []
    # entering the run again opens it: it takes writes again
    with mem.run(alice, run_id="r1"):
        assert pad.write("k", "back") == "wrote k (4 chars)"
        assert _entries(mem, alice, "r1") == [("k", "back")]
    assert _entries(mem, alice, "r1") == []


def test_discard_empties_the_scratchpad_but_keeps_the_run_open(mem: Memory,
                                                              alice: Scope) -> None:
    with mem.run(alice) as run:
        run.scratch.write("k", "v")
        assert run.scratch.discard() == 1
        assert run.scratch.write("k", "w") == "wrote k (1 chars)"
        assert run.scratch.read("k") == "w"
