"""Threads as a first-class field of episodes (every backend): a thread is given apart from
the per-item source, defaults to the run it was logged in, and an episode is indexed with
the turns around it in its thread, following turns as well as earlier ones."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from backends import lexical_matches, open_store
from memstrata import ManualClock, Memory, Scope
from memstrata.interfaces.tools import ToolDispatcher
from memstrata.layers.episodes import Episodes
from memstrata.providers.embeddings import HashingEmbedder

ALICE = Scope(user="alice", project="docs-site")
TURNS = ("Where should we hold the team offsite this spring?",
         "The Quokkafest hall downtown has room for forty people",
         "Book it, and ask Priya about catering",
         "Priya's team will handle the food")


@pytest.fixture
def hmem(store_url: str, scratch_url: str | None, clock: ManualClock) -> Iterator[Memory]:
    m = open_store(store_url, scratch_url, clock, HashingEmbedder(256))
    yield m
    m.close()


def _log(mem: Memory, clock: ManualClock, *, per_turn: bool, thread: str = "chat:s7",
         turns: tuple[str, ...] = TURNS) -> list[str]:
    ids = []
    for n, text in enumerate(turns):
        clock.advance(minutes=1)
        if per_turn:
            ep = mem.episodes.append(ALICE, text=text, actor="user", thread=thread,
                                     source=f"{thread}/t{n}")
        else:
            ep = mem.episodes.append(ALICE, text=text, actor="user", source=thread)
        ids.append(ep.id)
    return ids


def test_per_turn_sources_do_not_change_which_turns_are_threaded(
        mem: Memory, clock: ManualClock) -> None:
    legacy = _log(mem, clock, per_turn=False, thread="chat:legacy")
    by_thread = _log(mem, clock, per_turn=True, thread="chat:s7")
    for query in ("offsite spring", "quokkafest", "catering", "food"):
        found = lexical_matches(mem, ALICE, query)
        assert {legacy.index(i.removeprefix("episode:")) for i in found if
                i.removeprefix("episode:") in legacy} == {
            by_thread.index(i.removeprefix("episode:")) for i in found
            if i.removeprefix("episode:") in by_thread}, query
    assert [mem.episodes.get(i).thread for i in by_thread] == ["chat:s7"] * 4
    assert mem.episodes.get(by_thread[1]).provenance.source == "chat:s7/t1"
    assert mem.episodes.get(legacy[0]).thread == "chat:legacy"  # default: the source


def test_a_later_turn_makes_an_earlier_one_findable(mem: Memory, clock: ManualClock) -> None:
    ids = _log(mem, clock, per_turn=True)
    # the question names no venue; the answer that followed does, and now indexes it too
    assert f"episode:{ids[0]}" in lexical_matches(mem, ALICE, "quokkafest")
    assert f"episode:{ids[0]}" not in lexical_matches(mem, ALICE, "food")  # two turns away
    assert f"episode:{ids[3]}" in lexical_matches(mem, ALICE, "catering")
    # another thread of the same scope is not context
    other = mem.episodes.append(ALICE, text="Quarterly budget is approved", actor="user",
                                source="chat:s8/t0", thread="chat:s8")
    assert f"episode:{other.id}" not in lexical_matches(mem, ALICE, "quokkafest")


@pytest.mark.parametrize("answered_by", ["user", "agent"])
def test_who_wrote_the_later_turn_does_not_decide_if_the_earlier_is_found(
        vmem: Memory, clock: ManualClock, answered_by: str) -> None:
    """With MiniLM vectors, a vague question is found through the answer after it, whoever
    wrote the answer (before, the question stood beside an agent's answer and fell below
    the share of a user's, whose authority raised the best score: found in 7 of 10 such
    pairs on SQLite and 1 of 10 on PostgreSQL)."""
    pairs = [("any idea why it broke?",
              "The gannet cron job broke because the timezone database is outdated.",
              "gannet cron timezone database"),
             ("hey, why is it so slow today?",
              "The pelican API is slow because the Redis cache was evicted after the failover.",
              "pelican API redis cache evicted"),
             ("is that fixed yet?",
              "The heron login loop is fixed: the session cookie had the wrong SameSite flag.",
              "heron login session cookie SameSite")]
    for n, (question, answer, query) in enumerate(pairs):
        scope = Scope(user="ivan", project=f"p{n}")
        when = clock.now()
        asked, _ = vmem.episodes.append_many([
            {"scope": scope, "text": question, "actor": "user", "source": f"c{n}/t1",
             "thread": f"c{n}", "observed_at": when},
            {"scope": scope, "text": answer, "actor": answered_by, "source": f"c{n}/t2",
             "thread": f"c{n}", "observed_at": when + timedelta(minutes=1)}])
        assert asked.ref in [h.ref for h in vmem.episodes.search(scope, query, k=5)], query
        assert asked.ref in vmem.recall(scope, query, layers=["episodes"], k=5).refs, query


def test_without_vectors_a_turn_is_still_found_through_its_thread(
        mem: Memory, clock: ManualClock) -> None:
    # lexical-only ranking: the turn holds one word of the question (too little on its own),
    # the answer that followed it holds the rest, and the thread makes them one exchange
    ids = _log(mem, clock, per_turn=True, turns=(
        "The offsite still needs someone to sort out lunch",
        "Priya will do the Quokkafest catering and send the menu",
        "Great, thanks"))
    alone = mem.episodes.append(ALICE, text="The offsite budget is approved", actor="user",
                                source="chat:s8/t0", thread="chat:s8")
    query = "Priya catering menu for the Quokkafest offsite"
    for found in (mem.recall(ALICE, query, layers=["episodes"], k=5).refs,
                  [h.ref for h in mem.episodes.search(ALICE, query, k=5)]):
        assert found[0] == f"episode:{ids[1]}"
        assert f"episode:{ids[0]}" in found
        assert alone.ref not in found  # the same one word, without the thread: noise


def test_without_vectors_a_word_of_the_later_turn_alone_finds_the_earlier_turn(
        mem: Memory) -> None:
    """Lexical-only ranking: a word only the later turn holds finds both turns, through the
    run's thread and through an explicit thread with a source per turn, on the API and the
    agents' tool (a turn found through its context alone scores about a third of the turn
    that holds the word, and the share it needed, 0.4, dropped it)."""
    with mem.run(ALICE, task="triage") as run:
        first = run.log("Started looking at the flaky snapshot tests", source="chat:s1/t1",
                        actor="user")
        run.log("Culprit is the mongoose fixture loader", source="chat:s1/t2", actor="user")
    asked = mem.episodes.append(ALICE, text="Customer reported the quasar export is broken",
                                actor="user", source="email:1", thread="ticket:42")
    mem.episodes.append(ALICE, text="Root cause: the pelican encoder drops rows", actor="tool",
                        source="ci:99", thread="ticket:42")
    mem.episodes.append(ALICE, text="Lunch is at noon on Friday", actor="user",
                        source="chat:s9", thread="chat:s9")
    with ToolDispatcher(mem, ALICE) as tools:
        for query, earlier in (("mongoose", first), ("pelican", asked)):
            api = [h.ref for h in mem.episodes.search(ALICE, query, k=10)]
            tool = [h["ref"] for h in tools.dispatch("search_history",
                                                     {"query": query, "k": 10})["hits"]]
            assert api == tool and len(api) == 2 and earlier.ref == api[1], (query, api)


def test_a_turn_that_lands_in_the_past_re_embeds_its_successor(
        hmem: Memory, clock: ManualClock) -> None:
    first = hmem.episodes.append(ALICE, text=TURNS[0], actor="user", source="s/t0",
                                 thread="s", observed_at="2026-08-03T10:00:00Z")
    third = hmem.episodes.append(ALICE, text=TURNS[2], actor="user", source="s/t2",
                                 thread="s", observed_at="2026-08-03T10:02:00Z")
    second = hmem.episodes.append(ALICE, text=TURNS[1], actor="user", source="s/t1",
                                  thread="s", observed_at="2026-08-03T10:01:00Z")
    emb, index = HashingEmbedder(256), hmem.index.vectors
    assert index is not None
    expected = Episodes.embed_text([Episodes.line(second)], Episodes.line(third))
    with hmem.db.transaction(ALICE.tenant, write=False) as tx:
        scores = dict(index.search(tx, ALICE, "alice", emb.embed_query(expected), 10,
                                   now=clock.now()))
    assert scores[third.id] == pytest.approx(1.0, abs=1e-5)
    assert f"episode:{first.id}" in lexical_matches(hmem, ALICE, "quokkafest")
    assert hmem.doctor() == []


def test_a_run_and_a_tool_session_thread_their_own_episodes(mem: Memory) -> None:
    with mem.run(ALICE, task="release-v17") as run:
        ep = run.log("Collected the merged PRs", source="github:milestone/17")
        assert ep.thread == f"run:{run.run_id}"
        # thread=None is "not given": the run, not the source
        assert run.log("Merged", source="github:pr/9", thread=None).thread == ep.thread
        assert run.log("Noted", source="chat", thread="ticket:DOC-12").thread == \
            "ticket:DOC-12"
    with ToolDispatcher(mem, ALICE) as tools:
        logged = tools.dispatch("log_episode", {"text": "Preview deploy failed",
                                                "source": "ci:run/812"})
        got = mem.episodes.get(logged["logged"])
        assert got.thread == f"run:{tools.run_id}"
        hits = tools.dispatch("search_history", {"query": "preview deploy"})["hits"]
        assert hits[0]["thread"] == got.thread


def test_forgetting_a_middle_turn_clears_it_from_both_neighbours(
        hmem: Memory, clock: ManualClock) -> None:
    ids = _log(hmem, clock, per_turn=True)
    assert {f"episode:{ids[0]}", f"episode:{ids[2]}"} <= lexical_matches(hmem, ALICE,
                                                                        "quokkafest")
    hmem.forget(ALICE, match="quokkafest")
    assert lexical_matches(hmem, ALICE, "quokkafest") == set()
    assert f"episode:{ids[0]}" in lexical_matches(hmem, ALICE, "catering")  # re-threaded
    assert hmem.doctor() == []


def _between_plan_and_write(monkeypatch: pytest.MonkeyPatch, mem: Memory,
                            other_writer: Callable[[], object]) -> None:
    """Run ``other_writer`` on another thread, to its commit, in the gap an append leaves
    between placing its turns (before its write transaction: the embedding is made there)
    and writing them: what another process does at that moment."""
    threads = mem.episodes._threads
    place = type(threads).plan
    ran: list[bool] = []

    def plan(tenant: str, inputs: Any, ids: Any, tx: Any = None) -> Any:
        out = place(threads, tenant, inputs, ids, tx)
        if tx is None and not ran:  # the first append's placing, once
            ran.append(True)
            failed: list[BaseException] = []
            worker = threading.Thread(target=lambda: _run(other_writer, failed))
            worker.start()
            worker.join()
            assert not failed, failed
        return out

    monkeypatch.setattr(threads, "plan", plan)


def _run(fn: Callable[[], object], failed: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as exc:  # reported by the caller's thread
        failed.append(exc)


def test_a_turn_forgotten_while_an_append_places_its_thread_stays_forgotten(
        hmem: Memory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The append neither fails on the neighbour that went nor carries its words (before:
    BackendError "cannot index missing episodes row", the append lost)."""
    ids = _log(hmem, clock, per_turn=True)
    _between_plan_and_write(monkeypatch, hmem, lambda: hmem.forget(
        ALICE, record_ids=[f"episode:{ids[1]}"]))
    clock.advance(minutes=1)
    late = hmem.episodes.append(ALICE, text="Menu choices are due on Friday", actor="user",
                                thread="chat:s7", source="chat:s7/t9")
    assert hmem.episodes.get(late.id).text == "Menu choices are due on Friday"
    assert lexical_matches(hmem, ALICE, "quokkafest") == set()
    assert f"episode:{late.id}" in lexical_matches(hmem, ALICE, "catering")  # re-placed
    assert hmem.doctor() == []


def _mine_while_theirs_commits(mem: Memory, monkeypatch: pytest.MonkeyPatch,
                               mine_at: Any, theirs_at: Any) -> Any:
    """Append my turn (observed at ``mine_at``) while another writer's ("zephyrine", at
    ``theirs_at``) commits between my placing and my write; returns mine."""
    _between_plan_and_write(monkeypatch, mem, lambda: mem.episodes.append(
        ALICE, text="The zephyrine lanterns arrive Monday", actor="user", thread="chat:s7",
        source="chat:s7/theirs", observed_at=theirs_at))
    return mem.episodes.append(ALICE, text="Book it, and ask Priya about catering",
                               actor="user", thread="chat:s7", source="chat:s7/mine",
                               observed_at=mine_at)


def test_two_appends_to_one_thread_at_once_leave_no_stale_context(
        hmem: Memory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each append is placed among the turns the other wrote, so a forget of one turn
    later clears it from every entry (before: an entry built beside a turn it never sat
    next to kept its words after the forget)."""
    ids = _log(hmem, clock, per_turn=True, turns=TURNS[:2])
    clock.advance(minutes=1)
    mine_at = clock.now()
    clock.advance(minutes=1)
    mine = _mine_while_theirs_commits(hmem, monkeypatch, mine_at, clock.now())
    # the turn written meanwhile follows mine: it is in my entry's context
    assert f"episode:{mine.id}" in lexical_matches(hmem, ALICE, "zephyrine")
    hmem.forget(ALICE, match="zephyrine")
    assert lexical_matches(hmem, ALICE, "zephyrine") == set()
    assert {f"episode:{ids[0]}", f"episode:{mine.id}"} <= lexical_matches(hmem, ALICE,
                                                                          "quokkafest")
    assert hmem.doctor() == []


def test_turns_of_one_moment_are_placed_as_the_thread_is_read(
        hmem: Memory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two writers, one observed time: the turn whose id was made first commits second. It
    is placed by time, then id, the order the thread is stored and read in, whoever commits
    first (before: stored turns went first at equal times, so entries around the pair held
    the wrong neighbours, and a forget left a forgotten turn's words in one of them)."""
    ids = _log(hmem, clock, per_turn=True, turns=TURNS[:2])
    clock.advance(minutes=1)
    mine = _mine_while_theirs_commits(hmem, monkeypatch, clock.now(), clock.now())
    theirs = next(e for e in hmem.episodes.log(ALICE) if "zephyrine" in e.text)
    assert mine.id < theirs.id  # mine was placed first, and written after theirs
    clock.advance(minutes=1)
    last = hmem.episodes.append(ALICE, text="Priya's team will handle the food",
                                actor="user", thread="chat:s7", source="chat:s7/last")
    # the thread: offsite, quokkafest, mine, theirs, last; two turns each side are context
    assert lexical_matches(hmem, ALICE, "zephyrine") == {
        f"episode:{i}" for i in (ids[1], mine.id, theirs.id, last.id)}
    assert lexical_matches(hmem, ALICE, "offsite") == {
        f"episode:{i}" for i in (ids[0], ids[1], mine.id)}
    hmem.forget(ALICE, match="zephyrine")
    assert lexical_matches(hmem, ALICE, "zephyrine") == set()
    assert lexical_matches(hmem, ALICE, "offsite") == {
        f"episode:{i}" for i in (ids[0], ids[1], mine.id)}
    assert hmem.doctor() == []


def test_forgetting_a_turn_of_a_batch_clears_it_from_every_entry(hmem: Memory) -> None:
    """A batch's turns share their time, so a forgotten turn's neighbours are found in
    thread order (time, then id), not by time alone (before: the turn two places on, in
    the next batch, kept the forgotten words); and a turn whose context reached past
    restricted turns to the forgotten one is rebuilt too."""
    def batch(*texts: str, readers: list[str] | None = None) -> list[str]:
        return [e.id for e in hmem.episodes.append_many(
            [{"scope": ALICE, "text": t, "actor": "user", "source": "chat:b", "thread": "T",
              "readers": readers} for t in texts])]

    batch("hello there", "my card pin is 4412 zebraquartz")
    batch("ok noted", "anything else?")
    hmem.forget(ALICE, match="zebraquartz")
    assert lexical_matches(hmem, ALICE, "zebraquartz") == set()
    batch("the vault opens with wombatine keys")
    batch("payroll detail one", "payroll detail two", readers=["alice"])
    last = batch("lunch is at noon")
    assert f"episode:{last[0]}" in lexical_matches(hmem, ALICE, "wombatine")  # past both
    hmem.forget(ALICE, match="wombatine")
    assert lexical_matches(hmem, ALICE, "wombatine") == set()
    assert hmem.doctor() == []


# -- handoffs: earlier checkpoint versions and closed tasks -------------------------------

def test_an_old_handoff_is_found_by_a_query_and_never_enters_context(
        mem: Memory, clock: ManualClock) -> None:
    mem.checkpoints.save(ALICE, "release-v17", objective="Ship the v17 notes",
                         next_action="ask Bob for the Kubernetes changelog")
    clock.advance(days=1)
    mem.checkpoints.save(ALICE, "release-v17", next_action="publish the notes")
    mem.checkpoints.save(ALICE, "migrate-search", objective="Move search to Algolia")
    mem.checkpoints.close(ALICE, "migrate-search", outcome="abandoned: pricing too high")
    mem.checkpoints.save(Scope(user="bob", project="docs-site"), "bobs-task",
                         objective="Bob's Kubernetes changelog")
    found = mem.recall(ALICE, "who did we ask for the Kubernetes changelog?",
                       layers=["handoffs"])
    assert [(h.ref, h.status, h.task, h.version) for h in found.items] == [
        ("checkpoint:release-v17@1", "superseded", "release-v17", 1)]
    # saved without a name: the hit still says what it came from (before: no source, no
    # actor, and blank cells in the CLI's table)
    assert (found.items[0].source, found.items[0].actor) == ("checkpoint:release-v17@1",
                                                             "system")
    assert mem.get(found.items[0].ref, scope=ALICE).next_action == \
        "ask Bob for the Kubernetes changelog"
    closed = mem.recall(ALICE, "search migration to Algolia", layers=["handoffs"]).items
    # the version that closed the task says so, with the outcome; the one before it was
    # superseded by it (as `get` shows, that version itself was still open)
    assert sorted((h.ref, h.status, h.outcome) for h in closed) == [
        ("checkpoint:migrate-search@1", "superseded", None),
        ("checkpoint:migrate-search@2", "closed", "abandoned: pricing too high")]
    assert mem.get("checkpoint:migrate-search@1", scope=ALICE).status == "open"
    # never unasked: not in the default layers, not in the session's context
    assert all(h.layer != "handoffs" for h in mem.recall(ALICE, "Kubernetes changelog").items)
    ctx = mem.context(ALICE, task="release-v17", query="Kubernetes changelog")
    assert "Kubernetes" not in ctx.text and "publish the notes" in ctx.text
    # the current version of an open task is its state, not a handoff
    assert "checkpoint:release-v17@2" not in mem.recall(
        ALICE, "publish the notes", layers=["handoffs"]).refs
    # through the tools, as an agent asks for it
    with ToolDispatcher(mem, ALICE) as tools:
        got = tools.dispatch("recall", {"query": "Kubernetes changelog", "layers": ["handoffs"]})
        assert [i["ref"] for i in got["items"]] == ["checkpoint:release-v17@1"]
        assert got["items"][0]["task"] == "release-v17"


def _checkpoint_vectors(mem: Memory) -> list[str]:
    with mem.db.transaction(ALICE.tenant, write=False) as tx:
        return sorted(r["record_id"] for r in tx.all(
            "SELECT record_id FROM vectors WHERE tenant = ? AND layer = 'checkpoints'",
            (ALICE.tenant,)))


def _billing_task(mem: Memory, clock: ManualClock) -> None:
    mem.checkpoints.save(ALICE, "billing-move", objective="Move the billing tables to Postgres 16",
                         next_action="rehearse the cutover on staging")
    clock.advance(hours=1)
    mem.checkpoints.save(ALICE, "billing-move", next_action="switch the traffic over")
    mem.checkpoints.save(ALICE, "launch-mail", objective="Write the spring launch email")
    mem.checkpoints.close(ALICE, "launch-mail", outcome="abandoned: the campaign was cancelled")


def test_a_handoff_is_found_by_its_meaning_like_any_record(
        vmem: Memory, mem: Memory, clock: ManualClock) -> None:
    """Handoffs rank through the same hybrid relevance as facts: their vectors as well as
    their words. A question sharing no word with a version finds it; without vectors it
    cannot."""
    _billing_task(vmem, clock)
    question = "which database version were we upgrading to?"
    found = vmem.recall(ALICE, question, layers=["handoffs"]).items
    assert [(h.ref, h.status) for h in found][:1] == [("checkpoint:billing-move@1", "superseded")]
    assert all(0.0 < h.score <= 1.0 for h in found)
    mailing = vmem.recall(ALICE, "what became of the promotional newsletter?",
                          layers=["handoffs"]).items
    assert mailing and mailing[0].task == "launch-mail" and mailing[0].status in (
        "closed", "superseded")
    assert vmem.recall(ALICE, "kubernetes cluster autoscaling", layers=["handoffs"]).items == []
    # the same store read without an embedder matches words only: the question has none
    assert mem.recall(ALICE, question, layers=["handoffs"]).items == []
    # the same order through the agents' tool
    with ToolDispatcher(vmem, ALICE) as tools:
        got = tools.dispatch("recall", {"query": question, "layers": ["handoffs"]})
    assert [i["ref"] for i in got["items"]] == [h.ref for h in found]


def test_a_forgotten_handoff_takes_its_vector_and_reindex_remakes_them(
        vmem: Memory, store_url: str, scratch_url: str | None, clock: ManualClock,
        minilm: object) -> None:
    _billing_task(vmem, clock)
    assert len(_checkpoint_vectors(vmem)) == 4  # every version, the current ones too
    report = vmem.forget(ALICE, match="billing")
    assert report.counts["checkpoints"] == 2 and report.counts["vectors"] == 2
    left = _checkpoint_vectors(vmem)
    assert len(left) == 2 and all("billing" not in v for v in left)
    assert vmem.doctor() == []
    assert vmem.recall(ALICE, "which database version were we upgrading to?",
                       layers=["handoffs"]).items == []
    # the reference a handoff hit carries forgets that version alone, with its vector
    assert "checkpoint:launch-mail@1" in vmem.recall(
        ALICE, "spring launch email", layers=["handoffs"]).refs
    one = vmem.forget(ALICE, record_ids=["checkpoint:launch-mail@1"])
    assert (one.counts["checkpoints"], one.counts["vectors"]) == (1, 1)
    assert one.ids == ["checkpoint:launch-mail@1"]  # what was forgotten, by reference
    assert [cp.version for cp in vmem.checkpoints.versions(ALICE, "launch-mail")] == [2]
    assert len(_checkpoint_vectors(vmem)) == 1
    assert vmem.forget(ALICE, record_ids=["checkpoint:launch-mail@7"]).counts[
        "checkpoints"] == 0
    # versions saved without an embedder get their vectors from a reindex
    plain = open_store(store_url, scratch_url, clock)
    try:
        _billing_task(plain, clock)
    finally:
        plain.close()
    assert len(_checkpoint_vectors(vmem)) == 1
    assert vmem.recall(ALICE, "which database version were we upgrading to?",
                       layers=["handoffs"]).items == []
    vmem.reindex()  # billing-move@1-2 again, launch-mail@2-4 (saved again: reopened, closed)
    assert len(_checkpoint_vectors(vmem)) == 5
    assert vmem.recall(ALICE, "which database version were we upgrading to?",
                       layers=["handoffs"]).items[0].task == "billing-move"
    assert vmem.doctor() == []


def test_checkpoint_show_never_reads_a_past_version_as_the_work_in_hand(
        tmp_path: Path) -> None:
    from click.testing import CliRunner

    from memstrata.cli import cli

    env = {"MEMSTRATA_HOME": str(tmp_path), "MEMSTRATA_URL": f"sqlite:///{tmp_path}/c.db",
           "MEMSTRATA_USER": "alice", "MEMSTRATA_PROJECT": "docs-site",
           "MEMSTRATA_EMBEDDER": "none"}
    runner = CliRunner()
    for args in (["save", "rel", "--objective", "Ship v1", "--next-action", "tag it"],
                 ["save", "rel", "--next-action", "write notes"],
                 ["close", "rel", "--outcome", "abandoned: v1 was skipped"]):
        assert runner.invoke(cli, ["checkpoint", *args], env=env).exit_code == 0
    shown = runner.invoke(cli, ["checkpoint", "show", "rel", "--all-versions"], env=env)
    assert shown.exit_code == 0, shown.output
    heads = [line for line in shown.output.splitlines() if line.startswith("## ")]
    assert [h.split(" (")[0] for h in heads] == [
        "## Earlier version of task rel", "## Earlier version of task rel",
        "## Closed task: rel"]
    assert "Current task" not in shown.output and "Next action then: tag it" in shown.output
    assert "outcome: abandoned: v1 was skipped" in heads[2]


def test_a_restricted_turn_never_speaks_through_its_open_neighbours(
        vmem: Memory, clock: ManualClock) -> None:
    """A turn only some readers may see is context of no turn others may read: neither its
    words nor its meaning bring its neighbours up for someone who may not read it, when
    logged, when a neighbour arrives late, and after a reindex."""
    turns = ["Let's plan the offsite for the leadership team",
             "The acquisition target is Zorbatech, keep it quiet",
             "Sounds good, I will book the rooms"]
    logged = []
    for n, text in enumerate(turns):
        clock.advance(minutes=1)
        logged.append(vmem.episodes.append(
            ALICE, text=text, actor="user", thread="chat:s9", source=f"chat:s9/t{n}",
            readers=["ceo"] if n == 1 else None))
    vmem.episodes.append(ALICE, text="Zorbatech released a new phone today", actor="user",
                         thread="news", source="news:1")
    # a turn landing before the others (its following context is the restricted one)
    vmem.episodes.append(ALICE, text="Agenda first, then the budget", actor="user",
                         thread="chat:s9", source="chat:s9/t0b",
                         observed_at=logged[1].observed_at - timedelta(seconds=30))
    open_refs = {e.ref for n, e in enumerate(logged) if n != 1}

    def leaked(who: str) -> set[str]:
        found: set[str] = set()
        for query in ("which company are we acquiring?", "acquisition target Zorbatech",
                      "Zorbatech"):
            found |= set(vmem.recall(ALICE, query, layers=["episodes"], principal=who).refs)
            found |= {h.ref for h in vmem.episodes.search(ALICE, query, k=10, principal=who)}
        return found & open_refs

    assert leaked("bob") == set()
    assert logged[1].ref in vmem.recall(ALICE, "acquisition target Zorbatech",
                                        layers=["episodes"], principal="ceo").refs
    # an entry written before the rule (the restricted line in an open turn's context) is
    # rewritten by a reindex
    with vmem.db.transaction(ALICE.tenant) as tx:
        vmem.db.index_text(tx, "episodes", logged[2].id, ALICE.tenant, turns[2],
                           f"{turns[0]} {turns[1]}")
    assert logged[2].ref in lexical_matches(vmem, ALICE, "Zorbatech")
    vmem.reindex()
    assert logged[2].ref not in lexical_matches(vmem, ALICE, "Zorbatech")
    assert leaked("bob") == set()


def test_what_others_hold_never_shapes_a_search(mem: Memory) -> None:
    """The subjects a query names are looked up among the caller's readable episodes only:
    another user's episode (here restricted) about a subject of that name changed bob's
    results (dropped from his words, boosted), which told him it exists."""
    bob = Scope(user="bob", project="docs-site")
    mine = mem.episodes.append(bob, text="Meeting notes: Zorbatech pricing call went fine",
                               actor="user", source="chat:b1")
    before = [(h.ref, h.score) for h in mem.episodes.search(bob, "Zorbatech")]
    assert [r for r, _ in before] == [mine.ref]
    mem.episodes.append(ALICE, text="Quarterly numbers look strong", actor="user",
                        source="chat:a1", subject="Zorbatech", readers=["alice"])
    mem.episodes.append(Scope(user="alice"), text="Pricing call", actor="user",
                        source="chat:a2", subject="Zorbatech")
    assert [(h.ref, h.score) for h in mem.episodes.search(bob, "Zorbatech")] == before
    assert [(h.ref, h.score) for h in mem.recall(bob, "Zorbatech", layers=["episodes"]).items] \
        == before


def test_a_correction_of_a_restricted_turn_is_restricted_before_it_is_placed(
        vmem: Memory, clock: ManualClock) -> None:
    turns = ["Let's plan the offsite", "The acquisition target is Zorbatech",
             "Okay noted", "I will book the rooms"]
    logged = []
    for n, text in enumerate(turns):
        clock.advance(minutes=1)
        logged.append(vmem.episodes.append(ALICE, text=text, actor="user", thread="chat:s4",
                                           source=f"chat:s4/t{n}",
                                           readers=["alice"] if n == 1 else None))
    fix = vmem.episodes.append(ALICE, text="Correction: the acquisition target is Quuxcorp",
                               actor="user", thread="chat:s4", source="chat:s4/t1b",
                               supersedes=logged[1].ref,
                               observed_at=logged[1].observed_at + timedelta(seconds=20))
    assert fix.readers == ["alice"]
    opened = {e.ref for n, e in enumerate(logged) if n != 1}
    assert not opened & lexical_matches(vmem, ALICE, "Quuxcorp")
    found = vmem.recall(ALICE, "which company is the acquisition target Quuxcorp?",
                        layers=["episodes"], principal="bob")
    assert not opened & set(found.refs)
    assert fix.ref in vmem.recall(ALICE, "acquisition target Quuxcorp", layers=["episodes"],
                                  principal="alice").refs


def test_an_expired_or_forgotten_turn_leaves_its_neighbours_entries(
        vmem: Memory, store_url: str, scratch_url: str | None, clock: ManualClock) -> None:
    """A sweep re-indexes the neighbours of the turns it deletes, as a forget does; and a
    process without an embedder (the CLI's forget and sweep) drops the vector it cannot
    make again instead of keeping one made from the line that is gone."""
    logged = []
    for n, text in enumerate(["Morning, starting the day",
                              "My temporary door code is Plinketty-4471",
                              "Great, see you there", "Lunch at noon?"]):
        clock.advance(minutes=1)
        logged.append(vmem.episodes.append(
            ALICE, text=text, actor="user", thread="chat:s5", source=f"chat:s5/t{n}",
            expires_at=clock.now() + timedelta(hours=1) if n == 1 else None))
    # a turn that expires never joins the entries of neighbours that outlive it: not even
    # before it expires (an expired row stays until a sweep, its words would not)
    assert lexical_matches(vmem, ALICE, "Plinketty") == {logged[1].ref}
    with vmem.db.transaction(ALICE.tenant) as tx:  # an entry written before that rule
        vmem.db.index_text(tx, "episodes", logged[2].id, ALICE.tenant, "Great, see you there",
                           "My temporary door code is Plinketty-4471")
    clock.advance(hours=2)
    plain = open_store(store_url, scratch_url, clock)
    try:
        assert plain.sweep()["episodes"] == 1
    finally:
        plain.close()
    assert lexical_matches(vmem, ALICE, "Plinketty") == set()
    with vmem.db.transaction(ALICE.tenant, write=False) as tx:
        kept = {r["record_id"] for r in tx.all(
            "SELECT record_id FROM vectors WHERE tenant = ? AND layer = 'episodes'",
            (ALICE.tenant,))}
    # the turn after it had its line in its vector: dropped, the others kept
    assert kept == {logged[0].id, logged[3].id}
    assert logged[2].ref in vmem.recall(ALICE, "see you there", layers=["episodes"]).refs
    vmem.reindex()
    with vmem.db.transaction(ALICE.tenant, write=False) as tx:
        assert tx.one("SELECT count(*) AS n FROM vectors WHERE tenant = ? AND "
                      "layer = 'episodes'", (ALICE.tenant,))["n"] == 3


def test_a_malformed_reference_is_refused_by_forget_as_by_get(mem: Memory) -> None:
    from memstrata import ValidationError

    mem.checkpoints.save(ALICE, "t9", objective="keep this")
    for ref in ("checkpoint:t9", "checkpoint:t9@abc", "checkpoint:t9@", "bogus:1",
                "fact:", "checkpoint:@2"):
        for call in (lambda r=ref: mem.forget(ALICE, record_ids=[r]),
                     lambda r=ref: mem.get(r, scope=ALICE)):
            with pytest.raises(ValidationError) as err:
                call()
            assert err.value.hint and "checkpoint:TASK@N" in err.value.hint
    assert [cp.version for cp in mem.checkpoints.versions(ALICE, "t9")] == [1]
    with pytest.raises(ValidationError) as bad:
        mem.checkpoints.save(ALICE, "t9", plan="step one")
    assert bad.value.hint and "list of strings" in bad.value.hint


def test_the_cli_saves_a_checkpoint_with_its_vector(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from memstrata.cli import cli

    url = f"sqlite:///{tmp_path}/v.db"
    env = {"MEMSTRATA_HOME": str(tmp_path), "MEMSTRATA_URL": url, "MEMSTRATA_USER": "alice",
           "MEMSTRATA_PROJECT": "billing", "MEMSTRATA_EMBEDDER": "minilm"}
    runner = CliRunner()
    for args in (["save", "migrate-db", "--objective", "Move the billing tables to Postgres 16"],
                 ["save", "migrate-db", "--next-action", "restore the dump"],
                 ["close", "migrate-db", "--outcome", "done: cut over on Sunday"]):
        assert runner.invoke(cli, ["checkpoint", *args], env=env).exit_code == 0
    mem = Memory.open(url, embedder="minilm")
    try:
        with mem.db.transaction("default", write=False) as tx:
            layers = sorted(r["layer"] for r in tx.all("SELECT layer FROM vectors"))
        assert layers == ["checkpoints"] * 3 + ["episodes"]  # the outcome episode too
        found = mem.recall(Scope(user="alice", project="billing"),
                           "which database version were we upgrading to?", layers=["handoffs"])
        assert found.items and found.items[0].task == "migrate-db"
    finally:
        mem.close()


def test_a_replaced_plan_never_outranks_the_decision_that_replaced_it(
        mem: Memory, clock: ManualClock) -> None:
    """Asked for beside facts, a superseded checkpoint version is marked down as a
    superseded fact is (before: the old plan, holding every word of the query, ranked
    first at 0.99 above the current decision); asked for alone, it is found as it was. A
    handoff names who saved it as its actor."""
    mem.checkpoints.save(ALICE, "merge-policy", objective="Adopt rebase merges for the "
                         "monorepo", next_action="draft the RFC", by="planner")
    clock.advance(days=3)
    mem.checkpoints.save(ALICE, "merge-policy", objective="Adopt squash merges for the "
                         "monorepo", next_action="announce it", by="planner")
    mem.facts.propose(ALICE, claim="Monorepo merges use squash", kind="decision",
                      subject="monorepo", attribute="merge", actor="user", source="chat:f/2")
    both = mem.recall(ALICE, "rebase merges monorepo", layers=["facts", "handoffs"], k=5)
    assert [h.layer for h in both.items] == ["facts", "handoffs"]
    old = both.items[1]
    assert (old.status, old.version, old.actor) == ("superseded", 1, "planner")
    alone = mem.recall(ALICE, "rebase merges monorepo", layers=["handoffs"], k=5).items
    assert [h.ref for h in alone] == [old.ref] and alone[0].score > old.score


def test_the_log_reads_a_thread_in_the_order_its_turns_are_placed(
        hmem: Memory, clock: ManualClock) -> None:
    """Two turns of one moment, the second written while the store's clock stood earlier:
    the log shows them in the order the thread places them, time then id (before: by the
    time each was written first, the later turn ahead of the one its context follows)."""
    at = clock.now()
    first = hmem.episodes.append(ALICE, text="The zephyrine lanterns arrive Monday",
                                 actor="user", thread="chat:s7", source="chat:s7/a",
                                 observed_at=at)
    clock.set(at - timedelta(minutes=5))
    second = hmem.episodes.append(ALICE, text="Book it, and ask Priya about catering",
                                  actor="user", thread="chat:s7", source="chat:s7/b",
                                  observed_at=at)
    assert [e.id for e in hmem.episodes.log(ALICE, thread="chat:s7")] == [first.id,
                                                                         second.id]
    # the later turn's entry holds the earlier one as its context, as the log reads them
    assert f"episode:{second.id}" in lexical_matches(hmem, ALICE, "zephyrine")


def test_a_turn_of_a_crowded_moment_is_placed_among_its_neighbours(
        hmem: Memory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Twenty turns of one moment committed by another writer between my placing and my
    write, my turn of the same moment first by id: every entry holds its neighbours in the
    log's order (before: the placing read the moment's turns by id from the end, its 16
    newest, and my turn lost the turns before it; with four writers 22 of 100 entries held
    the wrong neighbours)."""
    at = clock.now()
    for n in range(3):
        hmem.episodes.append(ALICE, text=f"turn qvb{n}", actor="user", thread="chat:one",
                             source=f"chat:one/b{n}", observed_at=at)
    _between_plan_and_write(monkeypatch, hmem, lambda: hmem.episodes.append_many([
        {"scope": ALICE, "text": f"turn qvo{n}", "actor": "user", "thread": "chat:one",
         "source": f"chat:one/o{n}", "observed_at": at} for n in range(20)]))
    mine = hmem.episodes.append(ALICE, text="turn qvmine", actor="user", thread="chat:one",
                                source="chat:one/mine", observed_at=at)
    order = hmem.episodes.log(ALICE, thread="chat:one")
    assert len(order) == 24 and order[3].id == mine.id
    for n, ep in enumerate(order):
        near = {f"episode:{e.id}" for e in order[max(0, n - 2):n + 3]}
        assert lexical_matches(hmem, ALICE, ep.text.split()[1]) == near, (n, ep.text)
