"""A write never reaches, shows or confirms a record its writer may not read (DESIGN §4).

- An episode that ``supersedes`` one restricted to other readers is refused exactly like one
  naming an id that does not exist (no existence oracle), writes nothing, and leaves the
  target current for its readers; a reader of the target may still correct it, and so
  may a write in a scope without a user (the operator's).
- A fact proposed into a slot whose current fact is restricted to other readers is held for
  review: the hidden fact is not returned, not matched as a duplicate (even word for word),
  not replaced, and its readers are not inherited; a near fact in another slot that the
  writer may not read is not named in ``similar``.
- Every memstrata error carries a hint, whether or not its raise named one.
"""

from __future__ import annotations

import pytest

from memstrata import Memory, NotFound, Scope, ValidationError
from memstrata import errors as errors_module
from memstrata.layers.facts import HIDDEN_SLOT

ANA = Scope(user="ana", project="harbor")
UNKNOWN = "episode:01M92EM50RN48GABNMGVGZXJMZ"


def _refusal(mem: Memory, supersedes: str) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        mem.episodes.append(ANA, text="correction: the hold is lifted", actor="user",
                            source="chat:2", supersedes=supersedes)
    return caught.value


def test_an_episode_its_writer_may_not_read_cannot_be_superseded(mem: Memory) -> None:
    held = mem.episodes.append(ANA, text="Legal hold on the Zephyrine archive", actor="user",
                               source="jira:1", readers=["auditor"])
    hidden = _refusal(mem, held.ref)
    missing = _refusal(mem, UNKNOWN)
    assert hidden.hint and hidden.hint == missing.hint
    assert str(hidden).replace(held.ref, "REF") == str(missing).replace(UNKNOWN, "REF")
    assert "auditor" not in str(hidden)
    assert mem.episodes.log(ANA) == []  # nothing written, for ana or anyone
    assert len(mem.episodes.log(ANA, principal="auditor")) == 1
    assert mem.episodes.get(held.id, ANA, principal="auditor").status == "current"


def test_a_reader_of_a_restricted_episode_may_supersede_it(mem: Memory) -> None:
    held = mem.episodes.append(ANA, text="Legal hold on the Zephyrine archive", actor="user",
                               source="jira:1", readers=["ana", "auditor"])
    fixed = mem.episodes.append(ANA, text="The Zephyrine hold is lifted", actor="user",
                                source="jira:2", supersedes=held.ref)
    assert fixed.readers == ["ana", "auditor"]
    assert mem.episodes.get(held.id, ANA).status == "superseded"


def test_a_write_without_a_user_is_the_operators(mem: Memory) -> None:
    desk = Scope(project="harbor")
    held = mem.episodes.append(desk, text="Legal hold on the Zephyrine archive", actor="user",
                               source="jira:1", readers=["auditor"])
    fixed = mem.episodes.append(desk, text="The Zephyrine hold is lifted", actor="user",
                                source="jira:2", supersedes=held.ref)
    assert fixed.readers == ["auditor"]


def _salary(mem: Memory, claim: str, **kw: object) -> object:
    return mem.facts.propose(ANA, claim=claim, kind="profile", subject="ana",
                             attribute="salary", actor="user", source="chat:1",
                             **kw)  # type: ignore[arg-type]


def test_a_claim_into_a_slot_held_by_a_hidden_fact_waits_for_review(mem: Memory) -> None:
    hidden = _salary(mem, "Ana's salary is 91k", readers=["hr"])
    assert hidden.status == "committed"  # type: ignore[attr-defined]
    for claim in ("Ana's salary is 95k", "Ana's salary is 91k"):  # another, and the same
        res = _salary(mem, claim)
        assert res.status == "pending"  # type: ignore[attr-defined]
        assert res.reason == HIDDEN_SLOT  # type: ignore[attr-defined]
        assert res.superseded is None  # type: ignore[attr-defined]
        assert res.record.claim == claim  # type: ignore[attr-defined]
        assert res.record.readers is None  # type: ignore[attr-defined]
        assert "91k" not in res.model_dump_json() or claim.endswith("91k")  # type: ignore[attr-defined]
    current = mem.facts.current(ANA, principal="hr")
    assert [f.claim for f in current] == ["Ana's salary is 91k"]
    assert current[0].id == hidden.record.id  # type: ignore[attr-defined]
    assert mem.facts.current(ANA) == []
    with pytest.raises(NotFound):
        mem.facts.get(hidden.record.id, scope=ANA)  # type: ignore[attr-defined]


def test_a_reader_of_the_slots_fact_still_supersedes_it(mem: Memory) -> None:
    old = _salary(mem, "Ana's salary is 91k", readers=["ana", "hr"])
    res = _salary(mem, "Ana's salary is 95k")
    assert res.status == "superseding"  # type: ignore[attr-defined]
    assert res.superseded.id == old.record.id  # type: ignore[attr-defined]
    assert res.record.readers == ["ana", "hr"]  # type: ignore[attr-defined]


def test_a_hidden_fact_is_never_a_similar_one(vmem: Memory) -> None:
    vmem.facts.propose(ANA, claim="Ana is allergic to peanuts and tree nuts", kind="profile",
                       subject="ana", attribute="allergy", actor="user", source="hr:1",
                       readers=["hr"])
    res = vmem.facts.propose(ANA, claim="Ana is allergic to peanuts and to tree nuts",
                             kind="profile", subject="ana", attribute="allergies",
                             actor="user", source="chat:1")
    assert res.status == "committed" and res.similar == []
    assert "fact:" not in res.reason
    shown = vmem.facts.propose(ANA, claim="Ana is allergic to peanuts, and to tree nuts",
                               kind="profile", subject="ana", attribute="food_allergy",
                               actor="user", source="chat:2")
    assert shown.similar == [res.record.ref]  # type: ignore[union-attr]


@pytest.mark.parametrize("name", errors_module.__all__)
def test_every_error_has_a_hint(name: str) -> None:
    cls = getattr(errors_module, name)
    assert cls("what went wrong").hint
    assert cls("what went wrong", hint="do this").hint == "do this"


def test_a_malformed_feedback_ref_or_signal_says_what_to_pass(mem: Memory) -> None:
    for ref, signal in (("fact", "useful"), ("checkpoint:t@1", "useful"), (UNKNOWN, "great")):
        with pytest.raises(ValidationError) as caught:
            mem.feedback(ref, signal, scope=ANA)
        assert caught.value.hint


def test_an_agent_corrects_only_an_episode_its_principal_may_read(mem: Memory) -> None:
    from memstrata.interfaces.tools import ToolDispatcher

    held = mem.episodes.append(ANA, text="Legal hold on the Zephyrine archive", actor="user",
                               source="jira:1", readers=["ana"])
    agent = ToolDispatcher(mem, ANA, principal="helper-bot")
    try:
        hidden = agent.dispatch("log_episode", {"text": "the hold is lifted",
                                                "source": "chat:3", "supersedes": held.ref})
        missing = agent.dispatch("log_episode", {"text": "the hold is lifted",
                                                 "source": "chat:3", "supersedes": UNKNOWN})
    finally:
        agent.close()
    assert hidden["type"] == missing["type"] == "NotFound" and hidden["hint"]
    assert [e.text for e in mem.episodes.log(ANA)] == ["Legal hold on the Zephyrine archive"]


def test_a_held_claim_is_approved_only_by_a_reader_of_the_hidden_fact(mem: Memory) -> None:
    from memstrata import AccessDenied

    hidden = _salary(mem, "Ana's salary is 91k", readers=["hr"])
    held = _salary(mem, "Ana's salary is 95k")
    with pytest.raises(AccessDenied) as refused:
        mem.review.approve(held.record.id, by="lead", scope=ANA)  # type: ignore[attr-defined]
    assert refused.value.hint and "91k" not in str(refused.value)
    assert mem.facts.get(held.record.id, scope=ANA).status == "pending_review"  # type: ignore[attr-defined]
    assert [f.claim for f in mem.facts.current(ANA, principal="hr")] == ["Ana's salary is 91k"]
    done = mem.review.approve(held.record.id, by="hr lead", scope=ANA,  # type: ignore[attr-defined]
                              principal="hr")
    assert done.status == "superseding" and done.superseded.id == hidden.record.id  # type: ignore[attr-defined]


def test_an_agent_proposes_over_no_fact_its_principal_may_not_read(mem: Memory) -> None:
    from memstrata.interfaces.tools import ToolDispatcher

    hidden = _salary(mem, "Ana's salary is 91k", readers=["ana"])
    agent = ToolDispatcher(mem, ANA, principal="helper-bot", actor="user")
    try:
        out = agent.dispatch("propose_memory", {
            "claim": "Ana's salary is 95k", "kind": "profile", "subject": "ana",
            "attribute": "salary", "source": "chat:4"})
    finally:
        agent.close()
    assert out.get("status") == "pending" and HIDDEN_SLOT in str(out.get("reason")), out
    assert hidden.record.id not in str(out)  # type: ignore[attr-defined]
    assert [f.claim for f in mem.facts.current(ANA)] == ["Ana's salary is 91k"]
