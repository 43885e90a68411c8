"""The three memory files people trust: every line accounted for, wrapped entries joined,
supersessions that survive a round trip, a dated working context; on every backend, through
the API and the CLI."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from backends import StoreProbe
from memstrata import ManualClock, Memory, Scope, ValidationError
from memstrata.cli import cli
from memstrata.interfaces.markdown import EPISODIC, IDENTITY, WORKING
from memstrata.interfaces.markdown_read import lint_markdown
from memstrata.interfaces.memory_files import export_markdown, import_markdown

DATA = Path(__file__).parents[1] / "data"
ALICE = Scope(user="alice", project="docs-site")
HEAD = ("# Episodic log\n\nAppend-only, oldest first: `YYYY-MM-DD (source): what happened`. "
        "A date or source\nstarting with ~ is approximate.\n\n")


def _files(tmp_path: Path, episodic: str) -> Path:
    d = tmp_path / "files"
    d.mkdir(exist_ok=True)
    (d / EPISODIC).write_text(HEAD + episodic, "utf-8")
    return d


BAD_LOG = ("- 2026-08-01 (chat:ops): Standups moved to async [decision]\n"
           "2026-08-19: 3 meetings rescheduled\n"
           "- Met with the design team about the glossary\n"
           "Some stray note nobody dated\n"
           "- 2026-08-20 (chat:ops): The docs deploy failed because the\n"
           "  build cache was stale [deploy_failed]\n")


def test_every_line_that_cannot_be_taken_is_reported_and_nothing_is_written(
        mem: Memory, store: StoreProbe, tmp_path: Path) -> None:
    d = _files(tmp_path, BAD_LOG)
    issues = [i for i in lint_markdown(d) if i.file == EPISODIC]
    assert [(i.line, i.message.split(":")[0]) for i in issues] == [
        (7, "no source"), (8, "no date"), (9, "not an entry")]
    before = store.counts()
    with pytest.raises(ValidationError) as info:
        import_markdown(mem, ALICE, d)
    problems = info.value.details["problems"]
    assert [p.split(": ")[0] for p in problems] == ["episodic.md:7", "episodic.md:8",
                                                     "episodic.md:9"]
    assert store.counts() == before
    report = import_markdown(mem, ALICE, d, skip_invalid=True)
    assert report.counts["episodes"] == 2 and len(report.skipped) == 3
    texts = [e.text for e in mem.episodes.log(ALICE)]
    assert texts == ["Standups moved to async",
                     "The docs deploy failed because the build cache was stale"]


def test_lines_that_are_not_text_are_reported_by_number_and_skippable(
        mem: Memory, store: StoreProbe, tmp_path: Path) -> None:
    """A line of bytes that are not UTF-8, and a line holding a NUL, are reported with their
    numbers by import, lint and migrate, and ``skip_invalid`` imports the rest (before: a
    traceback from all three, and a NUL refused every episode without a line number)."""
    from memstrata.interfaces.migrate import migrate_memory_file

    d = _files(tmp_path, "")
    with (d / EPISODIC).open("ab") as f:
        f.write(b"- 2026-08-01 (chat:1): bad \xff\xfe bytes here\n"
                b"- 2026-08-02 (chat:2): a NUL \x00 here\n"
                b"- 2026-08-03 (chat:3): a good line\n")
    assert {(i.line, i.message.split(" (")[0].split(":")[0])
            for i in lint_markdown(d) if i.file == EPISODIC} == {
        (6, "not UTF-8 text"), (7, "contains a NUL byte")}
    before = store.counts()
    with pytest.raises(ValidationError) as info:
        import_markdown(mem, ALICE, d)
    assert [p.split(": ")[0] for p in info.value.details["problems"]] == [
        "episodic.md:6", "episodic.md:7"]
    assert store.counts() == before
    report = import_markdown(mem, ALICE, d, skip_invalid=True)
    assert report.counts["episodes"] == 1 and len(report.skipped) == 2
    assert [e.text for e in mem.episodes.log(ALICE)] == ["a good line"]
    legacy = tmp_path / "MEMORY.md"
    legacy.write_bytes(b"# Memory\n- I prefer Go \xff\n")
    with pytest.raises(ValidationError) as bad:
        migrate_memory_file(legacy, tmp_path / "out")
    assert "MEMORY.md:2" in str(bad.value.hint)
    assert not (tmp_path / "out").exists()


def test_the_cli_refuses_with_exit_2_and_lists_the_lines(tmp_path: Path) -> None:
    d = _files(tmp_path, BAD_LOG)
    runner = CliRunner()
    env = {"MEMSTRATA_HOME": str(tmp_path / "home"), "MEMSTRATA_EMBEDDER": "none"}
    scope = ["--user", "alice", "--project", "docs-site"]
    out = runner.invoke(cli, ["import", str(d), *scope], env=env)
    assert out.exit_code == 2
    assert "episodic.md:7" in out.output and "episodic.md:9" in out.output
    assert "--skip-invalid" in out.output
    listed = runner.invoke(cli, ["episodes", "search", "standups", *scope, "--json"], env=env)
    assert json.loads(listed.output) == []
    ok = runner.invoke(cli, ["import", str(d), *scope, "--skip-invalid", "--json"], env=env)
    assert ok.exit_code == 0, ok.output
    body = json.loads(ok.output)
    assert body["counts"]["episodes"] == 2 and len(body["skipped"]) == 3
    lint = runner.invoke(cli, ["lint", str(d), "--json"])
    assert lint.exit_code == 1
    assert {i["line"] for i in json.loads(lint.output)["issues"] if i["file"] == EPISODIC} == {
        7, 8, 9}


def test_wrapped_entries_are_joined_in_every_file(mem: Memory, clock: ManualClock,
                                                  tmp_path: Path) -> None:
    clock.advance(days=(date(2026, 8, 25) - clock.now().date()).days)
    d = tmp_path / "wrapped"
    shutil.copytree(DATA / "protocol_example", d)
    (d / WORKING).write_text((d / WORKING).read_text("utf-8").replace(
        "- **team / standup format** (preference): The team is back to live standups on "
        "Mondays. — source: chat:2026-08-19; since 2026-08-19",
        "- **team / standup format** (preference): The team is back to live standups\n"
        "    on Mondays. — source: chat:2026-08-19;\n    since 2026-08-19"), "utf-8")
    assert [i for i in lint_markdown(d) if i.severity == "error"] == []
    import_markdown(mem, ALICE, d, trust=True, reviewer="alice")
    [standup] = [f for f in mem.facts.current(ALICE) if f.attribute == "standup format"]
    assert standup.claim == "The team is back to live standups on Mondays."
    assert standup.valid_from is not None and standup.valid_from.date().isoformat() == \
        "2026-08-19"
    style = [f for f in mem.facts.current(ALICE) if f.attribute == "writing style"]
    assert style[0].claim.endswith("short paragraphs in everything we draft for her.")
    first = mem.episodes.log(ALICE)[0]
    assert first.text == ("The team agreed to move standups to async updates in the #docs "
                          "channel")


def test_the_protocol_example_round_trips_with_its_supersession(
        mem: Memory, clock: ManualClock, tmp_path: Path) -> None:
    clock.advance(days=(date(2026, 8, 25) - clock.now().date()).days)
    import_markdown(mem, ALICE, DATA / "protocol_example", trust=True, reviewer="alice")
    log = mem.episodes.log(ALICE)
    assert [e.status for e in log] == ["superseded", "current", "current"]
    assert log[2].supersedes == log[0].id
    assert [f.claim for f in mem.facts.current(ALICE) if "standup" in f.attribute] == [
        "The team is back to live standups on Mondays."]
    cp = mem.checkpoints.current(ALICE, "quarterly-docs-review")
    assert cp is not None and cp.updated_at is not None
    assert cp.updated_at.date().isoformat() == "2026-08-19"
    out = tmp_path / "out"
    clock.advance(days=30)
    export_markdown(mem, ALICE, out)
    episodic = (out / EPISODIC).read_text("utf-8")
    assert "Live standups are back on Mondays — supersedes the 2026-08-01 entry " \
           "[decision]" in episodic
    working = (out / WORKING).read_text("utf-8")
    assert "Last updated: 2026-08-19" in working
    assert "- Updated: 2026-08-19\n" in working
    assert "; since 2026-08-19" in working
    assert lint_markdown(out) == []
    # a second store, read from the exported files, has the same current state and history
    again = tmp_path / "again"
    with Memory.open(f"sqlite:///{tmp_path / 'fresh.db'}", clock=clock, embedder=None) as fresh:
        import_markdown(fresh, ALICE, out, trust=True, reviewer="alice")
        assert [e.status for e in fresh.episodes.log(ALICE)] == [
            "superseded", "current", "current"]
        assert len([f for f in fresh.facts.current(ALICE) if "standup" in f.attribute]) == 1
        export_markdown(fresh, ALICE, again)
        hits = fresh.episodes.search(ALICE, "standups", k=2)
        assert hits[0].excerpt.startswith("Live standups are back")
    for name in (IDENTITY, WORKING, EPISODIC):
        assert (again / name).read_text("utf-8") == (out / name).read_text("utf-8"), name
    # importing the same files again changes nothing
    report = import_markdown(mem, ALICE, out, trust=True, reviewer="alice")
    assert report.counts.get("episodes", 0) == 0 and report.counts["episodes_existing"] == 3


def test_lint_warns_on_personal_data_and_state_in_identity(tmp_path: Path) -> None:
    d = tmp_path / "lint"
    shutil.copytree(DATA / "protocol_example", d)
    text = (d / IDENTITY).read_text("utf-8")
    text += ("- **alice / email** (profile): Alice's address is alice.moreau@acme.example "
             "— source: chat:2026-07-30\n"
             "- **alice / focus** (profile): Alice is currently rewriting the API guide, due "
             "end of Q1 — source: chat:2026-08-02\n")
    (d / IDENTITY).write_text(text, "utf-8")
    warnings = [i for i in lint_markdown(d) if i.severity == "warning"]
    assert [(i.line, i.message.split(" (")[0]) for i in warnings] == [
        (9, "contains personal data"), (10, "reads as current state, not identity")]


# -- migrate: a legacy MEMORY.md, line by line ---------------------------------------------

#: line -> (destination, what the route note or episode date must say)
LEGACY = {
    4: ("identity", "user/name"), 5: ("identity", "preferred answer format"),
    6: ("identity", "personal data (email, phone)"), 7: ("identity", "user/timezone"),
    8: ("superseded", "superseded by line 17: replaces 'typescript'"),
    9: ("identity", "constraint"), 10: ("identity", "constraint"),
    13: ("identity", "project/editor"), 14: ("identity", "ci service"),
    15: ("skipped", "secret"), 16: ("identity", "system_fact"),
    17: ("identity", "supersedes line 8"),
    20: ("superseded", "superseded by line 24: the most recent objective wins"),
    21: ("working", "next action"), 22: ("working", "completed"), 23: ("working", "plan"),
    24: ("superseded", "superseded by line 25"), 25: ("working", "objective"),
    26: ("working", "plan"),
    29: ("episodic", "2025-11-20"), 30: ("episodic", "2026-01-05"),
    31: ("episodic", "2026-01-10"), 32: ("episodic", "2026-01-14"),
    33: ("episodic", "~2026-01-14"), 34: ("episodic", "~2026-01-14"),
    35: ("episodic", "~2026-01-13"), 37: ("episodic", "2026-02-03"),
    38: ("episodic", "2026-02-03"), 39: ("identity", "lesson"),
    41: ("skipped", "code fence"), 42: ("skipped", "inside a code block"),
    43: ("skipped", "code fence"), 46: ("identity", "relationship bob/"),
    47: ("identity", "personal data (phone)"),
}


def test_a_legacy_memory_file_migrates_line_by_line(mem: Memory, clock: ManualClock,
                                                     tmp_path: Path) -> None:
    from memstrata.interfaces.migrate import migrate_memory_file

    source = tmp_path / "MEMORY.md"
    shutil.copy(DATA / "MEMORY_legacy.md", source)
    assert len(source.read_text("utf-8").splitlines()) >= 40
    out = tmp_path / "migrated"
    result = migrate_memory_file(source, out, today=date(2026, 2, 10))
    routes = {r.line: r for r in result.routes}
    assert set(routes) == set(LEGACY)
    for line, (destination, note) in LEGACY.items():
        assert routes[line].destination == destination, (line, routes[line])
        assert note in routes[line].note, (line, routes[line].note)
    identity = (out / IDENTITY).read_text("utf-8")
    entries = [ln for ln in identity.splitlines() if ln.startswith("- **")]
    assert entries[0].startswith("- **user / name** (profile): My name is Dana Whitfield")
    assert "TypeScript for all automation" not in identity
    assert "**user / programming language** (profile): UPDATE: switched to Python" in identity
    assert "AKIAZ3M5Q7R2T8W4Y6B1" not in "".join(
        (out / n).read_text("utf-8") for n in (IDENTITY, WORKING, EPISODIC))
    working = (out / WORKING).read_text("utf-8")
    assert "- Objective: the on-call handbook rewrite" in working
    assert "billing service migration" not in working and "Last updated: 2026-02-10" in working
    episodic = (out / EPISODIC).read_text("utf-8")
    assert "- 2025-11-20 (~MEMORY.md:29): Black Friday freeze" in episodic
    assert "(superseded by line 17: replaces 'typescript'" in episodic
    assert "2023-05" not in episodic and "2026-12" not in episodic
    assert [i for i in lint_markdown(out) if i.severity == "error"] == []
    warned = [i for i in lint_markdown(out) if i.severity == "warning"]
    assert {i.line for i in warned if "personal data" in i.message} == {8, 18}

    clock.advance(days=(date(2026, 2, 10) - clock.now().date()).days)
    report = import_markdown(mem, Scope(user="dana"), out, trust=False)
    dana = Scope(user="dana")
    assert report.rejected == []
    langs = [f for f in mem.review.pending(dana) if f.attribute == "programming language"]
    assert [f.claim for f in langs] == [
        "UPDATE: switched to Python for automation, ignore the TypeScript rule"]
    contact = [f for f in mem.review.pending(dana) if f.attribute == "contact"]
    assert contact and contact[0].sensitivity == "restricted"
    assert len(mem.episodes.log(dana)) == 12


# -- offline reconciliation through the API and the CLI -----------------------------------

def test_a_changed_preference_supersedes_without_a_model(mem: Memory, clock: ManualClock) -> None:
    guide = Scope(user="alice", project="field-guide")
    mem.extract(guide, [{"role": "user", "content": "Remember that I prefer Python."}])
    clock.advance(days=3)
    report = mem.extract(guide, [{"role": "user", "content": "Remember that I prefer Go."}])
    [item] = report.superseding
    assert item.slot == "alice/preferred programming language"
    current = [f.claim for f in mem.facts.current(guide)]
    assert current == ['alice said: "I prefer Go"']
    said = mem.extract(guide, [{"role": "user", "content": "From now on I want Australian "
                                                          "English for this publication."}])
    [made] = said.committed
    assert made.scope == str(guide) and "this publication" in (made.scope_reason or "")
    assert [f.claim for f in mem.facts.current(Scope(user="alice", project="other-book"))
            if "English" in f.claim] == []


def test_the_cli_reports_scope_and_judge(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"MEMSTRATA_HOME": str(tmp_path / "home"), "MEMSTRATA_EMBEDDER": "none"}
    scope = ["--user", "carol", "--project", "infra"]
    for n, text in enumerate(["Remember that I prefer working late.",
                              "Remember that I prefer working early."]):
        path = tmp_path / f"s{n}.json"
        path.write_text(json.dumps([{"role": "user", "content": text}]), "utf-8")
        out = runner.invoke(cli, ["extract", str(path), *scope, "--json"], env=env)
        assert out.exit_code == 0, out.output
    body = json.loads(out.output)
    [pending] = body["pending"]
    assert "may contradict" in pending["reason"] and "rules judge" in pending["judge"]
    assert pending["scope"] == "tenant=default user=carol"
    listed = runner.invoke(cli, ["review", "list", *scope, "--json"], env=env)
    assert "working early" in listed.output


def test_lint_warns_on_likely_contradictions(tmp_path: Path) -> None:
    d = tmp_path / "c"
    shutil.copytree(DATA / "protocol_example", d)
    (d / IDENTITY).write_text((d / IDENTITY).read_text("utf-8") + (
        "- **alice / language** (preference): Alice prefers Python for scripts — source: chat:1\n"
        "- **alice / scripting** (preference): Alice prefers Go — source: chat:2\n"), "utf-8")
    [warning] = [i for i in lint_markdown(d) if "contradicts" in i.message]
    assert warning.line == 10 and "identity.md:9" in warning.message


def test_migrate_with_a_recorded_model(mem: Memory, clock: ManualClock, tmp_path: Path) -> None:
    from memstrata.interfaces.migrate_llm import migrate_with_llm
    from memstrata.providers.llm import RecordedClient

    recording = DATA / "llm_recordings" / "migrate_anthropic_sort.json"
    text = (DATA / "migrate_llm" / "MEMORY.md").read_text("utf-8")
    client = RecordedClient.from_file(recording)
    result = migrate_with_llm(text, client, today=date(2026, 3, 20))
    sent = client.calls[0]["user"]
    assert "ghp_" not in sent and "[L3]" in sent and "[L5]" not in sent
    routes = {r.line: (r.destination, r.note) for r in result.routes}
    assert routes[5][0] == "skipped" and "secret" in routes[5][1]
    assert routes[7][0] == "superseded" and routes[9][0] == "working"
    files = result.files.render()
    assert "- **user / role** (profile): I'm Sam, I write the release notes for Acme" in \
        files[IDENTITY]
    assert "- Objective: working on the 4.3 release notes instead" in files[WORKING]
    assert "- 2026-03-02 (~MEMORY.md:11): 2026-03-02 shipped 4.1" in files[EPISODIC]
    assert "- ~2026-03-10 (~MEMORY.md:12): the beta feedback call" in files[EPISODIC]
    # a reply that leaves a line out writes nothing
    short = json.loads(recording.read_text("utf-8"))
    short["body"]["content"][0]["input"]["lines"].pop()
    with pytest.raises(Exception, match="left out lines"):
        migrate_with_llm(text, RecordedClient([short]), today=date(2026, 3, 20))
    # the CLI, then import through the write policy
    src = tmp_path / "MEMORY.md"
    src.write_text(text, "utf-8")
    out = tmp_path / "sorted"
    ran = CliRunner().invoke(cli, ["migrate", str(src), "--to", str(out), "--llm",
                                   f"recorded:{recording}", "--json"])
    assert ran.exit_code == 0, ran.output
    assert {r["line"]: r["destination"] for r in json.loads(ran.output)}[7] == "superseded"
    clock.advance(days=(date(2026, 3, 20) - clock.now().date()).days)
    report = import_markdown(mem, Scope(user="sam"), out)
    assert report.rejected == [] and len(report.pending) == 2  # identity waits for review


def test_episode_text_that_looks_like_a_marker_round_trips(mem: Memory, clock: ManualClock,
                                                           tmp_path: Path) -> None:
    texts = ["Opened the tracking issue [bug]", "Set reviewers {readers: bob}",
             "Closed it — supersedes the 2020-01-01 entry"]
    for text in texts:
        mem.episodes.append(ALICE, text=text, actor="user", source="chat")
    mem.facts.propose(ALICE, claim="The beta flag stays on today", kind="system_fact",
                      subject="beta", attribute="flag", actor="user", source="chat",
                      expires_at=clock.now().replace(hour=18))
    export_markdown(mem, ALICE, tmp_path / "one")
    with Memory.open(f"sqlite:///{tmp_path / 'b.db'}", clock=clock, embedder=None) as fresh:
        report = import_markdown(fresh, ALICE, tmp_path / "one", trust=True, reviewer="alice")
        assert report.rejected == []
        assert [e.text for e in fresh.episodes.log(ALICE, principal="alice")] == texts
        assert [e.readers for e in fresh.episodes.log(ALICE)] == [None, None, None]
        export_markdown(fresh, ALICE, tmp_path / "two")
    for name in (IDENTITY, WORKING, EPISODIC):
        assert (tmp_path / "two" / name).read_text("utf-8") == \
            (tmp_path / "one" / name).read_text("utf-8")


def test_an_invalid_date_or_an_oversized_claim_imports_nothing(mem: Memory, store: StoreProbe,
                                                              tmp_path: Path) -> None:
    d = tmp_path / "bad"
    d.mkdir()
    (d / IDENTITY).write_text(
        "# Identity\n\n- **alice / editor** (preference): Alice uses vim — source: chat\n"
        "- **alice / team** (profile): Docs team — source: chat; since 2026-02-30\n"
        f"- **alice / bio** (profile): {'x' * 1200} — source: chat\n"
        "- **alice / pay** (profile): Salary band 4 — source: hr; readers bad name!\n", "utf-8")
    before = store.counts()
    with pytest.raises(ValidationError) as info:
        import_markdown(mem, ALICE, d)
    assert [p.split(": ")[0] for p in info.value.details["problems"]] == [
        "identity.md:4", "identity.md:5", "identity.md:6"]
    assert store.counts() == before


def test_migrate_cues_are_labels_not_word_prefixes() -> None:
    from memstrata.interfaces.migrate import migrate_text

    result = migrate_text("## Stack\n- Next.js 14 with the app router\n"
                          "- Objective-C code lives in ios/\n- Goal posts are set in the CMS\n"
                          "- Standup is every Monday at 10:00\n- Deployed on Netlify\n"
                          "## Status\n- Next: write the rollback plan\n", today=date(2026, 2, 10))
    routes = {r.line: r.destination for r in result.routes}
    assert routes == {2: "identity", 3: "identity", 4: "identity", 5: "identity",
                      6: "identity", 8: "working"}
    assert result.files.tasks[0].fields == {"next_action": "write the rollback plan"}


def test_a_model_supersession_takes_a_cited_task_field_out_of_the_working_context() -> None:
    """A line the model says replaces a task field removes that field even when the line
    cites its source (the field holds the text without the citation)."""
    from memstrata.interfaces.migrate_llm import migrate_with_llm
    from memstrata.providers.llm import RecordedClient

    recording = json.loads((DATA / "llm_recordings" / "migrate_anthropic_sort.json")
                           .read_text("utf-8"))
    text = (DATA / "migrate_llm" / "MEMORY.md").read_text("utf-8").replace(
        "- next: ask QA for the test matrix", "- next: ask QA for the test matrix "
                                              "(source: standup notes)")
    for line in recording["body"]["content"][0]["input"]["lines"]:
        if line["line"] == 11:
            line["supersedes"] = 8  # shipping made the next action moot
    result = migrate_with_llm(text, RecordedClient([recording]), today=date(2026, 3, 20))
    working = result.files.render()[WORKING]
    assert "ask QA for the test matrix" not in working
    assert "- Objective: working on the 4.3 release notes instead" in working
    assert {r.line: r.destination for r in result.routes}[8] == "superseded"


def test_two_imports_of_the_same_files_at_once_store_each_episode_once(
        mem: Memory, store_url: str, scratch_url: str | None, clock: ManualClock,
        tmp_path: Path, store: StoreProbe) -> None:
    """The second import read the log before the first wrote anything (two `memstrata
    import` runs at once): which episodes exist is decided again where they are written,
    so each is stored once, and the second reports them as existing."""
    from backends import open_store

    files = _files(tmp_path, "".join(f"- 2026-08-{1 + i % 20:02d} (ci:{i % 7}): pipeline "
                                      f"event {i} happened\n" for i in range(60)))
    second = open_store(store_url, scratch_url, clock)
    read_log = second.episodes.log
    first: list[dict[str, int]] = []

    def log_then_the_other_import(scope: Scope, **kwargs: object) -> list[object]:
        logged = read_log(scope, **kwargs)
        if not first:  # the other import runs whole, between this one's read and write
            first.append(import_markdown(mem, ALICE, files, trust=True,
                                         reviewer="rita").counts)
        return list(logged)

    second.episodes.log = log_then_the_other_import
    report = import_markdown(second, ALICE, files, trust=True, reviewer="rita")
    assert first == [{"episodes": 60}]
    assert report.counts.get("episodes", 0) == 0 and report.counts["episodes_existing"] == 60
    assert store.counts()["episodes"] == 60 and len(mem.episodes.log(ALICE)) == 60
    assert mem.doctor() == []
    second.close()
