"""Extraction run twice, or out of order: a re-run writes nothing, and an older statement never
replaces a newer current fact (memstrata.extraction.run, "Running it again" and "An older
statement"). Offline: the explicit proposer and the rules judge, on every backend."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memstrata import ManualClock, Memory, Scope, ValidationError

ALICE = Scope(user="alice", project="docs")
S1 = [{"role": "user", "content": "Remember that I prefer Python."},
      {"role": "user", "content": "From now on I prefer Go instead of Python."}]
S2 = [{"role": "user", "content": "Remember that I prefer Rust."}]


def current_claims(mem: Memory) -> list[str]:
    return [f.claim for f in mem.facts.current(ALICE)]


def test_extracting_the_same_session_twice_writes_and_confirms_nothing(
        mem: Memory, clock: ManualClock) -> None:
    first = mem.extract(ALICE, S1, source="chat:s1")
    assert [i.status for i in first.items] == ["committed", "superseding"]
    [cur] = mem.facts.current(ALICE)
    history = mem.facts.history(cur.id)
    clock.advance(hours=1)
    again = mem.extract(ALICE, S1, source="chat:s1")
    assert again.written == 0 and again.errors == []
    assert [i.status for i in again.items] == ["duplicate", "duplicate"]
    assert all("already extracted from chat:s1#turn-" in i.reason for i in again.items)
    assert [i.ref for i in again.items] == [f.ref for f in history]
    # nothing changed: not the history, not the current fact, not its confirmation time
    assert mem.facts.history(cur.id) == history
    assert mem.facts.get(cur.id) == cur
    assert current_claims(mem) == ['alice said, from now on: "I prefer Go instead of Python"']


def test_re_extracting_an_older_session_keeps_the_newer_answer(
        mem: Memory, clock: ManualClock) -> None:
    mem.extract(ALICE, S1, source="chat:s1")
    clock.advance(days=1)
    mem.extract(ALICE, S2, source="chat:s2")
    clock.advance(days=1)
    rerun = mem.extract(ALICE, S1, source="chat:s1")
    assert rerun.written == 0
    assert current_claims(mem) == ['alice said: "I prefer Rust"']
    [cur] = mem.facts.current(ALICE)
    assert len(mem.facts.history(cur.id)) == 3


def test_a_session_extracted_late_does_not_replace_a_newer_answer(
        mem: Memory, clock: ManualClock) -> None:
    """A backfill: session 1 (dated by its turns) is extracted only after session 2 set
    the answer; its statement waits for review instead of becoming current."""
    day1 = clock.now()
    clock.advance(days=2)
    mem.extract(ALICE, S2, source="chat:s2")
    clock.advance(days=1)
    dated = [{**m, "timestamp": (day1 + timedelta(minutes=n)).isoformat()}
             for n, m in enumerate(S1)]
    late = mem.extract(ALICE, dated, source="chat:s1")
    assert [i.status for i in late.items] == ["pending", "pending"]
    assert all("older than fact:" in (i.judge or "") for i in late.items)
    assert current_claims(mem) == ['alice said: "I prefer Rust"']
    pending = mem.review.pending(ALICE)
    assert len(pending) == 2 and all("older statement does not replace a newer one" in
                                     (f.reason or "") for f in pending)
    # the statement keeps the time it was made
    assert sorted(f.valid_from for f in pending) == [day1, day1 + timedelta(minutes=1)]


def test_observed_at_dates_a_session_without_turn_times(
        mem: Memory, clock: ManualClock) -> None:
    day1 = clock.now()
    clock.advance(days=2)
    mem.extract(ALICE, S2, source="chat:s2")
    late = mem.extract(ALICE, S1[:1], source="chat:s1", observed_at=day1.isoformat())
    assert [i.status for i in late.items] == ["pending"]
    assert current_claims(mem) == ['alice said: "I prefer Rust"']
    # a newer statement still replaces the answer as before
    newer = mem.extract(ALICE, [{"role": "user", "content": "Remember that I prefer Go.",
                                 "created_at": clock.now().timestamp()}], source="chat:s3")
    assert [i.status for i in newer.items] == ["superseding"]
    with pytest.raises(ValidationError, match="in the future"):
        mem.extract(ALICE, S2, observed_at=clock.now() + timedelta(days=1))


def test_turn_times_are_checked(mem: Memory, clock: ManualClock) -> None:
    with pytest.raises(ValidationError, match="turn 0: timestamp"):
        mem.extract(ALICE, [{**S2[0], "timestamp": "last tuesday"}])
    with pytest.raises(ValidationError, match="turn 0: created_at must be"):
        mem.extract(ALICE, [{**S2[0], "created_at": ["2026"]}])
    future = (clock.now() + timedelta(hours=1)).isoformat()
    with pytest.raises(ValidationError, match="in the future"):
        mem.extract(ALICE, [{**S2[0], "timestamp": future}])
    assert mem.facts.current(ALICE) == []
