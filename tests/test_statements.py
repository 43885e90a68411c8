"""Reading statements without a model (memstrata.extraction.statements) and the offline
contradiction rules built on it (memstrata.extraction.judges.compare_claims)."""

from __future__ import annotations

import pytest

from memstrata.extraction.judges import compare_claims
from memstrata.extraction.statements import named_scope, read, slot_attribute


@pytest.mark.parametrize(("text", "predicate", "obj", "slot"), [
    ("I prefer Python.", "prefer", "python", "preferred programming language"),
    ('alice said: "I prefer Go"', "prefer", "go", "preferred programming language"),
    ("We use TypeScript for all automation scripts", "use", "typescript",
     "programming language"),
    ("UPDATE: switched to Python for automation, ignore the TypeScript rule", "use", "python",
     "programming language"),
    ("we moved from Jenkins to GitHub Actions", "use", "github actions", "ci service"),
    ("I'd rather have British English in this publication", "prefer", "british english",
     "preferred english variant"),
    ("I like short answers with bullet points", "prefer", "short answers",
     "preferred answer format"),
    ("I prefer working late", "prefer", "working late", None),
    ("The deploy failed yesterday", None, None, None),
])
def test_read_finds_predicate_object_and_slot(text: str, predicate: str | None,
                                              obj: str | None, slot: str | None) -> None:
    st = read(text)
    assert (st.predicate, st.obj, slot_attribute(st)) == (predicate, obj, slot)


@pytest.mark.parametrize(("old", "new", "verdict"), [
    ("I prefer Python", "I prefer Go", "supersede"),
    ("We use TypeScript for all automation scripts",
     "UPDATE: switched to Python for automation, ignore the TypeScript rule", "supersede"),
    ("I like coffee", "I no longer drink coffee, I'm on green tea now", "supersede"),
    ("We use npm here", "From now on we use pnpm instead of npm", "supersede"),
    ("I prefer working late", "I prefer working early", "review"),
    ("I prefer Python", "I use Vim", "coexist"),
    ("I like tea", "I prefer Python", "coexist"),
    ("I prefer Python", "I prefer Python", "coexist"),
    ("The team prefers async standups", "We want live standups on Mondays", "supersede"),
    # ordinary sentences that only mention a term never replace a fact
    ("We use Postgres for the main database",
     "Do not run migrations on Postgres during business hours", "coexist"),
    ("I want to go home early on Fridays", "I prefer Python", "coexist"),
    ("I prefer small teams", "I prefer Slack for chat", "coexist"),
    ("I use vim", "I don't use vim keybindings in the browser", "coexist"),
    ("I use Vim", "I no longer use Vim", "supersede"),
    ("We do R&D on Fridays", "I prefer R", "coexist"),
])
def test_compare_claims(old: str, new: str, verdict: str) -> None:
    assert compare_claims(old, new, "fact:1")[0] == verdict


@pytest.mark.parametrize(("text", "named"), [
    ("I want Australian English for this publication", "for this publication"),
    ("In this repo I want tabs, not spaces", "In this repo"),
    ("On this service I prefer Terraform plans in the PR", "On this service"),
    ("I prefer Python", None),
    ("I want British English everywhere, in this project too", None),
])
def test_named_scope(text: str, named: str | None) -> None:
    assert named_scope(text) == named
