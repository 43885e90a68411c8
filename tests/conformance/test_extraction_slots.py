"""Offline extraction names the slot after the question, never the answer, and files a
third-person statement under the person it names (memstrata.extraction.statements,
proposers, judges): a changed answer supersedes the old one or waits for review, never
two current answers. Explicit proposer + rules judge, on every backend."""

from __future__ import annotations

import pytest

from memstrata import Memory, Scope

ALICE = Scope(user="alice", project="docs")


def say(mem: Memory, text: str, session: str) -> None:
    report = mem.extract(ALICE, [{"role": "user", "content": f"Remember that {text}"}],
                         source=f"chat:{session}")
    assert report.errors == [] and len(report.items) == 1, report.summary()


@pytest.mark.parametrize(("old", "new", "slot"), [
    ("I prefer tabs.", "I prefer spaces.", "alice/preferred indentation"),
    ("I use Slack for chat.", "I use email for chat.", "alice/chat tool"),
    ("My manager is Carol.", "My manager is Dan.", "alice/manager"),
    ("I use Notion for notes.", "I use Obsidian for notes.", "alice/tool for notes"),
    ("Bob prefers spaces.", "Bob prefers tabs.", "bob/preferred indentation"),
    ("Bob's manager is Carol.", "Bob's manager is Erin.", "bob/manager"),
])
def test_a_changed_answer_supersedes_the_old_one(mem: Memory, old: str, new: str,
                                                 slot: str) -> None:
    say(mem, old, "s1")
    say(mem, new, "s2")
    [cur] = mem.facts.current(ALICE)
    assert f"{cur.subject}/{cur.attribute}" == slot
    assert new.rstrip(".") in cur.claim
    [before, now] = mem.facts.history(cur.id)
    assert now.id == cur.id
    assert before.status == "superseded" and before.superseded_by == cur.id
    assert old.rstrip(".") in before.claim


@pytest.mark.parametrize(("first", "second"), [
    ("Bob prefers spaces.", "Carol prefers tabs."),      # two people
    ("My manager is Carol.", "My mentor is Dan."),        # two questions
    ("I prefer tabs.", "Bob prefers spaces."),            # me and someone else
    ("I use Notion for notes.", "I use Slack for chat."),
])
def test_different_questions_or_people_coexist(mem: Memory, first: str, second: str) -> None:
    say(mem, first, "s1")
    say(mem, second, "s2")
    assert len(mem.facts.current(ALICE)) == 2
    assert mem.review.pending(ALICE) == []


def test_a_third_person_statement_is_about_the_person(mem: Memory) -> None:
    report = mem.extract(ALICE, [{"role": "user",
                                  "content": "Remember that Bob prefers spaces."}])
    [item] = report.items
    assert item.slot == "bob/preferred indentation"
    assert item.scope_reason is not None and "about bob" in item.scope_reason
    fact = mem.facts.get(item.ref or "")
    assert fact.scope == ALICE  # not the user's own preference, so it does not follow her
    assert mem.forget(ALICE, subject="bob", dry_run=True).counts["facts"] == 1
    assert mem.forget(ALICE, subject="alice", dry_run=True).counts["facts"] == 0
    # the user named by name is the user
    mine = mem.extract(ALICE, [{"role": "user", "content": "Remember that Alice prefers Go."}])
    assert mine.items[0].slot == "alice/preferred programming language"


def test_an_answer_stored_under_an_old_answer_named_slot_is_still_replaced(
        mem: Memory) -> None:
    """Facts written before the slot rule (``manager_carol``) are found by the judge: the
    same question with another value supersedes them."""
    old = mem.facts.propose(Scope(user="alice"), claim='alice said: "My manager is Carol"',
                            kind="relationship",
                            subject="alice", attribute="manager_carol", actor="user",
                            source="chat:s0")
    assert old.status == "committed"
    report = mem.extract(ALICE, [{"role": "user", "content": "Remember that my manager is Dan."}],
                         source="chat:s1")
    [item] = report.items
    assert item.status == "superseding" and item.superseded == old.record.ref  # type: ignore[union-attr]
    assert "the same question (manager)" in (item.judge or "")
    assert [f.claim for f in mem.facts.current(ALICE)] == ['alice said: "My manager is Dan"']


def test_the_same_question_with_descriptive_answers_goes_to_review(mem: Memory) -> None:
    say(mem, "my role is staff engineer on the platform team.", "s1")
    say(mem, "my role is tech lead for the docs site.", "s2")
    [cur] = mem.facts.current(ALICE)
    [waiting] = mem.review.pending(ALICE)
    assert "staff engineer" in cur.claim and "tech lead" in waiting.claim
    assert "may contradict" in (waiting.reason or "")
