"""Conflict judges and the similarity search that feeds them (memstrata.extraction.judges)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from llm_server import LLMTestServer, Reply, openai_body
from memstrata import ManualClock, Memory, ProviderError, Scope
from memstrata.extraction.judges import (
    NEGATION,
    LLMJudge,
    SlotJudge,
    conflict_candidates,
    content_terms,
    resolve,
    same_terms,
    slot_key,
    term_overlap,
)
from memstrata.governance.policy import Candidate
from memstrata.models import Fact, build
from memstrata.providers.llm import OpenAICompatibleClient

ALICE = Scope(user="alice")


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as srv:
        yield srv


def fact(mem: Memory, claim: str, attribute: str, *, scope: Scope = ALICE,
         kind: str = "preference", subject: str = "alice") -> Fact:
    res = mem.facts.propose(scope, claim=claim, kind=kind, subject=subject, attribute=attribute,
                            actor="user", source="chat:1")
    assert res.record is not None
    return res.record


def cand(claim: str, attribute: str, *, scope: Scope = ALICE, kind: str = "preference",
         subject: str = "alice") -> Candidate:
    return build(Candidate, scope=scope, kind=kind, subject=subject, attribute=attribute,
                 claim=claim, actor="user", source="chat:2#turn-3",
                 evidence="live standups are back this quarter")


def test_terms_keep_negation_and_ignore_names_and_inflection() -> None:
    assert content_terms("Alice prefers async stand-up updates.", drop=["alice"]) == \
        content_terms("I prefer async standup update")
    wants = content_terms("Alice wants live standups", drop=["alice"])
    does_not = content_terms("Alice doesn't want live standups", drop=["alice"])
    assert NEGATION in does_not and NEGATION not in wants
    assert not same_terms(wants, does_not)
    assert term_overlap(content_terms("prefers async standup updates"),
                        content_terms("live standups are back this quarter")) == 0.25
    assert slot_key("Alice", "Standup-Formats") == slot_key("alice", "standup_format")
    assert slot_key("alice", "standup_format") != slot_key("alice", "standup_time")


def test_slot_judge_supersedes_only_the_same_question(mem: Memory) -> None:
    old = fact(mem, "Alice prefers async standup updates.", "standup_format")
    judge = SlotJudge()
    same = judge.judge(old, cand("Alice is back to live standups.", "Standup formats"))
    other = judge.judge(old, cand("Alice is back to live standups.", "meeting_cadence"))
    assert (same.verdict, other.verdict) == ("supersede", "coexist")
    assert old.ref in same.reason and same.judge == "slot"


def test_conflict_candidates_stay_in_the_exact_scope_and_skip_the_own_slot(
        mem: Memory) -> None:
    old = fact(mem, "Alice prefers async standup updates.", "standup_format")
    own = fact(mem, "Alice wants standups at 9:30.", "standup_time")
    fact(mem, "Bob prefers async standup updates.", "standup_format",
         scope=Scope(user="bob"), subject="bob")
    fact(mem, "Alice prefers async standup updates.", "standup_format",
         scope=Scope(user="alice", project="docs-site"))
    fact(mem, "Alice writes release notes in British English.", "release_notes_language")
    found = conflict_candidates(
        mem.facts, cand("Alice's team is back to live standups this quarter.", "standup_time"))
    assert [(s.fact.id, s.how) for s in found] == [(old.id, "terms")]
    assert own.id not in {s.fact.id for s in found}
    slot_variant = conflict_candidates(mem.facts, cand("Alice is on Mondays.", "Standup-Formats"))
    assert (slot_variant[0].fact.id, slot_variant[0].how) == (old.id, "slot")
    assert [s.how for s in slot_variant[1:]] == ["terms"]  # "standup" in standup_time


def test_resolve_routes_a_supersession_into_the_existing_slot(
        mem: Memory, clock: ManualClock) -> None:
    old = fact(mem, "Alice prefers async standup updates.", "standup_format")
    clock.advance(days=30)
    res = resolve(mem.facts, cand("Alice is back to live standups.", "Standup formats"),
                  SlotJudge())
    assert res.action == "supersede" and res.target is not None and res.target.id == old.id
    assert (res.candidate.subject, res.candidate.attribute) == ("alice", "standup_format")
    written = mem.facts.propose_candidate(res.candidate)
    assert written.status == "superseding" and written.superseded is not None
    assert written.superseded.id == old.id
    coexist = resolve(mem.facts, cand("Alice's standup notes go to #docs.", "standup_channel"),
                      SlotJudge())
    assert coexist.action == "as_proposed" and coexist.judged
    assert coexist.note is not None and "coexists with" in coexist.note


def test_resolve_routes_an_equivalent_claim_as_a_duplicate(
        mem: Memory, clock: ManualClock) -> None:
    old = fact(mem, "Alice prefers async standup updates.", "standup_format")
    clock.advance(days=2)
    res = resolve(mem.facts, cand("Prefers async stand-up updates", "status_updates"), SlotJudge())
    assert res.action == "duplicate" and res.note == f"same content words as {old.ref}"
    written = mem.facts.propose_candidate(res.candidate)
    assert written.status == "duplicate" and written.record is not None
    assert written.record.id == old.id and written.record.last_confirmed_at == clock.now()
    negated = resolve(mem.facts, cand("Alice does not prefer async standup updates.",
                                "status_updates"), SlotJudge())
    assert negated.action != "duplicate"


def test_llm_judge_over_openai_http(mem: Memory, server: LLMTestServer) -> None:
    old = fact(mem, "Alice prefers async standup updates.", "standup_format")
    client = OpenAICompatibleClient(server.openai_base_url, "Qwen/Qwen2.5-7B-Instruct",
                                    max_retries=0)
    server.queue_recording("extraction_vllm_judge_coexist")
    verdict = LLMJudge(client).judge(old, cand("Add a 9:30 slot to the calendar template.",
                                               "calendar_template"))
    assert verdict.verdict == "coexist" and verdict.judge == "llm"
    assert verdict.reason.startswith("The calendar template is a separate question")
    [request] = server.requests
    assert request.body["response_format"]["json_schema"]["name"] == "conflict_judgement"
    prompt = request.body["messages"][1]["content"]
    assert "EXISTING record" in prompt and "Alice prefers async standup updates." in prompt
    assert "live standups are back this quarter" in prompt  # the new claim's evidence

    server.queue_openai(Reply(body=openai_body('{"verdict": "maybe", "reason": "unsure"}')))
    with pytest.raises(ProviderError, match="does not fit the schema"):
        LLMJudge(client).judge(old, cand("x y z", "calendar_template"))


def test_cosine_finds_conflict_candidates_without_shared_words(
        vmem: Memory, clock: ManualClock) -> None:
    with contextlib.nullcontext(vmem) as mem:
        old = fact(mem, "Alice prefers written status reports.", "status_reports")
        fact(mem, "Alice writes release notes in British English.", "release_notes_language")
        probe = cand("Alice would rather discuss progress in a meeting.", "progress_meetings")
        assert term_overlap(content_terms(probe.claim, drop=["alice"]),
                            content_terms(old.claim, drop=["alice"])) < 0.2
        assert conflict_candidates(mem.facts, probe, min_cosine=1.1) == []  # words alone: nothing
        found = conflict_candidates(mem.facts, probe)
        assert [(s.fact.id, s.how) for s in found] == [(old.id, "cosine")]
        assert 0.5 <= found[0].score < 0.9
