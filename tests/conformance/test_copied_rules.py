"""Regressions of the defects that copied rules caused, on every backend.

1. by-id access ignored the caller's scope and readers (feedback retired another user's
   fact; ``facts.get`` returned it);
2. a supersession through review dropped the old fact's restricted readers;
3. an edited claim kept the old claim's vector;
4. ``recall`` refused a date string that ``search`` accepted;
5. forget reported vectors that never existed (and a dry run disagreed with the real one);
6. an episode without ``observed_at`` was indexed under the wall clock's date;
7. doctor never checked scratch expiry, and ``PolicyRejected`` was never raised.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from backends import StoreProbe, lexical_matches, open_store
from memstrata import (
    ManualClock,
    Memory,
    NotFound,
    PolicyRejected,
    Scope,
    ToolDispatcher,
    ValidationError,
)
from memstrata.cli import cli
from memstrata.providers.embeddings import HashingEmbedder

ALICE = Scope(user="alice", project="docs-site")
BOB = Scope(user="bob", project="docs-site")
TOKEN = "ghp_Zq8x4LmN2vB7cR1tY6uI0oP3aS5dF7gH9jK1"  # a GitHub-token-shaped secret
FACT: dict[str, Any] = dict(kind="preference", subject="alice", attribute="standup_format",
                            actor="user", source="chat:1")


@pytest.fixture
def hmem(store_url: str, scratch_url: str | None, clock: ManualClock) -> Iterator[Memory]:
    """A store with a deterministic embedder (equal texts, equal vectors)."""
    m = open_store(store_url, scratch_url, clock, HashingEmbedder(256))
    yield m
    m.close()


def alice_fact(mem: Memory, claim: str = "Prefers async standup updates") -> str:
    res = mem.facts.propose(ALICE, claim=claim, **FACT)
    assert res.record is not None
    return res.record.id


# -- 1. by-id access applies the caller's scope and readers ---------------------------------

def test_feedback_on_a_shared_fact_is_recorded_and_changes_nothing(mem: Memory) -> None:
    """A project-wide fact seen by alice's agent: her contradictions (the API, the agent
    tool) are recorded but neither demote nor retire it, since others rely on it (before:
    three retired it for every user of the project, though retiring needs a reviewer); the
    project's own scope and the operator still have the effect."""
    project = Scope(project="p")
    mine = Scope(user="alice", project="p")
    fid = mem.facts.propose(project, claim="The deploy window is Tuesday", kind="decision",
                            subject="deploy", attribute="window", actor="user",
                            source="chat:1").record.id
    def score() -> float:
        hits = [h for h in mem.recall(project, "deploy window").items if h.ref == f"fact:{fid}"]
        return hits[0].score

    before = score()
    agent = ToolDispatcher(mem, mine)
    for _ in range(3):
        assert mem.feedback(f"fact:{fid}", "contradicted", scope=mine)["action"] == "recorded"
        assert agent.dispatch("feedback", {"ref": f"fact:{fid}", "signal": "contradicted"}
                              )["action"] == "recorded"
    assert mem.facts.get(fid, project).status == "active" and score() == before
    assert [h.ref for h in mem.recall(mine, "deploy window").items][:1] == [f"fact:{fid}"]
    # nor do they count later: the project's own contradictions retire it at the third, as
    # they would without them (before: its first retired it, counting alice's six)
    actions = [mem.feedback(f"fact:{fid}", "contradicted", scope=project)["action"]
               for _ in range(3)]
    assert actions == ["demoted", "demoted", "retired"]


def test_feedback_from_another_user_never_retires_a_fact(mem: Memory, store: StoreProbe) -> None:
    fid = alice_fact(mem)
    for _ in range(3):
        with pytest.raises(NotFound):
            mem.feedback(f"fact:{fid}", "contradicted", scope=BOB)
    assert mem.facts.get(fid, ALICE).status == "active"
    assert store.counts()["feedback"] == 0
    # alice's own contradictions do retire it
    for n in range(3):
        out = mem.feedback(f"fact:{fid}", "contradicted", scope=ALICE)
        assert out["action"] == ("retired" if n == 2 else "demoted")
    assert mem.facts.get(fid, ALICE).status == "retired"


def test_cli_feedback_and_retire_act_only_inside_the_callers_scope(
        mem: Memory, store_url: str) -> None:
    fid = alice_fact(mem)
    runner = CliRunner()
    as_bob = ["--url", store_url, "--user", "bob", "--project", "docs-site"]
    for _ in range(3):
        res = runner.invoke(cli, ["feedback", f"fact:{fid}", "contradicted", *as_bob])
        assert res.exit_code == 1 and "NotFound" in res.output
    res = runner.invoke(cli, ["facts", "retire", fid, "--reason", "stale", *as_bob])
    assert res.exit_code == 1 and "NotFound" in res.output
    res = runner.invoke(cli, ["facts", "history", fid, *as_bob, "--json"])
    assert res.exit_code == 1
    assert mem.facts.get(fid).status == "active"
    as_alice = ["--url", store_url, "--user", "alice", "--project", "docs-site"]
    res = runner.invoke(cli, ["facts", "retire", fid, "--reason", "changed", *as_alice, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["status"] == "retired"


def test_every_by_id_read_and_write_is_not_found_outside_the_scope(mem: Memory) -> None:
    fid = alice_fact(mem)
    pending = mem.facts.propose(ALICE, claim="Alice leads the docs team", kind="profile",
                                subject="alice", attribute="role", actor="agent",
                                source="chat:2")
    assert pending.status == "pending" and pending.record is not None
    ep = mem.episodes.append(ALICE, text="Alice moved the standup", actor="user", source="cal")
    calls = [
        lambda: mem.facts.get(fid, BOB),
        lambda: mem.facts.history(fid, BOB),
        lambda: mem.facts.retire(fid, reason="x", scope=BOB),
        lambda: mem.facts.undo_supersede(fid, reason="x", scope=BOB),
        lambda: mem.review.approve(pending.record.id, by="bob", scope=BOB),
        lambda: mem.review.reject(pending.record.id, reason="no", scope=BOB),
        lambda: mem.episodes.get(ep.id, BOB),
        lambda: mem.get(f"fact:{fid}", scope=BOB),
        lambda: mem.get(ep.ref, scope=BOB),
        lambda: mem.feedback(ep.ref, "useful", scope=BOB),
        # another project of the same user is another scope too
        lambda: mem.facts.get(fid, Scope(user="alice", project="blog")),
    ]
    for call in calls:
        with pytest.raises(NotFound):
            call()
    assert mem.facts.get(fid, ALICE).id == fid
    assert [f.id for f in mem.facts.history(fid, ALICE)] == [fid]
    assert mem.episodes.get(ep.id, ALICE).id == ep.id
    assert mem.review.pending(ALICE)[0].status == "pending_review"


def test_restricted_readers_apply_to_by_id_access(mem: Memory) -> None:
    project = Scope(project="docs-site")
    res = mem.facts.propose(project, claim="Carol's salary band is L5", kind="profile",
                            subject="carol", attribute="band", actor="user", source="hr",
                            readers=["carol"])
    assert res.record is not None
    with pytest.raises(NotFound):
        mem.facts.get(res.record.id, ALICE)  # in the project, not a reader
    carol = Scope(user="carol", project="docs-site")
    assert mem.facts.get(res.record.id, carol).readers == ["carol"]
    assert mem.facts.get(res.record.id, ALICE, principal="carol").id == res.record.id


# -- 2. access follows the source through review --------------------------------------------

def test_a_reviewed_supersession_keeps_the_restricted_readers(mem: Memory) -> None:
    first = mem.facts.propose(ALICE, claim="Alice's badge number is 4411", kind="profile",
                              subject="alice", attribute="badge", actor="user", source="hr",
                              readers=["alice"])
    assert first.record is not None and first.record.readers == ["alice"]
    proposed = mem.facts.propose(ALICE, claim="Alice's badge number is 5512", kind="profile",
                                 subject="alice", attribute="badge", actor="agent",
                                 source="badge-scan")
    assert proposed.status == "pending" and proposed.record is not None
    approved = mem.review.approve(proposed.record.id, by="alice", scope=ALICE)
    assert approved.status == "superseding" and approved.record is not None
    assert approved.record.readers == ["alice"]
    # the same as a direct supersession
    direct = mem.facts.propose(ALICE, claim="Alice's badge number is 6613", kind="profile",
                               subject="alice", attribute="badge", actor="user", source="hr")
    assert direct.record is not None and direct.record.readers == ["alice"]


# -- 3. an edited claim gets the edited claim's vector --------------------------------------

def test_an_edited_claim_is_re_embedded(hmem: Memory) -> None:
    old, new = "The wiki lives on Confluence", "The wiki moved to Notion in August"
    res = hmem.facts.propose(ALICE, claim=old, kind="system_fact", subject="wiki",
                             attribute="host", actor="tool", source="crawl")
    assert res.status == "pending" and res.record is not None
    done = hmem.review.approve(res.record.id, by="alice", claim=new, scope=ALICE)
    assert done.record is not None and done.record.claim == new
    index, emb = hmem.index.vectors, HashingEmbedder(256)
    assert index is not None
    with hmem.db.transaction(ALICE.tenant, write=False) as tx:
        where = "r.tenant = ? AND r.id = ?"
        [(_, to_new)] = index.fact_scores(tx, where, [ALICE.tenant, res.record.id],
                                          emb.embed_query(new), 1)
        [(_, to_old)] = index.fact_scores(tx, where, [ALICE.tenant, res.record.id],
                                          emb.embed_query(old), 1)
    assert to_new == pytest.approx(1.0, abs=1e-5) and to_old < 0.9


# -- 4. date bounds are strings or datetimes everywhere -------------------------------------

def test_recall_takes_the_date_strings_search_takes(mem: Memory, clock: ManualClock) -> None:
    mem.episodes.append(ALICE, text="Deployed the docs site to staging", actor="tool",
                        source="ci", observed_at="2026-05-20")
    mem.episodes.append(ALICE, text="Deployed the docs site to production", actor="tool",
                        source="ci", observed_at="2026-07-20")
    found = mem.recall(ALICE, "deployed the docs site", decision="side_effect",
                       since="2026-06-01")
    assert [h.excerpt for h in found.items] == ["Deployed the docs site to production"]
    assert [h.excerpt for h in mem.episodes.search(ALICE, "deployed docs site",
                                                   since="2026-06-01")] == [
        "Deployed the docs site to production"]
    for bad in ("yesterday", 20260601, {}):
        with pytest.raises(ValidationError):
            mem.recall(ALICE, "deployed", since=bad)
        with pytest.raises(ValidationError):
            mem.episodes.search(ALICE, "deployed", until=bad)


# -- 5. forget counts the vectors that exist -----------------------------------------------

def test_forget_without_an_embedder_reports_no_vectors(mem: Memory) -> None:
    mem.episodes.append(ALICE, text="Ordered marzipan for the offsite", actor="tool",
                        source="shop")
    dry = mem.forget(ALICE, match="marzipan", dry_run=True)
    real = mem.forget(ALICE, match="marzipan")
    assert dry.counts == real.counts
    assert real.counts["episodes"] == 1 and real.counts["vectors"] == 0


def test_forget_dry_run_and_real_run_agree_on_vectors(hmem: Memory,
                                                     store: StoreProbe) -> None:
    hmem.episodes.append(ALICE, text="Ordered marzipan for the offsite", actor="tool",
                         source="shop")
    alice_fact(hmem, "Alice likes marzipan")
    dry = hmem.forget(ALICE, match="marzipan", dry_run=True)
    assert dry.counts["vectors"] == 2 and store.counts()["vectors"] == 2
    real = hmem.forget(ALICE, match="marzipan")
    assert real.counts == dry.counts
    assert store.counts()["vectors"] == 0


# -- 6. the injected clock dates what it indexes --------------------------------------------

def test_an_undated_episode_is_indexed_under_the_clocks_date(mem: Memory,
                                                            clock: ManualClock) -> None:
    clock.set("2031-02-03T10:00:00+00:00")  # years from the wall clock
    ep = mem.episodes.append(ALICE, text="Rotated the signing keys", actor="user", source="s")
    assert ep.observed_at == clock.now()
    assert lexical_matches(mem, ALICE, "2031") == {ep.ref}


# -- 7. doctor checks scratch expiry; PolicyRejected is raised -------------------------------

def test_doctor_reports_scratch_past_its_expiry_until_a_sweep(mem: Memory,
                                                             clock: ManualClock) -> None:
    run = mem.run(ALICE)
    run.__enter__()
    run.scratch.write("draft", "an intro paragraph", ttl=60)
    assert mem.doctor() == []
    clock.advance(minutes=5)
    from memstrata.layers.scratch import SQLScratchStore

    if isinstance(mem.scratch_store, SQLScratchStore):
        assert any("past their expiry" in p for p in mem.doctor())
    else:
        assert mem.doctor() == []  # Redis expires entries by itself
    assert not run.scratch.read("draft").found
    mem.sweep()
    assert mem.doctor() == []


def test_a_refused_write_raises_policy_rejected_on_request(mem: Memory,
                                                          store: StoreProbe) -> None:
    before = store.counts()
    res = mem.facts.propose(ALICE, claim=f"The deploy token is {TOKEN}",
                            kind="system_fact", subject="ci", attribute="token", actor="user",
                            source="chat")
    assert res.status == "rejected"
    with pytest.raises(PolicyRejected) as info:
        res.raise_for_status()
    assert "ghp_" not in str(info.value) and info.value.details["detectors"]
    assert store.counts() == before
    ok = mem.facts.propose(ALICE, claim="Deploys go through CI", kind="system_fact",
                           subject="ci", attribute="deploys", actor="user", source="chat")
    assert ok.raise_for_status() is ok


def test_an_edit_with_a_secret_is_a_rejected_write_result(mem: Memory) -> None:
    res = mem.facts.propose(ALICE, claim="The CI bot uses a token", kind="system_fact",
                            subject="ci", attribute="bot", actor="agent", source="log")
    assert res.record is not None
    out = mem.review.approve(res.record.id, by="alice", scope=ALICE,
                             claim=f"The CI token is {TOKEN}")
    assert out.status == "rejected" and "secret" in out.reason
    assert mem.facts.get(res.record.id).status == "pending_review"
    assert mem.facts.get(res.record.id).claim == "The CI bot uses a token"
