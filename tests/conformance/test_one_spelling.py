"""One spelling for each idea in the public API; the older spellings still work.

- the query: ``query`` (``recall(need=...)`` and the tool argument ``need`` still work);
- the person: ``by`` (``reviewer=``, ``activated_by=``, ``proposed_by=``, ``updated_by=``);
- the limits: ``k`` for ranked results (one cap everywhere), ``limit`` for listings,
  ``facts_limit`` in context (``facts_cap=``);
- dates: ISO strings or aware datetimes, everywhere;
- not found: ``get`` raises NotFound, "is there one?" reads return None, the scratch read
  tells "not set" from a stored value;
- one default confidence; provenance required on episodes as on facts.
"""

from __future__ import annotations

from typing import Any

import pytest

from memstrata import (
    Memory,
    NotFound,
    Scope,
    ScratchRead,
    ToolDispatcher,
    ValidationError,
)
from memstrata.arguments import ProposeMemoryArgs
from memstrata.extraction.proposers import ExplicitProposer, Proposal
from memstrata.inputs import MAX_K
from memstrata.models import DEFAULT_CONFIDENCE

ALICE = Scope(user="alice", project="docs-site")
PROC: dict[str, Any] = {"name": "deploy", "owner": "alice", "steps": ["build"],
                        "cases": [{"state": {"conditions": []}, "expect": {"next_step": "build"}}]}


def test_the_query_argument(mem: Memory) -> None:
    mem.episodes.append(ALICE, text="The build cache was stale", actor="tool", source="ci")
    a = mem.recall(ALICE, "stale build cache")
    b = mem.recall(ALICE, query="stale build cache")
    c = mem.recall(ALICE, need="stale build cache")
    assert a.refs == b.refs == c.refs and a.refs
    with pytest.raises(ValidationError):
        mem.recall(ALICE, query="one thing", need="another")
    with ToolDispatcher(mem, ALICE) as tools:
        assert tools.dispatch("recall", {"query": "stale build cache"})["items"]
        assert tools.dispatch("recall", {"need": "stale build cache"})["items"]


def test_the_person_is_by(mem: Memory) -> None:
    res = mem.facts.propose(ALICE, claim="Alice leads docs", kind="profile", subject="alice",
                            attribute="role", actor="agent", source="chat")
    old = mem.facts.propose(ALICE, claim="Alice edits docs", kind="profile", subject="alice",
                            attribute="duty", actor="agent", source="chat")
    assert res.record is not None and old.record is not None
    for fid, kw in ((res.record.id, {"by": "carol"}), (old.record.id, {"reviewer": "carol"})):
        approved = mem.review.approve(fid, **kw).record
        assert approved is not None and approved.reviewer == "carol"
    with pytest.raises(ValidationError):
        mem.review.approve(res.record.id)  # nobody named
    p = mem.procedures.propose(PROC, by="dana")
    assert p.proposed_by == "dana"
    assert mem.procedures.propose({**PROC, "version": 2}, proposed_by="erin").proposed_by == "erin"
    assert mem.procedures.activate("deploy", 1, by="alice").activated_by == "alice"
    assert mem.procedures.activate("deploy", 2, activated_by="bob").activated_by == "bob"
    assert mem.checkpoints.save(ALICE, "t", objective="x", by="cli").updated_by == "cli"
    assert mem.checkpoints.save(ALICE, "t", objective="y", updated_by="run").updated_by == "run"


def test_one_cap_for_k_everywhere(mem: Memory) -> None:
    mem.episodes.append(ALICE, text="release notes drafted", actor="user", source="chat")
    assert mem.recall(ALICE, "release notes", k=MAX_K) is not None
    assert mem.episodes.search(ALICE, "release notes", k=MAX_K) is not None
    for call in (lambda: mem.recall(ALICE, "release notes", k=MAX_K + 1),
                 lambda: mem.episodes.search(ALICE, "release notes", k=MAX_K + 1),
                 lambda: mem.recall(ALICE, "release notes", k=0),
                 lambda: mem.recall(ALICE, "release notes", k="5")):
        with pytest.raises(ValidationError):
            call()
    with ToolDispatcher(mem, ALICE) as tools:
        for name, arg in (("recall", "query"), ("search_history", "query")):
            assert "error" not in tools.dispatch(name, {arg: "release", "k": MAX_K})
            assert tools.dispatch(name, {arg: "release", "k": MAX_K + 1})["type"] == \
                "ValidationError"


def test_facts_limit_in_context(mem: Memory) -> None:
    for i in range(3):
        mem.facts.propose(ALICE, claim=f"Fact number {i}", kind="preference", subject="alice",
                          attribute=f"a{i}", actor="user", source="chat")
    a = mem.context(ALICE, facts_limit=1)
    b = mem.context(ALICE, facts_cap=1)
    assert [m.ref for m in a.included()] == [m.ref for m in b.included()]
    assert len(a.included()) == 1
    with pytest.raises(ValidationError):
        mem.context(ALICE, facts_limit="5")


def test_not_found_and_is_there_one(mem: Memory) -> None:
    with pytest.raises(NotFound):
        mem.facts.get("01ZZZZZZZZZZZZZZZZZZZZZZZZ")
    with pytest.raises(NotFound):
        mem.get("episode:01ZZZZZZZZZZZZZZZZZZZZZZZZ")
    assert mem.checkpoints.current(ALICE, "nothing-yet") is None
    assert mem.ledger.get(ALICE, "no-such-key") is None
    with mem.run(ALICE) as run:
        missing = run.scratch.read("k")
        assert isinstance(missing, ScratchRead) and not missing.found
        assert missing == "k is not set"
        run.scratch.write("k", "k is not set")  # a value that reads like the message
        stored = run.scratch.read("k")
        assert stored.found and stored.value == "k is not set"
        assert run.scratch.get("other", default="none") == "none"


def test_one_default_confidence() -> None:
    assert ProposeMemoryArgs.model_fields["confidence"].default == DEFAULT_CONFIDENCE
    assert Proposal.model_fields["confidence"].default == DEFAULT_CONFIDENCE
    assert ExplicitProposer().confidence == DEFAULT_CONFIDENCE


def test_the_api_default_confidence_is_the_same(mem: Memory) -> None:
    res = mem.facts.propose(ALICE, claim="Uses tabs", kind="preference", subject="alice",
                            attribute="indent", actor="user", source="chat")
    assert res.record is not None and res.record.confidence == DEFAULT_CONFIDENCE


def test_episodes_need_their_provenance(mem: Memory) -> None:
    for missing in ({"actor": None}, {"source": None}):
        with pytest.raises(ValidationError, match=r"actor|source"):
            mem.episodes.append(ALICE, text="x", **{"actor": "user", "source": "s", **missing})
    assert mem.episodes.search(ALICE, "x") == []


def test_null_means_the_default_for_tool_arguments(mem: Memory) -> None:
    with ToolDispatcher(mem, ALICE) as tools:
        out = tools.dispatch("search_history", {"query": "anything", "k": None, "since": None})
        assert "error" not in out
        out = tools.dispatch("get_durable_records", {"limit": None, "kind": None})
        assert "error" not in out
