"""`memstrata import --trust`: what it still leaves pending is what the files list as
pending, and the report's advice is one that works (it said "re-run with --trust" to a run
that had --trust)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from memstrata import Memory, Scope
from memstrata.cli import cli


def test_a_trusted_import_says_what_it_left_pending_and_why(tmp_path: Path) -> None:
    src = f"sqlite:///{tmp_path / 'a.db'}"
    with Memory.open(src, embedder=None) as mem:
        alice = Scope(user="alice")
        first = mem.facts.propose(alice, claim="Alice is a staff engineer", kind="profile",
                                  subject="alice", attribute="role", actor="user",
                                  source="chat:1", tier="identity")
        assert first.record is not None
        mem.review.approve(first.record.id, reviewer="rita")
        mem.facts.propose(alice, claim="Alice is a principal engineer", kind="profile",
                          subject="alice", attribute="role", actor="user", source="chat:2",
                          tier="identity")
    runner = CliRunner()
    files = tmp_path / "files"
    out = runner.invoke(cli, ["export", "--markdown", str(files), "--url", src,
                              "--user", "alice"])
    assert out.exit_code == 0, out.output
    dest = f"sqlite:///{tmp_path / 'b.db'}"
    trusted = runner.invoke(cli, ["import", str(files), "--trust", "--reviewer", "rita",
                                  "--url", dest, "--user", "alice"])
    assert trusted.exit_code == 0, trusted.output
    assert "pending review:" in trusted.output
    assert "re-run with --trust" not in trusted.output
    assert "--trust leaves them so" in trusted.output
    plain = runner.invoke(cli, ["import", str(files), "--url",
                                f"sqlite:///{tmp_path / 'c.db'}", "--user", "alice"])
    assert plain.exit_code == 0, plain.output
    assert "re-run with --trust" in plain.output
