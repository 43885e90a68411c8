"""Markdown files people can read: export, import, round trip, migrate, lint."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from memstrata import ManualClock, Memory, Scope, ValidationError
from memstrata.cli import cli
from memstrata.interfaces.markdown import EPISODIC, FILES, IDENTITY, WORKING
from memstrata.interfaces.markdown_read import lint_markdown
from memstrata.interfaces.memory_files import export_markdown, import_markdown
from memstrata.interfaces.migrate import migrate_memory_file, migrate_text

DATA = Path(__file__).parents[1] / "data"
ALICE = Scope(user="alice", project="docs-site")
TOKEN = "ghp_Zq8x4LmN2vB7cR1tY6uI0oP3aS5dF9gH2jK4"


def _open(path: Path, clock: ManualClock | None = None) -> Memory:
    return Memory.open(f"sqlite:///{path}", clock=clock or ManualClock("2026-08-03T09:00:00Z"),
                       embedder=None)


def _populate(mem: Memory, clock: ManualClock) -> None:
    """A store with every kind of record the files carry, and some they must not."""
    ident = mem.facts.propose(ALICE, claim="Alice leads the docs team at Acme", kind="profile",
                              subject="alice", attribute="role", actor="user",
                              source="hr:directory", tier="identity")
    assert ident.record is not None
    mem.review.approve(ident.record.id, reviewer="alice")
    mem.facts.propose(ALICE, claim="Alice prefers weekly written updates", kind="preference",
                      subject="alice", attribute="status_updates", actor="user",
                      source="chat:2026-08-01")
    clock.advance(days=3)
    mem.facts.propose(ALICE, claim="Alice now prefers a short daily update\nin Slack",
                      kind="preference", subject="alice", attribute="status_updates",
                      actor="user", source="chat:2026-08-04")
    mem.facts.propose(ALICE, claim="The docs site builds with Hugo 0.125", kind="system_fact",
                      subject="docs site", attribute="generator", actor="user",
                      source="repo:acme/docs; file config.toml")
    mem.facts.propose(ALICE, claim="Budget figures go to Alice and Carol only",
                      kind="constraint", subject="budget", attribute="audience", actor="user",
                      source="chat:2026-08-04", readers=["alice", "carol"])
    mem.facts.propose(ALICE, claim="Alice works from Berlin", kind="profile", subject="alice",
                      attribute="location", actor="user", source="chat:2026-08-04",
                      tier="identity")  # stays pending: "Pending identity changes"
    mem.facts.propose(ALICE, claim="Agents guess Alice likes emojis", kind="preference",
                      subject="alice", attribute="emoji", actor="agent", source="session:9")
    mem.facts.propose(Scope(user="bob", project="docs-site"), claim="Bob is on leave",
                      kind="profile", subject="bob", attribute="availability", actor="user",
                      source="hr")
    mem.facts.propose(Scope(user="alice"), claim="Alice's user-level fact", kind="profile",
                      subject="alice", attribute="pronouns", actor="user", source="chat")
    mem.checkpoints.save(ALICE, "release-v17", objective="Ship the v17 notes",
                         plan=["draft", "review", "publish"], completed=["collect PRs"],
                         next_action="write the draft", source_refs=["github:milestone/17"],
                         pending_identity_changes=["Alice moved to Berlin"])
    mem.checkpoints.save(ALICE, "a-small-task", notes="Nothing but a note")
    for day, text, event, outcome in (
        ("2026-07-28T15:00:00Z", "Deployed v16 docs", "deploy", None),
        ("2026-07-28T09:00:00Z", "Search index rebuilt", "note", None),
        ("2026-08-02T10:00:00Z", "Preview deploy failed: stale build cache", "deploy_failed",
         "fixed by purging the cache"),
        ("2026-08-02T11:00:00Z", "Meeting notes [draft]", "note", None),
    ):
        mem.episodes.append(ALICE, text=text, event=event, actor="tool", source="ci:run/812",
                            observed_at=day, outcome=outcome)
    mem.episodes.append(ALICE, text="Budget discussion with Carol", source="chat:2026-08-04",
                        actor="user", readers=["alice", "carol"])
    mem.episodes.append(Scope(user="bob", project="docs-site"), text="Bob's private note",
                        source="chat:bob", actor="user")


def test_export_import_export_is_byte_identical(mem: Memory, clock: ManualClock,
                                                 tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    _populate(mem, clock)
    report = export_markdown(mem, ALICE, first)
    assert report.counts == {"identity": 1, "facts": 3, "tasks": 2, "pending_identity": 1,
                             "episodes": 5}
    texts = {name: (first / name).read_text("utf-8") for name in FILES}
    identity, working, episodic = texts[IDENTITY], texts[WORKING], texts[EPISODIC]
    assert "- **alice / role** (profile): Alice leads the docs team at Acme — source: " \
           "hr:directory" in identity
    assert "Alice now prefers a short daily update in Slack" in working
    assert "weekly written updates" not in working  # superseded: not current
    assert "readers alice,carol" in working and "expires " in working
    assert working.index("Alice works from Berlin") > working.index(
        "## Pending identity changes")
    assert "emojis" not in working and "Bob" not in working + episodic
    assert "user-level fact" not in working + identity  # exactly this scope
    assert "- Next action: write the draft" in working
    assert "### Pending identity changes\n\n- Alice moved to Berlin" in working
    lines = [ln for ln in episodic.splitlines() if ln.startswith("- ")]
    assert lines[:2] == ["- 2026-07-28 (ci:run/812): Search index rebuilt",
                         "- 2026-07-28 (ci:run/812): Deployed v16 docs [deploy]"]
    assert ("- 2026-08-02 (ci:run/812): Preview deploy failed: stale build cache (outcome: "
            "fixed by purging the cache) [deploy_failed]") in lines
    assert lines[-1].endswith("{readers: alice,carol}")
    assert lint_markdown(first) == []

    clock2 = ManualClock("2026-09-20T12:00:00Z")
    with _open(tmp_path / "b.db", clock2) as fresh:
        result = import_markdown(fresh, ALICE, first, trust=True, reviewer="alice")
        assert result.rejected == []
        assert result.counts["approved"] == 1 and result.counts["episodes"] == 5
        export_markdown(fresh, ALICE, second)
        restricted = [f for f in fresh.facts.current(ALICE, principal="alice")
                      if f.attribute == "audience"]
        assert restricted and restricted[0].readers == ["alice", "carol"]
        assert not [f for f in fresh.facts.current(ALICE, principal="bob")
                    if f.attribute == "audience"]
    for name in FILES:
        assert (second / name).read_bytes() == (first / name).read_bytes(), name


def test_a_slash_in_a_subject_round_trips(mem: Memory, tmp_path: Path) -> None:
    """A subject holding " / " is escaped in the files, so export → import gives back the
    same subject and attribute (before: "deploy / prod" + "window" read back as "deploy" +
    "prod / window", another slot)."""
    slots = [("deploy / prod", "window"), ("ci \\/ cd /", "runner / os"), ("a/b", "c")]
    for n, (subject, attribute) in enumerate(slots):
        mem.facts.propose(ALICE, claim=f"Claim {n}", kind="preference", subject=subject,
                          attribute=attribute, actor="user", source="chat:1")
    export_markdown(mem, ALICE, tmp_path / "one")
    working = (tmp_path / "one" / WORKING).read_text("utf-8")
    assert "- **deploy \\/ prod / window** (preference): Claim 0" in working, working
    assert lint_markdown(tmp_path / "one") == []
    with _open(tmp_path / "b.db") as fresh:
        import_markdown(fresh, ALICE, tmp_path / "one", trust=True, reviewer="alice")
        assert sorted((f.subject, f.attribute, f.claim) for f in fresh.facts.current(ALICE)) \
            == sorted((s, a, f"Claim {n}") for n, (s, a) in enumerate(slots))
        export_markdown(fresh, ALICE, tmp_path / "two")
    assert (tmp_path / "two" / WORKING).read_text("utf-8") == working
    # a file written before the escape reads as it did: the first " / " ends the subject
    old = tmp_path / "old"
    old.mkdir()
    (old / WORKING).write_text("# Working context\n\n## Current facts\n\n- **deploy / prod / "
                               "window** (preference): Claim — source: chat:1\n", "utf-8")
    with _open(tmp_path / "c.db") as fresh:
        import_markdown(fresh, ALICE, old)
        assert [(f.subject, f.attribute) for f in fresh.facts.current(ALICE)] == [
            ("deploy", "prod / window")]


def test_import_without_trust_sends_identity_to_review(mem: Memory, tmp_path: Path) -> None:
    clock = ManualClock("2026-08-03T09:00:00Z")
    with _open(tmp_path / "a.db", clock) as source:
        _populate(source, clock)
        export_markdown(source, ALICE, tmp_path / "files")
    fresh = mem
    report = import_markdown(fresh, ALICE, tmp_path / "files")
    assert fresh.facts.current(ALICE, tier="identity") == []
    waiting = {f.claim for f in fresh.review.pending(ALICE)}
    assert waiting == {"Alice leads the docs team at Acme", "Alice works from Berlin"}
    assert len(report.pending) == 2 and report.counts["committed"] == 3
    again = import_markdown(fresh, ALICE, tmp_path / "files")
    assert again.counts.get("episodes", 0) == 0
    assert again.counts["episodes_existing"] == 5
    assert again.counts["checkpoints_unchanged"] == 2
    assert again.counts["duplicate"] == 5
    assert len(fresh.review.pending(ALICE)) == 2
    trusted = import_markdown(fresh, ALICE, tmp_path / "files", trust=True, reviewer="alice")
    assert trusted.counts["approved"] == 1  # the identity entry a person now vouches for
    assert [f.claim for f in fresh.facts.current(ALICE, tier="identity")] == [
        "Alice leads the docs team at Acme"]
    assert [f.claim for f in fresh.review.pending(ALICE)] == ["Alice works from Berlin"]


def test_import_goes_through_the_write_policy(tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / WORKING).write_text(
        "# Working context\n\n## Current facts\n\n"
        "- **ci / token** (system_fact): The CI token is " + TOKEN + " — source: ci:log\n"
        "- **alice / editor** (preference): Alice uses Neovim — source: chat:1\n", "utf-8")
    with _open(tmp_path / "m.db") as mem:
        report = import_markdown(mem, ALICE, files, trust=True, reviewer="alice")
        assert report.counts == {"rejected": 1, "committed": 1}
        assert "secret" in report.rejected[0] and TOKEN not in report.rejected[0]
        assert [f.claim for f in mem.facts.current(ALICE)] == ["Alice uses Neovim"]
        assert mem.facts.current(ALICE)[0].provenance.actor == "import"


def test_a_format_error_imports_nothing(tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / IDENTITY).write_text("# Identity\n\n- **alice / role** (profile): Lead — source: "
                                  "hr\n- Alice likes tea\n", "utf-8")
    (files / EPISODIC).write_text("# Episodic log\n\n- 2026-08-01 (chat): tea\n", "utf-8")
    with _open(tmp_path / "m.db") as mem:
        with pytest.raises(ValidationError, match="cannot be imported; nothing imported") as info:
            import_markdown(mem, ALICE, files)
        assert "identity.md:4" in str(info.value)
        assert mem.stats()["rows"]["facts"] == 0 and mem.stats()["rows"]["episodes"] == 0
        with pytest.raises(ValidationError, match="reviewer"):
            import_markdown(mem, ALICE, files, trust=True)


def test_export_refuses_to_overwrite_edits(tmp_path: Path) -> None:
    with _open(tmp_path / "m.db") as mem:
        mem.episodes.append(ALICE, text="first", source="chat", actor="user")
        export_markdown(mem, ALICE, tmp_path / "f")
        export_markdown(mem, ALICE, tmp_path / "f")  # same content: fine
        with (tmp_path / "f" / EPISODIC).open("a", encoding="utf-8") as fh:
            fh.write("- 2026-08-05 (chat): written by hand\n")
        with pytest.raises(Exception, match="--force"):
            export_markdown(mem, ALICE, tmp_path / "f")
        export_markdown(mem, ALICE, tmp_path / "f", overwrite=True)
        assert "by hand" not in (tmp_path / "f" / EPISODIC).read_text("utf-8")


# -- migrate ------------------------------------------------------------------

EXPECTED_ROUTES = {
    "Alice is the docs lead at Acme": "identity",
    "Prefers concise answers, no emojis": "identity",
    "Timezone: Europe/Berlin": "identity",
    "Never push directly to main; always open a PR": "identity",
    "The docs site is built with Hugo and deployed on Netlify": "identity",
    "Search runs on Algolia": "identity",
    "Working on: release notes for v17": "working",
    "[x] collect merged PRs": "working",
    "[ ] ask Bob for the changelog (due 2026-09-01)": "working",
    "Next: publish the notes to the blog": "working",
    "Deployed v16 docs; search index rebuilt": "episodic",
    "Preview deploy failed: stale build cache": "episodic",
    "Fixed the cache issue by clearing the Netlify cache": "episodic",
    "Met with Bob about the changelog format": "episodic",
    "Yesterday the link checker flagged 12 broken links": "episodic",
    "v17 notes draft shared in #docs": "episodic",
    "Learned: Hugo shortcodes break when nested inside lists": "identity",
    "TODO review Bob's PR about redirects": "working",
    "Shipped the new sidebar navigation": "episodic",
    "Bob reports to Alice since March 2026": "identity",
    "Carol handles the translations, usually on Fridays": "identity",
}


def test_migrate_sends_each_line_to_the_right_file(tmp_path: Path) -> None:
    source = tmp_path / "MEMORY.md"
    source.write_text((DATA / "MEMORY_messy.md").read_text("utf-8"), "utf-8")
    out = tmp_path / "out"
    result = migrate_memory_file(source, out, today=date(2026, 8, 10))
    routed = {r.text: r.destination for r in result.routes if r.destination != "skipped"}
    assert routed == EXPECTED_ROUTES
    skipped = [r for r in result.routes if r.destination == "skipped"]
    assert any("secret" in r.note for r in skipped)
    texts = {name: (out / name).read_text("utf-8") for name in FILES}
    destination_file = {"identity": IDENTITY, "working": WORKING, "episodic": EPISODIC}
    for line, dest in EXPECTED_ROUTES.items():
        needle = {"[x] collect merged PRs": "collect merged PRs",
                  "[ ] ask Bob for the changelog (due 2026-09-01)": "ask Bob for the changelog",
                  "Working on: release notes for v17": "Objective: release notes for v17",
                  "Next: publish the notes to the blog": "Next action: publish the notes",
                  "TODO review Bob's PR about redirects": "- review Bob's PR"}.get(line, line)
        holders = [n for n, t in texts.items() if needle in t]
        assert holders == [destination_file[dest]], (line, holders)
    assert "ghp_" not in "".join(texts.values())
    episodic = texts[EPISODIC]
    assert "- 2026-07-28 (~MEMORY.md:" in episodic  # exact date, reconstructed source
    assert "- 2026-08-02 (ci run 812): Preview deploy failed" in episodic  # cited source
    assert "- ~2026-08-02 (~MEMORY.md:" in episodic  # undated: nearest earlier date, marked
    assert "- 2026-08-03 (~MEMORY.md:25): Met with Bob" in episodic  # dated heading
    assert "(https://chat.example.com/c/docs/123): v17 notes draft" in episodic
    assert "- **user / timezone** (profile): Timezone: Europe/Berlin" in texts[IDENTITY]
    assert "- **bob / " in texts[IDENTITY] and "(relationship)" in texts[IDENTITY]
    assert [i for i in lint_markdown(out) if i.severity == "error"] == []
    with _open(tmp_path / "m.db") as mem:
        report = import_markdown(mem, ALICE, out, trust=True, reviewer="alice")
        assert report.rejected == []
        assert len(mem.facts.current(ALICE, tier="identity")) == 9
        cp = mem.checkpoints.current(ALICE, "release-notes-v17")
        assert cp is not None and cp.next_action == "publish the notes to the blog"


def test_migrate_dates_relative_lines_and_keeps_deadlines_in_state() -> None:
    result = migrate_text("## 2026-05-04\n- Yesterday the nightly build broke\n"
                          "## Now\n- Ship the fix by 2026-05-10\n", today=date(2026, 6, 1))
    episodes = result.files.episodes
    assert [(e.day, e.approx) for e in episodes] == [("2026-05-03", True)]
    assert result.files.tasks[0].fields["plan"] == ["Ship the fix by 2026-05-10"]


# -- lint ---------------------------------------------------------------------

def test_lint_reports_format_and_size_problems(tmp_path: Path) -> None:
    d = tmp_path / "files"
    d.mkdir()
    facts = "\n".join(f"- **alice / fact_{i}** (profile): Fact number {i} — source: chat"
                      for i in range(31))
    (d / IDENTITY).write_text("# Identity\n\n" + facts + "\n- **alice / fact_0** (profile): "
                              "dup — source: chat\n", "utf-8")
    (d / WORKING).write_text("# Working context\n\n## Current facts\n\n- no slot here\n"
                             "## Task: t\n\n- Objective: a\n- Objective: b\n", "utf-8")
    (d / EPISODIC).write_text("# Episodic log\n\n- 2026-08-02 (chat): later\n"
                              "- 2026-08-01 (chat): earlier\n- 2026-13-01 (chat): bad\n"
                              f"- 2026-08-03 (chat): key {TOKEN}\n", "utf-8")
    messages = [str(i) for i in lint_markdown(d)]
    joined = "\n".join(messages)
    assert "32 entries" in joined
    assert "already has a value" in joined
    assert "working-context.md:5: error: not a fact line" in joined
    assert "Objective given twice" in joined
    assert "append-only, oldest first" in joined
    assert "not a valid date" in joined
    assert "episodic.md:6: error: contains a secret" in joined and TOKEN not in joined
    (d / IDENTITY).unlink()
    assert any(m == "identity.md:0: error: file is missing" for m in
               (str(i) for i in lint_markdown(d)))


def test_cli_round_trip_migrate_and_lint(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"MEMSTRATA_HOME": str(tmp_path / "home"), "MEMSTRATA_EMBEDDER": "none"}
    url = f"sqlite:///{tmp_path}/cli.db"
    scope = ["--url", url, "--user", "alice", "--project", "docs-site"]
    steps = [
        ["facts", "propose", "Alice prefers tea", "--kind", "preference", "--subject",
         "alice", "--attribute", "drink", "--actor", "user", "--source", "chat:1", *scope],
        ["episodes", "append", "Kettle broke", "--source", "chat:2", "--actor", "user",
         "--observed-at", "2026-08-01", *scope],
        ["export", "--markdown", str(tmp_path / "one"), *scope],
        ["lint", str(tmp_path / "one")],
        ["import", str(tmp_path / "one"), "--url", f"sqlite:///{tmp_path}/cli2.db", "--user",
         "alice", "--project", "docs-site", "--trust", "--reviewer", "alice"],
        ["export", "--markdown", str(tmp_path / "two"), "--url",
         f"sqlite:///{tmp_path}/cli2.db", "--user", "alice", "--project", "docs-site"],
        ["migrate", str(DATA / "MEMORY_messy.md"), "--to", str(tmp_path / "migrated")],
    ]
    for args in steps:
        res = runner.invoke(cli, args, env=env)
        assert res.exit_code == 0, (args, res.output)
    for name in FILES:
        assert (tmp_path / "two" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    assert "- 2026-08-01 (chat:2): Kettle broke" in (tmp_path / "one" / EPISODIC).read_text()
    (tmp_path / "one" / IDENTITY).write_text("# Identity\n\n- broken\n", "utf-8")
    res = runner.invoke(cli, ["lint", str(tmp_path / "one"), "--json"], env=env)
    assert res.exit_code == 1 and '"ok": false' in res.output
