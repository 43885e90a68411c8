"""`memstrata procedures`: what people read about a procedure is true."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from memstrata.cli import cli

DEPLOY = """name: deploy
owner: alice
steps: [build, verify]
cases:
  - {state: {conditions: []}, expect: {next_step: build}}
"""


def _run(tmp_path: Path, *args: str) -> tuple[int, str]:
    env = {"MEMSTRATA_HOME": str(tmp_path / "home"), "MEMSTRATA_EMBEDDER": "none",
           "MEMSTRATA_URL": None, "MEMSTRATA_CONFIG": None}
    res = CliRunner().invoke(cli, [*args, "--url", f"sqlite:///{tmp_path / 'p.db'}"],
                             env=env, prog_name="memstrata")
    return res.exit_code, res.output


def test_check_of_a_file_says_it_is_a_file_not_a_version(tmp_path: Path) -> None:
    file = tmp_path / "deploy.yaml"
    file.write_text(DEPLOY)
    code, out = _run(tmp_path, "procedures", "check", str(file))
    assert code == 0, out
    assert "None" not in out
    assert out.splitlines()[0] == f"deploy ({file}, not stored): 1/1 cases pass"
    failing = tmp_path / "failing.yaml"
    failing.write_text(DEPLOY.replace("next_step: build", "next_step: verify"))
    code, out = _run(tmp_path, "procedures", "check", str(failing))
    assert code == 1 and "None" not in out
    assert out.startswith(f"deploy ({failing}, not stored): 0/1 cases pass\n  case #1:")
    versioned = tmp_path / "versioned.yaml"
    versioned.write_text("version: 3\n" + DEPLOY)
    code, out = _run(tmp_path, "procedures", "check", str(versioned))
    assert out.startswith(f"deploy v3 ({versioned}, not stored): 1/1"), out


def test_a_stored_version_is_reported_by_its_number(tmp_path: Path) -> None:
    file = tmp_path / "deploy.yaml"
    file.write_text(DEPLOY)
    assert _run(tmp_path, "procedures", "add", str(file))[0] == 0
    code, out = _run(tmp_path, "procedures", "check", "deploy")
    assert code == 0 and out.startswith("deploy v1: 1/1 cases pass"), out


def test_activate_and_rollback_run_as_documented_with_by(tmp_path: Path) -> None:
    """docs/cli.md: `procedures activate NAME VERSION --by NAME`, `rollback NAME --by NAME`;
    without --by a person is not named, and the command refuses (exit 2)."""
    file = tmp_path / "deploy.yaml"
    file.write_text(DEPLOY)
    assert _run(tmp_path, "procedures", "add", str(file))[0] == 0
    file.write_text(DEPLOY.replace("verify]", "lint, verify]"))
    assert _run(tmp_path, "procedures", "add", str(file))[0] == 0
    code, out = _run(tmp_path, "procedures", "activate", "deploy", "1")
    assert code == 2 and "--by" in out
    assert _run(tmp_path, "procedures", "activate", "deploy", "1", "--by", "rita")[0] == 0
    assert _run(tmp_path, "procedures", "activate", "deploy", "2", "--by", "rita")[0] == 0
    code, out = _run(tmp_path, "procedures", "rollback", "deploy", "--by", "rita")
    assert code == 0 and "v1 is active again" in out, out
