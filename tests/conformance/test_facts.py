"""Durable facts: the write policy steps of the core, supersession, review, expiry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from memstrata import Conflict, ManualClock, Memory, NotFound, Scope

FACT = dict(kind="preference", subject="alice", attribute="standup_format", actor="user",
            source="chat:2026-08-03", confidence=0.9)


def test_supersession_chain_of_three_keeps_history_and_one_current(
        mem: Memory, alice: Scope, clock: ManualClock) -> None:
    first = mem.facts.propose(alice, claim="Prefers async standup updates", **FACT)
    clock.advance(days=20)
    second = mem.facts.propose(alice, claim="Live standups are back this quarter", **FACT)
    clock.advance(days=30)
    third = mem.facts.propose(alice, claim="Standups are async again, Mondays live", **FACT)
    assert (first.status, second.status, third.status) == ("committed", "superseding",
                                                           "superseding")
    assert second.superseded is not None and second.superseded.id == first.record.id
    current = mem.facts.current(alice)
    assert [f.claim for f in current] == ["Standups are async again, Mondays live"]
    chain = mem.facts.history(third.record.id)
    assert [f.claim for f in chain] == ["Prefers async standup updates",
                                        "Live standups are back this quarter",
                                        "Standups are async again, Mondays live"]
    assert [f.status for f in chain] == ["superseded", "superseded", "active"]
    assert chain[0].superseded_by == chain[1].id and chain[1].supersedes == chain[0].id
    assert chain[0].valid_to is not None and chain[0].valid_to == chain[1].valid_from
    assert chain[1].valid_to is not None and chain[1].valid_to > chain[0].valid_to
    assert all(f.reason for f in chain[:2])
    # history from any member gives the same chain
    assert [f.id for f in mem.facts.history(first.record.id)] == [f.id for f in chain]
    assert mem.doctor() == []


def test_equivalent_claim_is_a_duplicate_that_confirms_the_older_record(
        mem: Memory, alice: Scope, clock: ManualClock) -> None:
    first = mem.facts.propose(alice, claim="Prefers async standup updates.", **FACT)
    clock.advance(days=3)
    again = mem.facts.propose(alice, claim="  prefers ASYNC standup updates ", **FACT)
    assert again.status == "duplicate"
    assert again.record is not None and first.record is not None
    assert again.record.id == first.record.id
    assert again.record.last_confirmed_at == clock.now()
    assert len(mem.facts.list(alice)) == 1


def test_provenance_and_confidence_rules_reject_and_report(mem: Memory, alice: Scope) -> None:
    no_source = mem.facts.propose(alice, claim="Uses vim", **{**FACT, "source": ""})
    assert no_source.status == "rejected" and "source" in no_source.reason
    no_actor = mem.facts.propose(alice, claim="Uses vim", **{**FACT, "actor": None})
    assert no_actor.status == "rejected" and "actor" in no_actor.reason
    low = mem.facts.propose(alice, claim="Might use vim", **{**FACT, "confidence": 0.4})
    assert low.status == "rejected" and "confidence" in low.reason
    assert mem.facts.list(alice) == []


def test_identity_waits_for_a_person_and_approval_supersedes(mem: Memory, alice: Scope) -> None:
    ident = dict(FACT, kind="profile", attribute="role", tier="identity")
    res = mem.facts.propose(alice, claim="Alice is the docs lead", **ident)
    assert res.status == "pending" and res.record is not None
    assert res.record.status == "pending_review"
    assert mem.facts.current(alice) == []
    assert [f.id for f in mem.review.pending(alice)] == [res.record.id]
    ok = mem.review.approve(res.record.id, reviewer="bob")
    assert ok.status == "committed" and ok.record is not None
    assert ok.record.status == "active" and ok.record.reviewer == "bob"
    nxt = mem.facts.propose(alice, claim="Alice is the platform lead", **ident)
    assert nxt.status == "pending"
    assert mem.facts.current(alice)[0].claim == "Alice is the docs lead"
    assert nxt.record is not None
    done = mem.review.approve(nxt.record.id, reviewer="bob")
    assert done.status == "superseding"
    assert [f.claim for f in mem.facts.current(alice)] == ["Alice is the platform lead"]
    with pytest.raises(Conflict):
        mem.review.approve(nxt.record.id, reviewer="bob")


def _approved_identity(mem: Memory, alice: Scope) -> str:
    res = mem.facts.propose(alice, claim="Alice works at Initech", **dict(
        FACT, kind="profile", attribute="employer", tier="identity"))
    assert res.record is not None
    mem.review.approve(res.record.id, by="bob")
    return res.record.id


def test_only_a_person_changes_an_identity_fact(mem: Memory, alice: Scope) -> None:
    """Who someone is changes only when a person says so (before, each of these changed an
    approved identity fact with no person involved): a plain claim for its slot, even the
    user's (a user-mode MCP server writes as the user), waits for review; an approval by
    a program's name is refused; feedback, an agent's retire and an agent's forget leave
    it (the forget reports it kept); a person's approval, retire and forget still act."""
    from memstrata import AccessDenied, ToolDispatcher

    fid = _approved_identity(mem, alice)
    plain = dict(FACT, kind="profile", attribute="employer")
    for actor, firm in (("user", "Globex"), ("agent", "Hooli")):
        res = mem.facts.propose(alice, claim=f"Alice works at {firm}", **{**plain,
                                                                         "actor": actor})
        assert res.status == "pending" and res.record is not None, res
        for machine in ("agent", "tool", "System", "agent:claude"):
            with pytest.raises(AccessDenied):
                mem.review.approve(res.record.id, by=machine)
    assert [f.id for f in mem.facts.current(alice)] == [fid]
    for _ in range(3):
        assert mem.feedback(f"fact:{fid}", "contradicted", scope=alice)["action"] == "recorded"
    # a model's tools, also a user-mode server's (it relays the model's calls as the user)
    for agent in (ToolDispatcher(mem, alice), ToolDispatcher(mem, alice, actor="user")):
        refused = agent.dispatch("retire_fact", {"ref": f"fact:{fid}", "reason": "moved on"})
        assert refused["type"] == "AccessDenied" and refused["hint"]
        kept = agent.dispatch("forget", {"match": "initech"})
        assert kept["counts"]["facts"] == 0 and kept["kept"] == [f"fact:{fid}"]
        assert any("identity" in n for n in kept["notes"])
    with pytest.raises(AccessDenied):
        mem.facts.retire(fid, reason="moved on", scope=alice, actor="tool")
    assert mem.facts.get(fid, alice).status == "active"
    pending = [f for f in mem.review.pending(alice) if "Globex" in f.claim]
    done = mem.review.approve(pending[0].id, by="carol")
    assert done.status == "superseding" and done.superseded is not None
    assert done.superseded.id == fid
    # the slot still says who alice is: the approved claim is an identity fact, which an
    # agent may not retire either (before: a standard fact, retired at once)
    assert done.record is not None and done.record.tier == "identity"
    refused = ToolDispatcher(mem, alice).dispatch(
        "retire_fact", {"ref": done.record.ref, "reason": "moved on"})
    assert refused["type"] == "AccessDenied"
    person = ToolDispatcher(mem, alice, actor="user", person=True)  # a reviewer's REST call
    out = person.dispatch("forget", {"match": "initech"})
    assert out["counts"]["facts"] == 1 and not out.get("kept")


def test_a_confirmed_fact_is_fresh_again(mem: Memory, alice: Scope, clock: ManualClock) -> None:
    """The user restating a stale fact moves its recheck date as far past the confirmation
    as it lay past the one before (before, it stayed stale and recall kept flagging it for
    verification); its expiry stays where it was. An agent saying it again, or finding it
    useful, confirms nothing: it stays stale."""
    sys = dict(kind="system_fact", subject="docs-site", attribute="hosting", actor="user")
    first = mem.facts.propose(alice, claim="The docs site is hosted on Netlify",
                              source="chat:1", **sys).record
    assert first is not None and first.recheck_after is not None
    interval = first.recheck_after - first.created_at  # type: ignore[operator]
    clock.advance(days=interval.days + 10)
    assert mem.facts.get(first.id, alice).is_stale(clock.now())
    assert mem.recall(alice, "where is the docs site hosted").items[0].needs_verification
    agent = mem.facts.propose(alice, claim="The docs site is hosted on Netlify",
                              source="chat:2", **{**sys, "actor": "agent"})
    assert agent.status == "duplicate" and "confirms nothing" in agent.reason
    assert mem.feedback(first.ref, "useful", scope=alice)["action"] == "recorded"
    assert mem.facts.get(first.id, alice).is_stale(clock.now())
    again = mem.facts.propose(alice, claim="The docs site is hosted on Netlify",
                              source="chat:3", **sys)
    assert again.status == "duplicate"
    fresh = mem.facts.get(first.id, alice)
    assert not fresh.is_stale(clock.now())
    assert fresh.recheck_after == clock.now() + interval
    assert fresh.expires_at == first.expires_at
    assert not mem.recall(alice, "where is the docs site hosted").items[0].needs_verification


def test_reject_and_edit_and_approve(mem: Memory, alice: Scope) -> None:
    ident = dict(FACT, kind="profile", attribute="team", tier="identity")
    a = mem.facts.propose(alice, claim="Alice works in team Blu", **ident)
    assert a.record is not None
    edited = mem.review.approve(a.record.id, reviewer="carol", claim="Alice works in team Blue")
    assert edited.record is not None and edited.record.claim == "Alice works in team Blue"
    b = mem.facts.propose(alice, claim="Alice is on team Green", **ident)
    assert b.record is not None
    rejected = mem.review.reject(b.record.id, reason="wrong person")
    assert rejected.status == "rejected" and rejected.reason == "wrong person"
    assert [f.claim for f in mem.facts.current(alice)] == ["Alice works in team Blue"]


def test_retire_and_expiry_and_recheck(mem: Memory, alice: Scope, clock: ManualClock) -> None:
    r = mem.facts.propose(alice, claim="Deploys go through Jenkins", kind="system_fact",
                          subject="deploys", attribute="pipeline", actor="user",
                          source="wiki:deploy")
    assert r.record is not None
    # a volatile kind gets a default expiry and recheck date (no expiry rule is a decision)
    assert r.record.expires_at is not None and r.record.recheck_after is not None
    assert r.record.recheck_after < r.record.expires_at
    short = mem.facts.propose(alice, claim="Office closed this week", kind="constraint",
                              subject="office", attribute="open", actor="user",
                              source="chat", expires_at=clock.now() + timedelta(days=7))
    assert short.record is not None
    assert {f.claim for f in mem.facts.current(alice)} == {"Deploys go through Jenkins",
                                                           "Office closed this week"}
    clock.advance(days=8)
    assert [f.claim for f in mem.facts.current(alice)] == ["Deploys go through Jenkins"]
    swept = mem.sweep()
    assert swept["facts"] == 1
    assert mem.facts.get(short.record.id).status == "expired"
    retired = mem.facts.retire(r.record.id, reason="moved to GitHub Actions")
    assert retired.status == "retired" and retired.valid_to == clock.now()
    assert mem.facts.current(alice) == []
    with pytest.raises(Conflict):
        mem.facts.retire(r.record.id, reason="again")
    with pytest.raises(NotFound):
        mem.facts.get("01ZZZZZZZZZZZZZZZZZZZZZZZZ")


def test_current_is_capped_and_identity_first(mem: Memory, alice: Scope) -> None:
    for i in range(45):
        mem.facts.propose(alice, claim=f"Likes topic number {i}", kind="preference",
                          subject="alice", attribute=f"topic_{i}", actor="user", source="chat")
    ident = mem.facts.propose(alice, claim="Alice is the docs lead", kind="profile",
                              subject="alice", attribute="role", actor="user", source="chat",
                              tier="identity")
    assert ident.record is not None
    mem.review.approve(ident.record.id, reviewer="bob")
    current = mem.facts.current(alice)
    assert len(current) == 40
    assert current[0].tier == "identity"
    assert len(mem.facts.current(alice, limit=100)) == 46


def test_the_users_own_statement_confirms_a_pending_agent_claim(mem: Memory) -> None:
    scope = Scope(user="alice", project="docs-site")
    kw: dict[str, Any] = dict(kind="preference", subject="alice", attribute="standup_format",
                              source="chat")
    agent = mem.facts.propose(scope, claim="Alice prefers async standups", actor="agent", **kw)
    assert agent.status == "pending" and agent.record is not None
    user = mem.facts.propose(scope, claim="Alice prefers async standups.", actor="user", **kw)
    assert user.status == "committed" and user.record is not None
    assert agent.record.id in user.reason
    assert [f.id for f in mem.facts.current(scope)] == [user.record.id]
    closed = mem.facts.get(agent.record.id)
    assert closed.status == "rejected" and user.record.id in (closed.reason or "")
    assert mem.review.pending(scope) == []
    # another agent restatement is still a duplicate of the current fact
    again = mem.facts.propose(scope, claim="Alice prefers async standups", actor="agent", **kw)
    assert again.status == "duplicate" and again.record is not None
    assert again.record.id == user.record.id


def test_a_similar_pending_claim_of_another_slot_stays_in_review(vmem: Memory) -> None:
    """The user's statement is stored, and a pending claim found only by similarity (another
    slot) is neither closed as confirmed nor taken for the user's statement."""
    scope = Scope(user="alice", project="docs-site")
    agent = vmem.facts.propose(scope, claim="Alice prefers async standup updates",
                               kind="preference", subject="alice", attribute="standup_format",
                               actor="agent", source="chat:1")
    assert agent.status == "pending" and agent.record is not None
    user = vmem.facts.propose(scope, claim="Alice prefers async standup updates.",
                              kind="preference", subject="alice", attribute="status_updates",
                              actor="user", source="chat:2")
    assert user.status == "committed" and user.record is not None
    assert "confirms" not in user.reason and user.similar == [agent.record.ref]
    assert vmem.facts.get(agent.record.id).status == "pending_review"
    assert [f.id for f in vmem.review.pending(scope)] == [agent.record.id]


@pytest.mark.parametrize(("first", "second"), [
    (("Alice lives in Lyon", "home_city"), ("Alice works in Lyon", "work_city")),
    (("Alice's manager is Priya", "manager"), ("Alice's mentor is Priya", "mentor")),
    (("Alice prefers tea in the morning", "morning_drink"),
     ("Alice prefers tea in the evening", "evening_drink")),
])
def test_similarity_never_drops_a_claim_about_another_slot(
        vmem: Memory, first: tuple[str, str], second: tuple[str, str]) -> None:
    """Near by cosine but about another slot: both are stored and current; the second
    result only names the first as similar (a suggestion)."""
    scope = Scope(user="alice")
    kw = {"kind": "preference", "subject": "alice", "actor": "user"}
    one = vmem.facts.propose(scope, claim=first[0], attribute=first[1], source="chat:1", **kw)
    two = vmem.facts.propose(scope, claim=second[0], attribute=second[1], source="chat:2",
                             **kw)
    assert (one.status, two.status) == ("committed", "committed")
    assert one.record is not None and two.record is not None
    assert {f.claim for f in vmem.facts.current(scope)} == {first[0], second[0]}
    assert set(two.similar) <= {one.record.ref}
    assert vmem.facts.get(one.record.id).last_confirmed_at == one.record.last_confirmed_at


def test_the_review_loop_on_the_command_line(mem: Memory, store_url: str) -> None:
    from click.testing import CliRunner

    from memstrata.cli import cli

    scope = Scope(user="alice", project="docs-site")
    ids = {}
    for attr, source in (("role", "crawl:wiki"), ("team", "crawl:wiki"), ("tz", "chat:9"),
                         ("pet", "chat:10")):
        res = mem.facts.propose(scope, claim=f"Alice's {attr} is noted", kind="profile",
                                subject="alice", attribute=attr, actor="tool", source=source)
        assert res.status == "pending" and res.record is not None
        ids[attr] = res.record.id
    flags = ["--url", store_url, "--user", "alice", "--project", "docs-site"]
    runner = CliRunner()
    listed = runner.invoke(cli, ["review", "list", *flags], env={"COLUMNS": "80"})
    assert listed.exit_code == 0 and all(i in listed.output for i in ids.values())
    bulk = runner.invoke(cli, ["review", "approve", "--all", "--source", "crawl:", *flags])
    assert bulk.exit_code == 0, bulk.output
    assert "approved 2 of 2" in bulk.output
    assert {f.attribute for f in mem.facts.current(scope)} == {"role", "team"}
    assert mem.facts.get(ids["role"]).reviewer  # the login name by default
    # interactive, in queue order: edit-and-approve the first, reject the second
    first, second = [f.attribute for f in mem.review.pending(scope)]
    out = runner.invoke(cli, ["review", *flags, "--reviewer", "carol"],
                        input="e\nAlice works in UTC+1\nr\nnot a fact about work\n")
    assert out.exit_code == 0, out.output
    assert "1 approved, 1 rejected" in out.output
    current = {f.attribute: f for f in mem.facts.current(scope)}
    assert current[first].claim == "Alice works in UTC+1"
    assert current[first].reviewer == "carol"
    assert mem.facts.get(ids[second]).status == "rejected"
    usage = runner.invoke(cli, ["review", "approve", *flags])
    assert usage.exit_code == 2


def test_subject_groups_apply_the_readers_rule(mem: Memory) -> None:
    scope = Scope(user="alice")
    mem.facts.propose(scope, claim="The HR note is filed", kind="system_fact",
                      subject="lg.hr", attribute="note", actor="user", source="hr",
                      readers=["rita"])
    mem.facts.propose(scope, claim="The wiki is public", kind="system_fact",
                      subject="lg.wiki", attribute="note", actor="user", source="wiki")
    seen = {s for _, s, _ in mem.facts.subject_groups(scope, "lg", principal="otto")}
    assert seen == {"lg.wiki"}
    seen = {s for _, s, _ in mem.facts.subject_groups(scope, "lg", principal="rita")}
    assert seen == {"lg.hr", "lg.wiki"}


def test_a_program_retires_only_what_its_own_scope_holds(mem: Memory) -> None:
    """An agent working for alice in a project retires the project's facts it may read only
    when they are alice's own: a project-wide fact is everyone's in the project (as
    feedback on it changes nothing); a person, or the operator, retires it."""
    from memstrata import AccessDenied, ToolDispatcher

    project = Scope(project="docs-site")
    alice = Scope(user="alice", project="docs-site")
    shared = mem.facts.propose(project, claim="Docs deploy from main", kind="constraint",
                               subject="docs", attribute="branch", actor="user",
                               source="chat:1").record
    own = mem.facts.propose(alice, claim="Alice drafts the changelog", kind="relationship",
                            subject="alice", attribute="changelog", actor="user",
                            source="chat:2").record
    assert shared is not None and own is not None
    with pytest.raises(AccessDenied, match="applies beyond"):
        mem.facts.retire(shared.id, reason="stale", scope=alice, actor="agent")
    with ToolDispatcher(mem, alice) as tools:
        refused = tools.dispatch("retire_fact", {"ref": shared.ref, "reason": "stale"})
        assert refused["type"] == "AccessDenied" and refused["hint"]
        assert tools.dispatch("retire_fact", {"ref": own.ref, "reason": "done"})[
            "status"] == "retired"
    assert mem.facts.get(shared.id).status == "active"
    assert mem.facts.retire(shared.id, reason="stale", scope=alice, actor="rita"
                            ).status == "retired"


def test_retire_refuses_an_actor_that_is_no_name(mem: Memory) -> None:
    """The fuzz found facts.retire(actor=nan) raising AttributeError once the shared-beyond
    rule read the actor for every fact: the actor is checked first, a typed error."""
    from memstrata import ValidationError

    fid = mem.facts.propose(Scope(user="alice"), claim="Alice prefers tea", kind="preference",
                            subject="alice", attribute="drink", actor="user",
                            source="chat:1").record.id
    for bad in (float("nan"), 3, ["agent"], ""):
        with pytest.raises(ValidationError):
            mem.facts.retire(fid, reason="stale", scope=Scope(user="alice"), actor=bad)
    assert mem.facts.get(fid).status == "active"
