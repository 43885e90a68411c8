"""A forget's match finds the text as the user wrote it, on every backend: beyond ASCII
(case-insensitive for all of Unicode, as on PostgreSQL, on SQLite too), with quotes, in
CJK, inside the JSON a checkpoint or procedure version is stored as, and in versions
written before the JSON kept such characters as they are (ASCII-escaped: ``\\u00fc``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends import StoreProbe
from memstrata import ManualClock, Memory, Procedure, Scope
from memstrata.scoping import SCOPE_COLUMNS, scope_values


def forget_counted(mem: Memory, scope: Scope, match: str) -> dict[str, int]:
    """The non-zero counts of a forget by ``match``, checked against its dry run (the same
    counts, layer by layer)."""
    dry = mem.forget(scope, match=match, dry_run=True)
    done = mem.forget(scope, match=match)
    assert dry.counts == done.counts, match
    assert dry.ids == done.ids, match
    return {k: v for k, v in done.counts.items() if v}


def save_as_before(mem: Memory, scope: Scope, clock: ManualClock, task: str,
                   **fields: Any) -> None:
    """A checkpoint version as memstrata stored it before: ASCII-escaped JSON."""
    data = json.dumps(fields, sort_keys=True)
    assert "\\u" in data or '\\"' in data
    with mem.db.transaction(scope.tenant) as tx:
        tx.execute(f"INSERT INTO checkpoints ({SCOPE_COLUMNS}, task, version, data, "
                   "updated_at, updated_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (*scope_values(scope), task, 1, data, clock.now(), None))


@pytest.mark.parametrize(("match", "task"), [
    ("Müller", "kunde"), ("MÜLLER", "kunde"), ('"Dr Zhivago"', "quote-task"),
    ("服务器部署", "cjk"), ("ÖZTÜRK", "arzt"), ("öztürk", "arzt"), ("c:\\temp", "path"),
])
def test_checkpoint_data_is_forgotten_by_its_text(mem: Memory, store: StoreProbe,
                                                   alice: Scope, match: str,
                                                   task: str) -> None:
    mem.checkpoints.save(alice, "kunde", objective="Rückruf bei Frau Müller wegen Vertrag",
                         next_action="anrufen")
    mem.checkpoints.save(alice, "kunde", next_action="E-Mail an Müller schicken")
    mem.checkpoints.save(alice, "quote-task", objective='Ask "Dr Zhivago" about the lease')
    mem.checkpoints.save(alice, "cjk", objective="服务器部署失败了 需要回滚",
                         plan=["回滚", "检查日志"])
    mem.checkpoints.save(alice, "arzt", objective="Termin bei Dr. ÖZTÜRK")
    mem.checkpoints.save(alice, "path", objective="logs in C:\\Temp\\run")
    mem.checkpoints.save(alice, "other", objective="unrelated")
    tasks = {"kunde", "quote-task", "cjk", "arzt", "path", "other"}

    counts = forget_counted(mem, alice, match)

    assert counts == {"checkpoints": 2 if task == "kunde" else 1}
    assert mem.checkpoints.current(alice, task) is None
    assert mem.checkpoints.versions(alice, task) == []
    assert mem.recall(alice, match, layers=["handoffs"]).items == []
    assert sorted(mem.checkpoints.tasks(alice)) == sorted(tasks - {task})
    if task == "cjk":
        assert not store.contains("服务器部署")


def test_a_field_name_is_not_the_text(mem: Memory, alice: Scope) -> None:
    mem.checkpoints.save(alice, "ship", objective="ship the release", plan=["tag it"])
    mem.procedures.propose(Procedure(name="deploy", steps=["build", "verify"]), scope=alice)
    for match in ("objective", "plan", '"objective": "', "steps", "description"):
        assert forget_counted(mem, alice, match) == {}, match
    assert mem.checkpoints.current(alice, "ship") is not None
    assert forget_counted(mem, alice, "SHIP THE") == {"checkpoints": 1}


def test_procedure_text_beyond_ascii_is_forgotten(mem: Memory, alice: Scope) -> None:
    mem.procedures.propose(Procedure(name="rückruf", description='Frau "ÖZTÜRK" anrufen',
                                     steps=["wählen", "服务器部署"]), scope=alice)
    mem.procedures.propose(Procedure(name="other", steps=["build"]), scope=alice)
    assert forget_counted(mem, alice, "öztürk") == {"procedures": 1}
    assert [p.name for p in mem.procedures.list(scope=alice)] == ["other"]


def test_versions_stored_as_escaped_json_are_still_forgotten(
        mem: Memory, alice: Scope, clock: ManualClock) -> None:
    save_as_before(mem, alice, clock, "arzt", objective="Termin bei Dr. ÖZTÜRK in MÜNCHEN")
    save_as_before(mem, alice, clock, "quote", objective='Ask "Dr Zhivago"')
    save_as_before(mem, alice, clock, "cjk", objective="服务器部署失败了", plan=["回滚"])
    save_as_before(mem, alice, clock, "emoji", objective="Deploy 🚀 später")
    save_as_before(mem, alice, clock, "near", objective="Termin bei Dr. ÖZTÄRK")
    assert mem.checkpoints.current(alice, "arzt") is not None
    # a procedure whose JSON was written (and last updated) before
    mem.procedures.propose(Procedure(name="anruf", description="Frau ÄRZTIN anrufen",
                                     steps=["wählen"]), scope=alice)
    with mem.db.transaction(alice.tenant) as tx:
        row = tx.one("SELECT data FROM procedures WHERE tenant = ? AND name = ?",
                     (alice.tenant, "anruf"))
        assert row is not None
        old = json.dumps(json.loads(row["data"]))
        assert "\\u00c4" in old
        tx.execute("UPDATE procedures SET data = ? WHERE tenant = ? AND name = ?",
                   (old, alice.tenant, "anruf"))

    # another case than stored: the escaped capital is not the small letter's escape
    assert forget_counted(mem, alice, "öztürk") == {"checkpoints": 1}
    assert forget_counted(mem, alice, '"dr zhivago"') == {"checkpoints": 1}
    assert forget_counted(mem, alice, "服务器部署") == {"checkpoints": 1}
    assert forget_counted(mem, alice, "🚀 SPÄTER") == {"checkpoints": 1}
    assert forget_counted(mem, alice, "ärztin") == {"procedures": 1}
    assert mem.checkpoints.tasks(alice) == ["near"]


def test_capitals_beyond_ascii_match_either_case(mem: Memory, alice: Scope) -> None:
    for match in ("öztürk", "ÖZTÜRK", "Öztürk", "münchen"):
        mem.episodes.append(alice, text="Termin bei ÖZTÜRK in MÜNCHEN verschoben",
                            actor="user", source="chat:1")
        mem.facts.propose(alice, claim="Ärztin heißt Dr. ÖZTÜRK", kind="relationship",
                          subject="alice", attribute="doctor", actor="user", source="chat:1")
        expected = {"episodes": 1} if match == "münchen" else {"facts": 1, "episodes": 1}
        assert forget_counted(mem, alice, match) == expected, match
        if match != "münchen":
            assert mem.facts.current(alice) == []
        mem.forget(alice)


def test_subject_beyond_ascii_finds_episodes_in_either_case(mem: Memory, alice: Scope) -> None:
    mem.episodes.append(alice, text="ÖZTÜRK reviewed the contract", actor="user",
                        source="chat:1")
    mem.episodes.append(alice, text="Nobody else", actor="user", source="chat:1")
    report = mem.forget(alice, subject="öztürk")
    assert report.counts["episodes"] == 1


def test_scratch_and_feedback_notes_match_either_case(mem: Memory, alice: Scope) -> None:
    ep = mem.episodes.append(alice, text="Call scheduled", actor="user", source="chat:1")
    mem.feedback(ep.ref, "useful", scope=alice, note="Rückruf von ÖZTÜRK kam an")
    with mem.run(alice) as run:
        run.scratch.write("kontakt", "Dr. ÖZTÜRK, München")
        run.scratch.write("json", {"name": "ÖZTÜRK"})
        run.scratch.write("other", "nothing")
        counts = forget_counted(mem, alice, "öztürk")
        assert counts == {"scratch": 2, "feedback": 1}, counts
        assert run.scratch.list() == ["other"]


def test_a_capital_final_sigma_matches_a_small_one_on_every_layer(
        mem: Memory, alice: Scope, clock: ManualClock) -> None:
    """"ΣΩΚΡΆΤΗΣ" finds "Σωκράτης" in every layer on every engine (before: PostgreSQL
    lowered the capital to a plain sigma, the text's to a final one, and forgot the
    checkpoint alone)."""
    mem.episodes.append(alice, text="Ο Σωκράτης τηλεφώνησε", actor="user", source="chat:1")
    mem.facts.propose(alice, claim="Ο γιατρός λέγεται Σωκράτης", kind="relationship",
                      subject="alice", attribute="doctor", actor="user", source="chat:1")
    mem.checkpoints.save(alice, "call", objective="Να καλέσω τον Σωκράτης")
    with mem.run(alice) as run:
        run.scratch.write("name", "Σωκράτης")
        counts = forget_counted(mem, alice, "ΣΩΚΡΆΤΗΣ")
    assert counts == {"facts": 1, "episodes": 1, "checkpoints": 1, "scratch": 1}, counts


def test_a_dry_run_counts_a_forgotten_records_matching_feedback_once(
        mem: Memory, alice: Scope) -> None:
    """Feedback on a forgotten episode whose note holds the match too: one row, counted
    once by the dry run as by the forget (before: 2 against 1)."""
    ep = mem.episodes.append(alice, text="Called Quokkabeth back", actor="user",
                             source="chat:1")
    mem.feedback(ep.ref, "useful", scope=alice, note="Quokkabeth confirmed")
    assert forget_counted(mem, alice, "quokkabeth") == {"episodes": 1, "feedback": 1}
