"""The retrieval gate with the real MiniLM embedder: filter before rank, status, floor."""

from __future__ import annotations

import json
import time
import unicodedata
from typing import Any

from backends import StoreProbe, open_store
from memstrata import ManualClock, Memory, Scope, ToolDispatcher

ALICE = Scope(user="alice", project="docs-site")
BOB = Scope(user="bob", project="docs-site")


def test_foreign_record_that_matches_perfectly_never_appears(vmem: Memory) -> None:
    text = "The staging database password rotation happens every Friday at noon"
    vmem.episodes.append(BOB, text=text, event="note", actor="user", source="chat")
    vmem.facts.propose(BOB, claim=text, kind="system_fact", subject="staging",
                       attribute="rotation", actor="user", source="chat")
    vmem.episodes.append(ALICE, text="Alice fixed a typo in the landing page", actor="user",
                         source="chat")
    res = vmem.recall(ALICE, text, k=10)
    assert all("rotation" not in h.excerpt for h in res.items)
    assert vmem.recall(BOB, text, k=3).items[0].excerpt.startswith("The staging database")


def test_restricted_readers_filtered_before_ranking(vmem: Memory) -> None:
    project = Scope(project="docs-site")
    vmem.episodes.append(project, text="Quarterly compensation review outcomes for the team",
                         actor="user", source="hr", readers=["carol"])
    assert vmem.recall(ALICE, "compensation review outcomes").items == []
    carol = vmem.recall(Scope(user="carol", project="docs-site"), "compensation review")
    assert len(carol.items) == 1


def test_superseded_fact_ranks_below_its_replacement(vmem: Memory, clock: ManualClock) -> None:
    kw: dict[str, Any] = dict(kind="system_fact", subject="deploys", attribute="pipeline",
                              actor="user", source="wiki")
    vmem.facts.propose(ALICE, claim="Deploy the docs site with the Jenkins deploy job "
                                    "(deploy, deploy, deploy)", **kw)
    clock.advance(days=40)
    vmem.facts.propose(ALICE, claim="Docs site releases now ship through GitHub Actions", **kw)
    res = vmem.recall(ALICE, "how do we deploy the docs site with Jenkins", k=5,
                      decision="planning")
    statuses = [h.status for h in res.items if h.layer == "facts"]
    assert statuses[0] == "current"
    assert "superseded" in statuses
    superseded = next(h for h in res.items if h.status == "superseded")
    assert superseded.needs_verification


def test_unrelated_query_returns_empty(vmem: Memory) -> None:
    vmem.episodes.append(ALICE, text="Deploy preview failed because the build cache was stale",
                         event="deploy_failed", actor="tool", source="ci:812")
    vmem.facts.propose(ALICE, claim="Alice prefers British spelling", kind="preference",
                       subject="alice", attribute="spelling", actor="user", source="chat")
    res = vmem.recall(ALICE, "what is a good recipe for banana bread")
    assert res.items == [] and res.empty_reason
    hit = vmem.recall(ALICE, "why did the preview deployment break?")
    assert hit.items and hit.items[0].event == "deploy_failed"


def test_side_effect_decisions_flag_verification(vmem: Memory) -> None:
    vmem.facts.propose(ALICE, claim="Production deploys need approval from Dmitri",
                       kind="constraint", subject="deploys", attribute="approver", actor="user",
                       source="wiki:deploy-policy")
    res = vmem.recall(ALICE, "who approves production deploys", decision="side_effect")
    assert res.items and all(h.needs_verification for h in res.items)
    assert "wiki:deploy-policy" in (res.items[0].verify_reason or "")


def test_forget_removes_vectors(vmem: Memory, store: StoreProbe) -> None:
    vmem.episodes.append(ALICE, text="Ordered a Zanzibar-themed cake for the launch",
                         actor="user", source="chat")
    assert vmem.recall(ALICE, "cake for the launch party").items
    assert store.counts()["vectors"] == 1
    report = vmem.forget(ALICE, match="zanzibar")
    assert report.counts["episodes"] == 1 and report.counts["vectors"] == 1
    assert store.counts()["vectors"] == 0
    assert vmem.recall(ALICE, "cake for the launch party").items == []


def test_date_anchored_question_prefers_the_named_period(vmem: Memory,
                                                         clock: ManualClock) -> None:
    vmem.episodes.append(ALICE, text="Team offsite planning call about the venue",
                         actor="user", source="cal", observed_at="2026-05-12")
    vmem.episodes.append(ALICE, text="Team offsite planning call about the agenda",
                         actor="user", source="cal", observed_at="2026-07-20")
    res = vmem.recall(ALICE, "offsite planning call in May 2026", k=2)
    assert res.items and res.items[0].excerpt.endswith("venue")
    res = vmem.recall(ALICE, "offsite planning call in July 2026", k=2)
    assert res.items and res.items[0].excerpt.endswith("agenda")


def test_a_reply_is_found_through_its_thread_context(vmem: Memory) -> None:
    vmem.episodes.append(ALICE, text="Which static site generator should the handbook use?",
                         subject="Bob", source="chat:thread-9", actor="user",
                         observed_at="2026-06-01T10:00:00Z")
    answer = vmem.episodes.append(ALICE, text="Let's go with Hugo, it builds in seconds.",
                                  subject="Alice", source="chat:thread-9", actor="user",
                                  observed_at="2026-06-01T10:01:00Z")
    vmem.episodes.append(ALICE, text="Lunch order: two pizzas for the team", subject="Carol",
                         source="chat:thread-10", actor="user",
                         observed_at="2026-06-01T12:00:00Z")
    res = vmem.recall(ALICE, "which site generator was chosen for the handbook", k=2)
    assert answer.ref in res.refs


def test_an_answer_without_words_or_meaning_of_its_own_is_kept_beside_its_evidence(
        vmem: Memory) -> None:
    # the answer shares no word with the question and its vector is far from it: it is found
    # only through its thread, next to turns that do match, and kept there
    turns = [("Melanie", "I finally signed up for the pottery class I told you about!"),
             ("Caroline", "Oh nice, where is it held?"),
             ("Melanie", "In the basement of the library on Elm Street."),
             ("Caroline", "Tell me how the first lesson goes.")]
    stored = [vmem.episodes.append(ALICE, text=text, subject=who, source=f"chat:s1/t{n}",
                                   thread="s1", actor="user",
                                   observed_at=f"2026-06-01T10:0{n}:00Z")
              for n, (who, text) in enumerate(turns)]
    vmem.episodes.append(ALICE, text="Lunch order: two pizzas for the team", subject="Carol",
                         source="chat:s2/t1", thread="s2", actor="user",
                         observed_at="2026-06-01T12:00:00Z")
    res = vmem.recall(ALICE, "where is the pottery class held", k=5, layers=["episodes"])
    assert stored[2].ref in res.refs
    assert res.refs[0] == stored[0].ref
    assert all("pizzas" not in h.excerpt for h in res.items)
    # with nothing that has evidence, its neighbours are not returned either
    unrelated = vmem.recall(ALICE, "what is a good recipe for banana bread", k=5)
    assert unrelated.items == [] and unrelated.empty_reason


def test_one_common_word_the_vector_calls_unrelated_is_not_evidence(
        vmem: Memory, store_url: str, clock: ManualClock) -> None:
    # a quarter of the question's words, in a text the vector finds unrelated: noise
    for n, text in enumerate(["Oh wow, good for you.", "Good morning everyone!"]):
        vmem.episodes.append(ALICE, text=text, subject="Caroline", source=f"chat:s1/t{n}",
                             thread=f"s{n}", actor="user")
    noise = vmem.recall(ALICE, "a good recipe for banana bread", k=5, layers=["episodes"])
    assert noise.items == [] and noise.empty_reason
    # a word match the vector does not contradict stays evidence, and so does one that
    # holds half the question's words whatever the vector says
    code = vmem.episodes.append(ALICE, text="E1234: disk quota exceeded on shard 3",
                                actor="tool", source="ops:log", thread="ops")
    assert vmem.recall(ALICE, "what does error E1234 mean", k=5).refs[:1] == [code.ref]
    half = vmem.recall(ALICE, "good morning banana", k=5, layers=["episodes"])
    assert [h.excerpt for h in half.items][:1] == ["Good morning everyone!"]
    # without an embedder the words alone decide, as before
    lexical = open_store(store_url, None, clock, None)
    try:
        words = lexical.recall(ALICE, "a good recipe for banana bread", k=5, layers=["episodes"])
        assert sorted(h.excerpt for h in words.items) == ["Good morning everyone!",
                                                          "Oh wow, good for you."]
    finally:
        lexical.close()


def test_a_named_subject_ranks_their_episodes_first(vmem: Memory) -> None:
    for who in ("Caroline", "Melanie"):
        vmem.episodes.append(ALICE, text="I went to a pottery workshop last weekend",
                             subject=who, source=f"chat:{who}", actor="user")
    res = vmem.recall(ALICE, "When did Melanie go to the pottery workshop?", k=2)
    first = vmem.get(res.items[0].ref)
    assert getattr(first, "subject", None) == "Melanie"




def test_the_project_specific_rule_outranks_the_user_wide_one_every_time(
        store_url: str, tmp_path: Any) -> None:
    """Equal relevance, different scopes: the more specific one wins, in every process
    (hash seeds change set order between processes)."""
    import subprocess
    import sys

    seed = Memory.open(store_url, embedder=None)
    rule = "Release notes are written in British English"
    seed.facts.propose(Scope(user="alice"), claim=rule, kind="constraint", subject="alice",
                       attribute="notes_language", actor="user", source="chat:1")
    seed.facts.propose(ALICE, claim=rule, kind="constraint", subject="alice",
                       attribute="notes_language", actor="user", source="chat:2")
    seed.close()
    code = (f"from memstrata import Memory, Scope; m = Memory.open({store_url!r}, "
            "embedder=None); r = m.recall(Scope(user='alice', project='docs-site'), "
            f"{rule!r}, k=2); print([h.scope.project for h in r.items], "
            "[round(h.score, 6) for h in r.items])")
    seen = set()
    for hash_seed in ("1", "2", "3", "4"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={"PYTHONHASHSEED": hash_seed, "PATH": "/usr/bin:/bin",
                                  "MEMSTRATA_HOME": str(tmp_path)}, check=True)
        seen.add(out.stdout.strip())
    assert len(seen) == 1
    projects = seen.pop().split("]")[0]
    assert projects == "['docs-site', None"


def test_a_hit_shows_how_an_episode_ended(vmem: Memory, store_url: str) -> None:
    """The outcome travels with the hit to every reader: the object, the session context a
    model reads and the tables a person reads (an abandoned plan never looks like the
    decision beside it); in a project's session a user-wide record is marked as such."""
    from click.testing import CliRunner

    from memstrata.cli import cli

    vmem.episodes.append(ALICE, text="Plan: migrate the docs site to Hugo", actor="user",
                         source="chat:s1/t1", event="plan", outcome="abandoned")
    vmem.episodes.append(ALICE, text="Decision: keep the docs site on Sphinx", actor="user",
                         source="chat:s1/t2", event="decision")
    vmem.facts.propose(Scope(user="alice"), claim="Docs changes need a second reviewer",
                       kind="constraint", subject="docs", attribute="reviewers", actor="user",
                       source="chat:0")
    [hit] = vmem.recall(ALICE, "migrate the docs site to Hugo", k=1).items
    assert hit.outcome == "abandoned" and hit.event == "plan"

    lines = [x for x in vmem.context(ALICE, query="docs site migration to Hugo").text
             .splitlines() if x.startswith("- ")]
    [plan] = [x for x in lines if "Hugo" in x]
    [kept] = [x for x in lines if "Sphinx" in x]
    [rule] = [x for x in lines if "second reviewer" in x]
    assert "plan (outcome: abandoned):" in plan and "outcome" not in kept
    assert "[user-wide]" in rule and "[user-wide]" not in plan
    alone = vmem.context(Scope(user="alice"), query="docs site migration to Hugo").text
    assert "second reviewer" in alone  # the fact is there, unmarked:
    assert "[user-wide]" not in alone  # no project in the session, nothing is broader

    flags = ["--url", store_url, "--user", "alice", "--project", "docs-site"]
    env = {"COLUMNS": "250"}
    for command in (["recall", "docs site migration to Hugo"],
                    ["episodes", "search", "docs site migration to Hugo"]):
        res = CliRunner().invoke(cli, [*command, *flags], env=env)
        assert res.exit_code == 0, res.output
        header = next(x for x in res.output.splitlines() if "excerpt" in x)
        columns = [c.strip() for c in header.strip("┃ ").split("┃")]
        assert "outcome" in columns and columns[-1] == "score"
        rows = [x for x in res.output.splitlines() if x.startswith("│")]
        [plan_row] = [x for x in rows if "Hugo" in x]
        [kept_row] = [x for x in rows if "Sphinx" in x]
        assert "abandoned" in plan_row and "abandoned" not in kept_row


# -- one ranking path: episodes.search, search_history and recall(layers=["episodes"]) ----

def _history(mem: Memory) -> None:
    for i, text in enumerate((
            "The nightly build broke because the lockfile pinned an old compiler",
            "Alice moved the team offsite to the lake house in June",
            "We rolled back the payment service after checkout errors spiked",
            "Bob asked for the quarterly numbers by Friday",
            "The CI runners ran out of disk during the docker cache warmup")):
        mem.clock.advance(minutes=5)  # type: ignore[attr-defined]
        mem.episodes.append(ALICE, text=text, actor="user", source=f"chat:s1/t{i}")


def test_search_history_ranks_like_recall_and_finds_paraphrases(vmem: Memory) -> None:
    from memstrata import ToolDispatcher
    _history(vmem)
    query = "why did we undo the billing deploy"  # no word in common with the rollback line
    recalled = vmem.recall(ALICE, query, layers=["episodes"], k=3, budget_tokens=10_000)
    searched = vmem.episodes.search(ALICE, query, k=3)
    with ToolDispatcher(vmem, ALICE) as tools:
        tool_hits = tools.dispatch("search_history", {"query": query, "k": 3})["hits"]
    assert recalled.items, recalled.empty_reason
    assert "payment service" in recalled.items[0].excerpt
    assert [h.ref for h in searched] == recalled.refs
    assert [h["ref"] for h in tool_hits] == recalled.refs
    assert all(0.0 < h.score <= 1.0 for h in searched)
    assert [h.score for h in searched] == [h.score for h in recalled.items]


def test_search_history_keeps_its_filters_on_the_shared_ranker(vmem: Memory) -> None:
    _history(vmem)
    first = vmem.episodes.search(ALICE, "nightly build lockfile compiler", k=5)
    assert first and "lockfile" in first[0].excerpt
    cut = first[0].date
    assert cut is not None
    later = vmem.episodes.search(ALICE, "nightly build lockfile compiler", k=5,
                                 since=cut.isoformat(timespec="microseconds"))
    assert first[0].ref in {h.ref for h in later}
    assert vmem.episodes.search(ALICE, "nightly build lockfile compiler", k=5,
                                until="2000-01-01") == []
    assert vmem.episodes.search(Scope(user="bob"), "nightly build lockfile compiler") == []


def test_recall_takes_the_dates_search_history_takes_on_every_interface(
        vmem: Memory, store_url: str) -> None:
    """The same dated request through ``search_history`` and ``recall`` (the API, the agent
    tool and the CLI) returns the same order (before, the ``recall`` tool refused
    ``since``/``until`` and the CLI had no ``--since``)."""
    from click.testing import CliRunner

    from memstrata import ToolDispatcher
    from memstrata.cli import cli
    lines = ("The billing service deploy failed at the migration step",
             "Retried the billing service deploy with the migration fixed",
             "The billing service deploy went out and checkout is green",
             "Billing service deploys move to Tuesdays")
    refs = []
    for n, text in enumerate(lines):
        vmem.clock.advance(days=1)  # type: ignore[attr-defined]
        refs.append(vmem.episodes.append(ALICE, text=text, actor="user",
                                         source=f"chat:d{n}").ref)
    query = "billing service deploy"
    since = vmem.episodes.get(refs[2].removeprefix("episode:")).observed_at.isoformat()
    searched = [h.ref for h in vmem.episodes.search(ALICE, query, k=5, since=since)]
    assert set(searched) == set(refs[2:])
    with ToolDispatcher(vmem, ALICE) as tools:
        by_tool = tools.dispatch("recall", {"query": query, "k": 5, "since": since,
                                            "layers": ["episodes"], "budget_tokens": 8000})
        history = tools.dispatch("search_history", {"query": query, "k": 5, "since": since})
    assert [h["ref"] for h in by_tool["items"]] == searched
    assert [h["ref"] for h in history["hits"]] == searched
    before = vmem.recall(ALICE, query, layers=["episodes"], k=5, budget_tokens=10_000,
                         until=since).refs
    assert before and set(before) <= set(refs[:3])
    out = CliRunner().invoke(cli, ["recall", query, "-k", "5", "--layer", "episodes",
                                   "--budget-tokens", "8000", "--since", since, "--json",
                                   "--url", store_url, "--user", "alice",
                                   "--project", "docs-site"])
    assert out.exit_code == 0, out.output
    assert {h["ref"] for h in json.loads(out.output)["items"]} == set(refs[2:])


def test_an_episodes_layer_without_the_gate_refuses_to_search(mem: Memory) -> None:
    import pytest

    from memstrata import ConfigError
    from memstrata.layers.episodes import Episodes
    layer = Episodes(mem.db, mem.clock, mem.policy, mem.index)
    with pytest.raises(ConfigError) as err:
        layer.search(ALICE, "anything")
    assert err.value.hint and "Memory.open" in err.value.hint


def test_reading_rows_best_bound_first_ranks_as_scoring_every_candidate(
        vmem: Memory, clock: ManualClock, monkeypatch: Any) -> None:
    """The ranker reads candidate rows in batches until none left can enter; with spares
    enough to score every candidate the order and scores are the same, across actors,
    scopes, superseded entries, a named subject and a named period."""
    from memstrata.bench.synthetic import episodes
    from memstrata.retrieval import ranking

    actors = ("user", "tool", "agent", "import", "reviewer")
    scopes = (ALICE, Scope(user="alice"), Scope(project="docs-site"))
    items = []
    for i, ep in enumerate(episodes(240, seed=11)):
        items.append({"scope": scopes[i % 3], "text": ep.text, "event": ep.event,
                      "actor": actors[i % 5], "source": f"chat:s{i % 7}/t{i}",
                      "subject": ("Priya", "Marco", None)[i % 3],
                      "observed_at": f"2026-{1 + i % 12:02d}-{1 + i % 27:02d}T10:00:00Z"})
    written = vmem.episodes.append_many(items)
    for old in written[:40:4]:
        vmem.episodes.append(old.scope, text=f"Correction: {old.text}", actor="user",
                             source="chat:fix", supersedes=old.id)
    queries = ("why did the deploy fail", "what did Priya say about the CDN",
               "incidents in March 2026", "memory leak in the worker", "audit logs priority",
               "who reviewed the billing pull request")
    read: list[int] = []
    score_rows = vmem.episodes.score_rows

    def counted(tx: Any, tenant: str, ids: Any) -> Any:
        read.append(len(ids))
        return score_rows(tx, tenant, ids)

    monkeypatch.setattr(vmem.episodes, "score_rows", counted)
    for k in (3, 10):
        batched = [vmem.recall(ALICE, q, k=k, budget_tokens=100_000) for q in queries]
        fewer = sum(read)
        read.clear()
        with monkeypatch.context() as m:
            m.setattr(ranking, "KEEP_SPARE", 100_000)
            every = [vmem.recall(ALICE, q, k=k, budget_tokens=100_000) for q in queries]
        assert fewer < sum(read)  # the batches did stop early
        read.clear()
        assert any(len(r.items) == k for r in batched)
        for got, want in zip(batched, every, strict=True):
            assert got.refs == want.refs
            assert [h.score for h in got.items] == [h.score for h in want.items]


def test_equal_relevance_the_best_adjusted_rows_are_found_however_late(
        vmem: Memory, clock: ManualClock) -> None:
    """Thirty equal matches from two years ago, then three fresh ones: every candidate's
    bound is the same, so the ranker must read past its first batch to find that the
    fresh ones (recency) rank first."""
    text = "The release checklist now includes a rollback rehearsal"
    old = vmem.episodes.append_many([
        {"scope": ALICE, "text": text, "actor": "user", "source": f"chat:old{i}",
         "observed_at": "2024-11-01T10:00:00Z"} for i in range(30)])
    fresh = vmem.episodes.append_many([
        {"scope": ALICE, "text": text, "actor": "user", "source": f"chat:new{i}"}
        for i in range(3)])
    assert max(e.id for e in old) < min(e.id for e in fresh)  # read last among equals
    res = vmem.recall(ALICE, text, k=3, budget_tokens=100_000)
    assert set(res.refs) == {e.ref for e in fresh}


class _SlowQueries:
    """The real embedder, whose query embedding runs ``during()`` first (what another
    thread does while a recall waits for its query vector)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_name, self.dims = inner, inner.model_name, inner.dims
        self.during: Any = None

    def embed(self, texts: Any) -> Any:
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> Any:
        if self.during is not None:
            time.sleep(0.2)  # the recall's lexical rows are read meanwhile
            self.during()
        return self.inner.embed_query(text)


def test_an_episode_forgotten_while_the_query_is_embedded_is_never_shown(
        store_url: str, scratch_url: str | None, clock: ManualClock, minilm: Any) -> None:
    """The ranker reads the best lexical matches' rows while the query is embedded; one
    forgotten before the vector arrives is dropped, however well it matched."""
    slow = _SlowQueries(minilm)
    vmem = open_store(store_url, scratch_url, clock, slow)
    try:
        gone = vmem.episodes.append(ALICE, text="The nightly backup job failed on the "
                                    "replica disk", actor="tool", source="ci:1")
        kept = vmem.episodes.append(ALICE, text="The nightly backup job failed again after "
                                    "the replica disk filled up", actor="tool", source="ci:2")
        query = "why did the nightly backup job fail on the replica disk"
        assert gone.ref in vmem.recall(ALICE, query).refs
        slow.during = lambda: vmem.forget(ALICE, record_ids=[gone.ref], force=True)
        res = vmem.recall(ALICE, query)
        slow.during = None
        assert gone.ref not in res.refs and kept.ref in res.refs
        assert gone.ref not in vmem.recall(ALICE, query).refs
    finally:
        vmem.close()


def test_the_words_of_paths_urls_and_versions_are_found_on_every_backend(
        mem: Memory) -> None:
    # lexical only: what matches is the index's words, which a query's words must meet
    texts = {"path": "The bug is in src/handlers/payment.py line 40",
             "url": "Docs live at https://wiki.example.org/onboarding",
             "key": "The flag feature.beta.enabled is on in staging",
             "file": "Edit settings.yaml before the deploy",
             "version": "The runners need python 3.11 now",
             "email": "Write to carol@example.com about the invoice"}
    refs = {key: mem.episodes.append(ALICE, text=text, actor="user", source=f"chat:{key}").ref
            for key, text in texts.items()}
    for query, key in [("handlers", "path"), ("payment.py", "path"), ("onboarding wiki", "url"),
                       ("beta feature", "key"), ("settings", "file"),
                       ("settings.yaml", "file"), ("3.11", "version"), ("carol", "email"),
                       ("carol@example.com", "email")]:
        assert [h.ref for h in mem.episodes.search(ALICE, query, k=1)] == [refs[key]], query
        assert mem.recall(ALICE, query, k=1).refs == [refs[key]], query


def test_a_word_in_every_record_does_not_carry_them_in_on_any_backend(mem: Memory) -> None:
    # lexical only: "database" is in 40 of 41 records, so it weighs next to nothing
    mem.episodes.append_many([{"scope": ALICE, "text": f"Nightly database backup {i} finished",
                               "actor": "tool", "source": f"cron:{i}", "thread": "cron"}
                              for i in range(40)])
    orders = mem.episodes.append(ALICE, text="Decision: the orders service moves to Postgres",
                                 actor="user", source="adr:7")
    query = "orders service database"
    assert [h.ref for h in mem.episodes.search(ALICE, query, k=10)] == [orders.ref]
    assert mem.recall(ALICE, query, k=10).refs == [orders.ref]


def test_an_until_given_as_a_date_takes_in_that_whole_day(mem: Memory) -> None:
    late = mem.episodes.append(ALICE, text="Quokka migration finished late", actor="user",
                               source="chat:1", observed_at="2026-03-01T23:59:00Z")
    mem.episodes.append(ALICE, text="Quokka migration checked the next morning",
                        actor="user", source="chat:2", observed_at="2026-03-02T00:30:00Z")
    day = {"since": "2026-03-01", "until": "2026-03-01"}
    assert [e.ref for e in mem.episodes.log(ALICE, **day)] == [late.ref]
    assert [h.ref for h in mem.episodes.search(ALICE, "quokka migration", **day)] == [late.ref]
    assert mem.recall(ALICE, "quokka migration", **day).refs == [late.ref]
    # a time of day is taken as given
    assert mem.episodes.log(ALICE, until="2026-03-01T23:00:00Z") == []


def test_an_empty_recall_says_why(mem: Memory) -> None:
    scope = Scope(user="ana")
    mem.episodes.append(scope, text="The ferry leaves at noon", actor="user", source="s:1")
    assert "no word to search by" in (mem.recall(scope, "the").empty_reason or "")
    assert "no word to search by" in (mem.recall(scope, "???").empty_reason or "")
    assert "relevant to the query" in (mem.recall(scope, "zzzz unknownword").empty_reason
                                       or "")
    assert mem.recall(scope, "ferry noon").empty_reason is None


def test_a_word_inside_a_cjk_clause_finds_it(mem: Memory) -> None:
    """Chinese, Japanese and Korean are written without spaces between words: a word inside
    a clause finds it (each character is a token; a query word is a phrase of them), on
    the log, the facts and the agents' tool, and ranks it first when it alone holds it."""
    li = Scope(user="li")
    clauses = ("服务器部署失败了，因为缓存过期", "我们明天开会讨论预算",
               "サーバーのデプロイに失敗しました", "배포가 실패했습니다")
    refs = [mem.episodes.append(li, text=t, actor="user", source=f"chat:{n}",
                                thread=f"t{n}").ref for n, t in enumerate(clauses)]
    fact = mem.facts.propose(li, claim="李先生喜欢乌龙茶", kind="preference", subject="li",
                             actor="user", attribute="drink", source="chat:9")
    assert fact.record is not None
    with ToolDispatcher(mem, li) as tools:
        for word, holder in (("缓存", 0), ("部署失败", 0), ("缓存过期", 0), ("预算", 1),
                             ("デプロイ", 2), ("배포", 3)):
            found = [h.ref for h in mem.episodes.search(li, word, k=5)]
            assert found[:1] == [refs[holder]], (word, found)
            tool = tools.dispatch("search_history", {"query": word, "k": 5})["hits"]
            assert [h["ref"] for h in tool] == found
        assert mem.recall(li, "乌龙茶", layers=["facts"]).refs == [fact.record.ref]
        assert not mem.episodes.search(li, "咖啡", k=5)  # no clause holds it


def test_an_unspaced_cjk_question_finds_the_clause_that_holds_its_words(
        mem: Memory) -> None:
    """A question typed without spaces, as Chinese and Japanese are written, is not one
    phrase that no text holds whole: its overlapping character pairs find the clause that
    holds its words, first, through search, recall and the agents' tool (it found nothing
    before; "部署失败" alone did). Its question words (为什么, 什么时候, した) are no words to
    search by: a text that shares only them is not found (it ranked first)."""
    li = Scope(user="li")
    clauses = ("服务器部署失败了，因为缓存过期", "我们明天开会讨论预算",
               "昨日のデプロイは失敗しました", "新しいサーバーを注文した",
               "我也不知道为什么，什么时候再说吧")
    refs = [mem.episodes.append(li, text=t, actor="user", source=f"chat:{n}",
                                thread=f"t{n}").ref for n, t in enumerate(clauses)]
    with ToolDispatcher(mem, li) as tools:
        for question, holder in (("为什么部署失败？", 0), ("缓存什么时候过期", 0),
                                 ("部署为什么失败", 0), ("明天讨论什么", 1),
                                 ("请问为什么我们昨天晚上的部署会失败呢", 0),
                                 ("デプロイが失敗した理由は", 2)):
            found = [h.ref for h in mem.episodes.search(li, question, k=5)]
            assert found[:1] == [refs[holder]], (question, found)
            assert refs[4] not in found, question
            tool = tools.dispatch("search_history", {"query": question, "k": 5})["hits"]
            assert [h["ref"] for h in tool] == found
            assert mem.recall(li, question, layers=["episodes"]).refs[:1] == [refs[holder]]
        assert not mem.episodes.search(li, "咖啡在哪里买", k=5)  # no clause holds a pair
        assert "no word to search by" in (mem.recall(li, "什么时候？").empty_reason or "")


def test_a_cjk_word_beside_a_function_word_is_still_searched(mem: Memory) -> None:
    """Function words leave a CJK query, the content words beside them stay: 周一下午
    (Monday afternoon) holds 一下 (a bit), 吗啡 (morphine) the particle 吗, 酒吧 (bar) 吧;
    each finds its text first (they were left out, and the wrong text came first)."""
    li = Scope(user="li")
    texts = ("周一下午三点开会", "周三上午的会议改到十点了", "吗啡的用量需要医生确认",
             "布洛芬的用量是每天三次", "酒吧晚上八点开门", "银行早上九点开门")
    refs = [mem.episodes.append(li, text=t, actor="user", source=f"c:{n}",
                                thread=f"t{n}").ref for n, t in enumerate(texts)]
    for question, holder in (("周一下午", 0), ("吗啡的用量", 2), ("酒吧几点开门", 4)):
        found = [h.ref for h in mem.episodes.search(li, question, k=5)]
        assert found[:1] == [refs[holder]], (question, found)


def test_a_word_after_an_elision_and_a_final_sigma_are_found(mem: Memory) -> None:
    """"équipe" finds "l'équipe" (the index holds its parts; the ranker's word check
    dropped the match), "οδος" finds "ΟΔΟΣ" (SQLite folds the final sigma; PostgreSQL's
    index held "οδοσ"), and "à" is a stopword on every backend as "a" is."""
    you = Scope(user="u")
    team = mem.episodes.append(you, text="Réunion avec l'équipe dell'azienda à Lyon",
                               actor="user", source="c:1", thread="t1")
    street = mem.episodes.append(you, text="Η ΟΔΟΣ ΕΡΜΟΥ ΕΙΝΑΙ ΚΛΕΙΣΤΗ", actor="user",
                                 source="c:2", thread="t2")
    for query, ref in (("équipe", team.ref), ("azienda", team.ref), ("οδος", street.ref),
                       ("ΟΔΟΣ", street.ref), ("à Lyon", team.ref)):
        assert [h.ref for h in mem.episodes.search(you, query, k=5)] == [ref], query


def test_a_word_without_its_accents_finds_the_accented_word(mem: Memory) -> None:
    """"cafe" finds "café" and "café" finds "cafe", on every backend (SQLite's tokenizer
    drops accents; PostgreSQL's rows are indexed without them and a query word is matched
    in both forms); the ranker's check of which query words a text holds folds accents the
    same way, so the match is evidence, not dropped. A query typed decomposed (NFD) or with
    a Turkish "İ" (which lower-cases to "i" and a combining dot) keeps its words whole."""
    you = Scope(user="u")
    for n, text in enumerate(("Réunion au café à Montréal", "Her résumé lists a naïve approach")):
        mem.episodes.append(you, text=text, actor="user", source="chat:1", thread=f"t{n}")
    mem.episodes.append(you, text="İstanbul gezisi planlandı", actor="user", source="c:2",
                        thread="t9")
    mem.episodes.append(you, text=unicodedata.normalize("NFD", "Trip to Việt Nam planned"),
                        actor="user", source="c:3", thread="t8")  # stored decomposed
    for plain, accented, held in (("cafe", "café", "café"), ("resume", "résumé", "résumé"),
                                  ("naive", "naïve", "naïve"), ("Montreal", "Montréal", "café"),
                                  ("istanbul", "İSTANBUL", "İstanbul"),
                                  ("resume", unicodedata.normalize("NFD", "résumé"), "résumé"),
                                  ("Việt", unicodedata.normalize("NFD", "Việt"), "Trip")):
        found = [h.excerpt for h in mem.recall(you, plain, layers=["episodes"]).items]
        assert found == [h.excerpt for h in mem.recall(you, accented,
                                                       layers=["episodes"]).items]
        assert len(found) == 1 and held in found[0], (plain, found)


def test_only_the_accents_of_latin_letters_are_folded(mem: Memory) -> None:
    """Every backend folds what SQLite's tokenizer folds and no more: Japanese voicing marks
    tell words apart (パス "pass" is not バス "bus"), and full-width letters or a ligature
    are other characters (PostgreSQL's index had folded them all)."""
    you = Scope(user="u")
    refs = {t: mem.episodes.append(you, text=t, actor="user", source=f"c:{n}",
                                   thread=f"t{n}").ref
            for n, t in enumerate(("パスを確認してください", "バスで会社に行く",
                                   "ｒｅｄｉｓ の設定", "ﬁnance report is late"))}
    for query, expected in (("パス", ["パスを確認してください"]), ("バス", ["バスで会社に行く"]),
                            ("redis", []), ("finance", [])):
        found = [h.ref for h in mem.episodes.search(you, query, k=5)]
        assert found == [refs[t] for t in expected], query


def test_a_part_of_a_hyphenated_or_underscored_word_finds_it(mem: Memory) -> None:
    """The index holds "deploy-preview" and "foo_bar" with their parts as words; the
    ranker's check of which query words a text holds counts the parts too (a match on
    "preview" was no evidence and dropped)."""
    you = Scope(user="u")
    preview = mem.episodes.append(you, text="The deploy-preview failed", actor="user",
                                  source="c:1", thread="t1")
    renamed = mem.episodes.append(you, text="renamed foo_bar yesterday", actor="user",
                                  source="c:2", thread="t2")
    for word, ref in (("preview", preview.ref), ("bar", renamed.ref)):
        assert [h.ref for h in mem.episodes.search(you, word, k=5)] == [ref], word


def _incident_log(mem: Memory, clock: ManualClock) -> None:
    """180 ops notes of many lengths, most of them naming the cache, the deploy or the
    backup: more word matches than a ranking's lists take, and vectors and word shares that
    order them otherwise."""
    systems = ("cache", "deploy", "backup", "billing", "search")
    what = ("failed at night", "was rolled back", "recovered after a restart",
            "needs a new owner", "was abandoned for now", "passed review")
    mem.episodes.append_many([
        {"scope": ALICE, "text": f"The {systems[n % 5]} job {what[n % 6]} (ticket {n})"
                                 + " and the notes of its review" * (n % 7),
         "actor": "tool", "source": f"ops:{n}", "thread": f"ops-{n // 10}",
         "observed_at": clock.now()} for n in range(180)])


def _the_first_hits_of_a_larger_k(mem: Memory) -> None:
    for query in ("why did the cache job fail?", "what was rolled back", "deploy"):
        wide = mem.recall(ALICE, query, layers=["episodes"], k=50, budget_tokens=10**6)
        scores = {h.ref: h.score for h in wide.items}
        assert len(wide.items) >= 10
        for k in (1, 3, 5, 8, 10, 20):
            got = mem.recall(ALICE, query, layers=["episodes"], k=k, budget_tokens=10**6)
            assert [h.ref for h in got.items] == [h.ref for h in wide.items[:k]], (query, k)
            assert all(h.score == scores[h.ref] for h in got.items), (query, k)
            assert [h.ref for h in mem.episodes.search(ALICE, query, k=k)] == \
                [h.ref for h in got.items]


def test_a_smaller_k_returns_the_first_hits_of_a_larger_one_at_the_same_scores(
        vmem: Memory, clock: ManualClock) -> None:
    """The candidates a ranking takes are the same for every k, so a hit's score is its
    own and a smaller k's hits are the first of a larger one's (before: k=5 took 50 per
    list and k=10 80, and a word match the shorter vector list left out scored without its
    cosine, 0.34 at k=8 and 0.49 at k=10)."""
    _incident_log(vmem, clock)
    _the_first_hits_of_a_larger_k(vmem)


def test_without_vectors_a_smaller_k_returns_the_first_hits_of_a_larger_one(
        mem: Memory, clock: ManualClock) -> None:
    _incident_log(mem, clock)
    _the_first_hits_of_a_larger_k(mem)


def test_words_too_common_to_search_still_count_in_the_texts_that_hold_them(
        vmem: Memory) -> None:
    """Every word of the query in over 1,000 of the caller's 2,400 episodes, so the word
    search leaves them all out and the vectors rank: a text holding the words still scores
    for them (their share in it), so exact matches pass the recall's floor (before: the
    vector's part alone, and 15 hits of 488 exact matches at k=100)."""
    from memstrata.retrieval.episode_ranking import W_LEXICAL, W_PERIOD, W_SEMANTIC, W_SUBJECT

    vmem.episodes.append_many([
        {"scope": ALICE, "text": (f"standup moved to thursday, room {n}" if n % 2 else
                                  f"standup notes and thursday lunch menu {n}"),
         "actor": "tool", "source": f"cal:{n}", "thread": f"cal-{n // 50}"}
        for n in range(2400)])
    got = vmem.recall(ALICE, "standup thursday", layers=["episodes"], k=50,
                      budget_tokens=10**6).items
    assert len(got) == 50
    assert all("standup" in h.excerpt and "thursday" in h.excerpt for h in got)
    # the words' part counts: at full share it alone is this much of the scale, before
    # the adjustments; the vector's part comes on top
    assert min(h.score for h in got) > W_LEXICAL / (W_LEXICAL + W_SEMANTIC + W_SUBJECT
                                                     + W_PERIOD)


def test_a_fact_replaced_a_hundred_times_is_still_found_current(
        mem: Memory, clock: ManualClock) -> None:
    """A slot updated daily (a sprint goal, a LangGraph key overwritten often): the word
    list is cut at its limit before the rows are read, and 100 superseded versions of the
    same words filled it and left the current fact out. The list keeps the matches by their
    score times the status and scope adjustments, so the current fact leads."""
    for i in range(100):
        clock.advance(hours=24)
        mem.facts.propose(ALICE, claim=f"The sprint goal for sprint {i} is shipping the "
                          f"invoice renderer milestone {i}", kind="decision", subject="sprint",
                          attribute="goal", actor="user", source=f"standup:{i}")
    current = mem.facts.current(ALICE)
    assert len(current) == 1 and current[0].claim.endswith("milestone 99")
    res = mem.recall(ALICE, "what is the sprint goal", k=5)
    assert res.items[0].ref == current[0].ref
    assert [h.status for h in res.items[1:]] == ["superseded"] * 4


def test_the_projects_own_line_is_found_among_a_hundred_user_wide_copies(
        mem: Memory, vmem: Memory) -> None:
    """The same line a hundred times user-wide and once in the project: a query from the
    project finds the project's own first, on recall and on the episode search, with and
    without vectors (before, the list's limit kept user-wide copies alone)."""
    line = "Nightly export of the ledger finished without errors"
    for m in (mem, vmem):
        m.episodes.append_many([{"scope": Scope(user="alice"), "text": line, "actor": "tool",
                                 "source": f"cron:{i}"} for i in range(100)])
        own = m.episodes.append(ALICE, text=line, actor="tool", source="cron:project")
        res = m.recall(ALICE, "did the nightly ledger export finish", k=5,
                       layers=["episodes"])
        assert res.items[0].ref == own.ref, [h.scope for h in res.items]
        assert res.items[0].score > res.items[1].score
        found = m.episodes.search(ALICE, "nightly ledger export", k=5)
        assert found[0].ref == own.ref


def test_recall_dates_bound_facts_as_they_bound_episodes(
        mem: Memory, clock: ManualClock) -> None:
    """``since``/``until`` hold for every layer a recall reads: a fact is dated as its hit
    shows it (when it holds from, else when it was stated). Before, a fact of June came
    back for ``until`` February and for ``since`` next year."""
    clock.set("2026-01-15T09:00:00Z")
    jan = mem.episodes.append(ALICE, text="The invoice export moved to the new bucket",
                              actor="user", source="chat:jan")
    clock.set("2026-06-01T09:00:00Z")
    june = mem.facts.propose(ALICE, claim="The invoice export runs nightly at 02:00",
                             kind="decision", subject="invoice export", attribute="schedule",
                             actor="user", source="chat:june").record
    assert june is not None
    held = mem.facts.propose(ALICE, claim="The invoice export bucket is eu-archive-2",
                             kind="decision", subject="invoice export", attribute="bucket",
                             actor="user", source="chat:bucket",
                             valid_from="2026-01-20T00:00:00Z").record
    assert held is not None
    query = "invoice export"

    def refs(**dates: str) -> set[str]:
        return set(mem.recall(ALICE, query, k=10, **dates).refs)

    assert refs() == {jan.ref, june.ref, held.ref}
    assert refs(until="2026-02-01") == {jan.ref, held.ref}
    assert refs(since="2026-01-01", until="2026-01-31") == {jan.ref, held.ref}
    assert refs(since="2026-01-16", until="2026-01-19") == set()
    assert refs(since="2026-05-31T23:00:00-02:00") == {june.ref}  # 01:00 UTC on 1 June
    assert refs(since="2027-01-01") == set()


def test_an_outcome_word_is_evidence_of_the_episode_that_holds_it(mem: Memory) -> None:
    """The word index holds an episode's outcome; the evidence its own words give reads it
    too. Before, "which plans were abandoned" found nothing until some other episode held
    the word in its text."""
    plans = [mem.episodes.append(ALICE, text=f"Plan: rewrite the {what} before the launch",
                                 event="plan", outcome=outcome, actor="user",
                                 source=f"chat:p{n}")
             for n, (what, outcome) in enumerate((("refund policy", "abandoned"),
                                                   ("pricing page copy", "abandoned"),
                                                   ("onboarding guide", "approved")))]
    res = mem.recall(ALICE, "which plans were abandoned", k=5, layers=["episodes"])
    assert [h.ref for h in res.items][:2] == [p.ref for p in plans[:2]] or \
        set(res.refs[:2]) == {plans[0].ref, plans[1].ref}
    assert all(h.outcome == "abandoned" for h in res.items[:2])


def test_one_common_word_is_no_evidence_for_a_fact_either(vmem: Memory) -> None:
    """Facts take the evidence rule episodes take (scoring.evident): a claim holding a
    quarter of the question's words, which the vector calls unrelated, is not returned.
    Before, such facts came back at about 0.5 (their relevance is scaled to the best
    fact's, and the rank fusion lifts the first of a short list)."""
    for n, text in enumerate(["Oh wow, good for you.", "Good morning everyone!"]):
        vmem.facts.propose(ALICE, claim=text, kind="preference", subject="team",
                           attribute=f"note{n}", actor="user", source=f"chat:g{n}")
    noise = vmem.recall(ALICE, "a good recipe for banana bread", k=5, layers=["facts"])
    assert noise.items == [] and noise.empty_reason
    # half the question's words is evidence whatever the vector says
    half = vmem.recall(ALICE, "good morning banana", k=5, layers=["facts"])
    assert [h.excerpt for h in half.items][:1] == ["Good morning everyone!"]
    # a caller ranking the facts it chose (the LangGraph store's search) gets them all
    ids = [f.id for f in vmem.facts.current(ALICE)]
    ranked = vmem.gate.rank(ALICE, "a good recipe for banana bread", fact_ids=ids)
    assert len(ranked) == 2
