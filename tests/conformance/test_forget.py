"""Forget deletes for real: rows, FTS, history, checkpoints, ledger, scratch, runs,
feedback; on SQLite the file bytes too, on PostgreSQL every stored row and index entry."""

from __future__ import annotations

import pytest

from backends import StoreProbe
from memstrata import AccessDenied, ManualClock, Memory, NotFound, Scope, ToolDispatcher

SECRETISH = "Quokkaberry7731"


def test_forget_removes_content_everywhere_including_raw_bytes(
        mem: Memory, store: StoreProbe, alice: Scope, clock: ManualClock) -> None:
    f1 = mem.facts.propose(alice, claim=f"Allergic to {SECRETISH} pastries", kind="profile",
                           subject="alice", attribute="allergy", actor="user", source="chat")
    clock.advance(days=1)
    mem.facts.propose(alice, claim=f"No longer allergic to {SECRETISH}", kind="profile",
                      subject="alice", attribute="allergy", actor="user", source="chat")
    keep = mem.facts.propose(alice, claim="Prefers tea", kind="preference", subject="alice",
                             attribute="drink", actor="user", source="chat")
    mem.episodes.append(alice, text=f"Ordered {SECRETISH} pastries for the offsite",
                        event="order", actor="tool", source="shop")
    mem.episodes.append(alice, text="Booked the offsite room", event="booking", actor="tool",
                        source="calendar")
    mem.checkpoints.save(alice, "offsite", objective=f"Avoid {SECRETISH} at the offsite")
    mem.ledger.begin(alice, "order:1", intent=f"order {SECRETISH}-free catering")
    run = mem.run(alice).__enter__()
    run.scratch.write("note", f"remember {SECRETISH}")
    assert store.contains(SECRETISH)

    report = mem.forget(alice, match=SECRETISH.lower())
    assert report.counts["facts"] == 2
    assert report.counts["episodes"] == 1
    assert report.counts["checkpoints"] == 1
    assert report.counts["operations"] == 1
    assert report.counts["scratch"] == 1
    assert f1.record is not None and f"fact:{f1.record.id}" in report.ids

    for needle in (SECRETISH, "quokkaberri"):
        assert not store.contains(needle), f"{needle!r} is still stored"
    # unrelated records survive, nothing dangles
    assert keep.record is not None
    assert [f.claim for f in mem.facts.current(alice)] == ["Prefers tea"]
    assert len(mem.episodes.search(alice, "offsite room")) == 1
    assert mem.episodes.search(alice, SECRETISH) == []
    assert mem.doctor() == []


def test_forget_is_scoped_and_refuses_tenant_wide(mem: Memory, store: StoreProbe) -> None:
    a, b = Scope(user="alice"), Scope(user="bob")
    mem.episodes.append(a, text="alice likes jazz", source="chat", actor="user")
    mem.episodes.append(b, text="bob likes jazz", source="chat", actor="user")
    mem.episodes.append(Scope(project="radio"), text="station plays jazz", source="chat",
                        actor="user")
    before = store.counts()
    with pytest.raises(AccessDenied):
        mem.forget(Scope(), match="jazz")
    assert store.counts() == before
    dry = mem.forget(a, match="jazz", dry_run=True)
    assert dry.counts["episodes"] == 1 and store.counts() == before
    mem.forget(a, match="jazz")
    assert mem.episodes.search(a, "jazz") == []
    assert len(mem.episodes.search(b, "jazz")) == 1
    assert len(mem.episodes.search(Scope(project="radio"), "jazz")) == 1
    forced = mem.forget(Scope(), match="jazz", force=True)
    assert forced.counts["episodes"] == 2


def test_forget_by_subject_and_ids_and_everything(mem: Memory, alice: Scope) -> None:
    r1 = mem.facts.propose(alice, claim="Bob is Alice's manager", kind="relationship",
                           subject="bob", attribute="manages", actor="user", source="chat")
    mem.facts.propose(alice, claim="Prefers dark mode", kind="preference", subject="alice",
                      attribute="theme", actor="user", source="chat")
    ep = mem.episodes.append(alice, text="1:1 with manager", source="cal", actor="tool")
    assert mem.forget(alice, subject="Bob").counts["facts"] == 1
    assert r1.record is not None
    assert mem.forget(alice, record_ids=[ep.ref]).counts["episodes"] == 1
    everything = mem.forget(alice)
    assert everything.counts["facts"] == 1
    assert mem.facts.list(alice) == []


def test_a_forget_leaves_what_its_scope_only_reads_and_says_so(mem: Memory) -> None:
    """From a project, a user-wide record is read but not owned: the forget leaves it and
    reports it (its ref in ``kept``, a note naming the scope that owns it), on the Python
    API, the agent tool and the CLI's note; the owning scope forgets it."""
    from memstrata.interfaces.tools import ToolDispatcher

    user_wide = Scope(user="alice")
    project = Scope(user="alice", project="docs-site")
    ep = mem.episodes.append(user_wide, text="Alice said she is allergic to peanuts",
                             actor="user", source="chat:1")
    fact = mem.facts.propose(user_wide, claim="Allergic to peanuts", kind="profile",
                             subject="alice", attribute="allergy", actor="user",
                             source="chat:1").record
    assert fact is not None
    mine = mem.episodes.append(project, text="Ordered the peanut-free cake for the launch",
                               actor="tool", source="shop:7")
    assert {h.ref for h in mem.recall(project, "peanut allergy", k=10).items} >= {
        f"episode:{ep.id}", f"fact:{fact.id}"}
    report = mem.forget(project, match="peanut")
    assert report.counts["episodes"] == 1 and report.ids == [f"episode:{mine.id}"]
    assert set(report.kept) == {f"episode:{ep.id}", f"fact:{fact.id}"}
    assert len(report.notes) == 1 and "user=alice" in report.notes[0]
    assert mem.episodes.get(ep.id).text.startswith("Alice said")  # left, as reported
    by_id = ToolDispatcher(mem, project).dispatch("forget", {"record_ids": [f"episode:{ep.id}"]})
    assert by_id["total"] == 0 and by_id["kept"] == [f"episode:{ep.id}"] and by_id["notes"]
    clean = mem.forget(project, match="no such words anywhere")
    assert clean.kept == [] and clean.notes == []
    owner = mem.forget(user_wide, match="peanut")
    assert {f"episode:{ep.id}", f"fact:{fact.id}"} <= set(owner.ids) and owner.kept == []


def test_an_agents_forget_reaches_only_what_it_may_read(mem: Memory) -> None:
    """A by-id or by-match forget through the agent tool applies the caller's readers, as
    every read does: a turn restricted to bob is neither forgotten nor named for alice's
    agent; the operator's forget (no principal) and bob's reach it."""
    from memstrata.interfaces.tools import ToolDispatcher

    scope = Scope(user="alice", project="docs-site")
    hidden = mem.episodes.append(scope, text="Bob's salary review is on the quokka agenda",
                                 actor="user", source="hr:1", readers=["bob"])
    open_one = mem.episodes.append(scope, text="The quokka mascot ships on Friday",
                                   actor="user", source="chat:2")
    agent = ToolDispatcher(mem, scope)
    by_id = agent.dispatch("forget", {"record_ids": [f"episode:{hidden.id}"]})
    assert by_id["total"] == 0 and "kept" not in by_id
    by_match = agent.dispatch("forget", {"match": "quokka", "dry_run": True})
    assert by_match["counts"]["episodes"] == 1  # the open one only
    report = mem.forget(scope, match="quokka", principal="alice")
    assert report.ids == [f"episode:{open_one.id}"] and hidden.id not in str(report)
    assert mem.episodes.get(hidden.id).id == hidden.id
    assert mem.forget(scope, match="quokka", principal="bob").ids == [f"episode:{hidden.id}"]


def test_an_agents_forget_from_a_project_reaches_no_users_records_in_it(mem: Memory) -> None:
    """The agent tool of a project-wide caller (``memstrata mcp --project p``, a service key
    bound to the project) reads none of a user's records in the project and no record
    restricted to other readers, so its forget and its preview take none of them (before:
    the forget took every record the project owns, 3 the caller could not read); the
    project's own open records go, and the operator's forget still reaches every one."""
    project, mine = Scope(project="p"), Scope(user="alice", project="p")
    alice_fact = mem.facts.propose(mine, claim="Alice has a zebrafish allergy", kind="profile",
                                   subject="alice", attribute="allergy", actor="user",
                                   source="chat:1").record
    alice_ep = mem.episodes.append(mine, text="alice zebrafish diary entry", actor="user",
                                   source="chat:2")
    hidden = mem.facts.propose(project, claim="Zebrafish budget is 10k", kind="decision",
                               subject="budget", attribute="zebrafish", actor="user",
                               source="chat:3", readers=["rita"]).record
    shared = mem.episodes.append(project, text="The zebrafish tank arrives Monday",
                                 actor="user", source="chat:4")
    with mem.run(mine, run_id="r1") as run:
        run.scratch.write("zebrafish-notes", "alice's notes")
        agent = ToolDispatcher(mem, project)
        preview = agent.dispatch("forget", {"match": "zebrafish", "dry_run": True})
        assert preview["total"] == 1 and preview["counts"]["scratch"] == 0
        out = agent.dispatch("forget", {"match": "zebrafish"})
        assert out["total"] == 1 and out["counts"]["episodes"] == 1
        assert run.scratch.read("zebrafish-notes") == "alice's notes"
    assert alice_fact is not None and hidden is not None
    assert mem.facts.get(alice_fact.id, mine).id == alice_fact.id
    assert mem.episodes.get(alice_ep.id).id == alice_ep.id
    assert [f.id for f in mem.facts.list(project, principal="rita")] == [hidden.id]
    with pytest.raises(NotFound):
        mem.episodes.get(shared.id)
    operator = mem.forget(project, match="zebrafish")
    assert set(operator.ids) == {f"fact:{alice_fact.id}", f"episode:{alice_ep.id}",
                                 f"fact:{hidden.id}"}


def test_a_forget_by_subject_takes_the_episodes_about_it_and_no_others(mem: Memory) -> None:
    """An episode is about a subject when its subject field is it or its text names it as
    a word: forgetting "Al" takes "Al reviewed the PR" and the one whose subject is Al,
    never "no malice intended" or "we also shipped" (before: both went, and the one whose
    subject is Al stayed)."""
    scope = Scope(user="alice", project="p1")

    def ep(text: str, **kw: str) -> str:
        return mem.episodes.append(scope, text=text, actor="user", source="chat:1", **kw).id

    named, about = ep("Al reviewed the PR"), ep("reviewed the PR quickly", subject="Al")
    kept = [ep("no malice intended in the review"), ep("we also shipped the release"),
            ep("Alice asked for a rebase")]
    report = mem.forget(scope, subject="Al")
    assert sorted(report.ids) == sorted([f"episode:{named}", f"episode:{about}"])
    assert [mem.episodes.get(i).id for i in kept] == kept


def test_a_reference_names_one_layer_and_one_that_matches_nothing_is_reported(
        mem: Memory) -> None:
    """``fact:ID`` names a fact only (before: the episode with that id went too) and a
    reference that matches nothing is named in the notes, by its position (before:
    dropped silently)."""
    scope = Scope(user="alice", project="p1")
    gone, other = (mem.episodes.append(scope, text=f"note {n}", actor="user",
                                       source="chat:1").id for n in range(2))
    report = mem.forget(scope, record_ids=[f"episode:{gone}", f"fact:{other}", "banana"])
    assert report.ids == [f"episode:{gone}"]
    assert mem.episodes.get(other).id == other
    # named by position: an id the caller may not see is never echoed
    assert len(report.notes) == 1 and "record_ids #2, #3 (of 3)" in report.notes[0]
    assert other not in report.notes[0]
    again = mem.forget(scope, record_ids=[f"episode:{gone}"])  # forgetting twice: a note
    assert again.total == 0 and "record_ids #1 (of 1)" in again.notes[0]


def test_the_total_counts_records_not_their_vectors(vmem: Memory, alice: Scope) -> None:
    """A forgotten episode with its vector is one item forgotten (before: 2, the vector
    counted as a second), in the report, the tool's answer and the CLI's line."""
    ep = vmem.episodes.append(alice, text="Ordered the tofu platter", actor="tool",
                              source="shop")
    preview = ToolDispatcher(vmem, alice).dispatch(
        "forget", {"record_ids": [f"episode:{ep.id}"], "dry_run": True})
    report = vmem.forget(alice, record_ids=[f"episode:{ep.id}"])
    assert report.counts["episodes"] == 1 and report.counts["vectors"] == 1
    assert report.total == 1 and preview["total"] == 1
