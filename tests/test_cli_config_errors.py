"""A configuration value memstrata cannot use is refused with an error that names the
setting, where the value came from (the config file or the environment variable) and what
the setting takes — never the generic "check the store URL" hint, from any command."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from memstrata import ConfigError
from memstrata.cli import cli
from memstrata.config import load_config

GENERIC = ConfigError("x").hint

FILE_VALUES = [
    ("min_confidence = 1.5", "min_confidence", "a number from 0 to 1"),
    ('min_confidence = "high"', "min_confidence", "a number from 0 to 1"),
    ("dedup_cosine = -0.1", "dedup_cosine", "a number from 0 to 1"),
    ('secrets = "keep"', "secrets", "'reject' or 'redact'"),
    ('pii_to_review = "maybe"', "pii_to_review", "true or false"),
    ("pii_to_review = 1", "pii_to_review", "true or false"),
]


def _home(tmp_path: Path, policy: str) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f"[policy]\n{policy}\n")
    return home


@pytest.mark.parametrize(("line", "key", "allowed"), FILE_VALUES)
def test_a_bad_file_value_names_the_setting_the_file_and_the_values(
        tmp_path: Path, line: str, key: str, allowed: str) -> None:
    home = _home(tmp_path, line)
    with pytest.raises(ConfigError) as err:
        load_config(env={"MEMSTRATA_HOME": str(home)})
    path = str(home / "config.toml")
    assert f"policy.{key}" in err.value.message and path in err.value.message
    assert allowed in err.value.message
    hint = err.value.hint or ""
    assert hint != GENERIC and key in hint and path in hint and allowed in hint


@pytest.mark.parametrize(("var", "value", "key", "allowed"), [
    ("MEMSTRATA_SECRETS", "bogus", "secrets", "'reject' or 'redact'"),
    ("MEMSTRATA_MIN_CONFIDENCE", "1.5", "min_confidence", "a number from 0 to 1"),
    ("MEMSTRATA_MIN_CONFIDENCE", "high", "min_confidence", "a number from 0 to 1"),
])
def test_a_bad_environment_value_names_the_variable(tmp_path: Path, var: str, value: str,
                                                   key: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(env={"MEMSTRATA_HOME": str(tmp_path), var: value})
    assert var in err.value.message and f"policy.{key}" in err.value.message
    hint = err.value.hint or ""
    assert hint != GENERIC and var in hint and allowed in hint


def test_good_values_in_every_spelling_are_taken(tmp_path: Path) -> None:
    home = _home(tmp_path, 'pii_to_review = "no"\nmin_confidence = 1\nsecrets = "redact"')
    cfg = load_config(env={"MEMSTRATA_HOME": str(home), "MEMSTRATA_MIN_CONFIDENCE": "0.5"})
    assert cfg.policy_values == {"pii_to_review": False, "min_confidence": 0.5,
                                 "secrets": "redact"}


def test_a_wrongly_typed_top_level_key_says_how_to_write_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("user = 5\n")
    with pytest.raises(ConfigError) as err:
        load_config(env={"MEMSTRATA_HOME": str(home)})
    assert err.value.hint != GENERIC and 'user = "..."' in (err.value.hint or "")


@pytest.mark.parametrize("command", [["config", "show"], ["doctor"], ["stats"]])
def test_commands_print_the_setting_not_the_generic_hint(tmp_path: Path,
                                                         command: list[str]) -> None:
    home = _home(tmp_path, "min_confidence = 1.5")
    env = {"MEMSTRATA_HOME": str(home), "MEMSTRATA_URL": None, "MEMSTRATA_CONFIG": None,
           "MEMSTRATA_MIN_CONFIDENCE": None, "MEMSTRATA_SECRETS": None}
    res = CliRunner().invoke(cli, command, env=env, prog_name="memstrata")
    assert res.exit_code == 1, res.output
    assert "policy.min_confidence" in res.output and str(home / "config.toml") in res.output
    assert "hint: set min_confidence under [policy]" in res.output
    assert "check the store URL" not in res.output
    bad_env = CliRunner().invoke(cli, command, env={**env, "MEMSTRATA_HOME": str(tmp_path),
                                                    "MEMSTRATA_SECRETS": "bogus"})
    assert bad_env.exit_code == 1 and "hint: set MEMSTRATA_SECRETS to 'reject' or 'redact'" \
        in bad_env.output


@pytest.mark.parametrize(("where", "env", "file_line", "flag"), [
    ("MEMSTRATA_EMBEDDER", {"MEMSTRATA_EMBEDDER": "bogus"}, None, None),
    ("config.toml", {}, 'embedder = "minilmm"', None),
    ("--embedder", {}, None, "bogus:3"),
])
def test_an_embedder_setting_that_names_none_is_refused_by_every_command(
        tmp_path: Path, where: str, env: dict[str, str], file_line: str | None,
        flag: str | None) -> None:
    """A misspelled embedder is refused where it is read, naming where it came from, even by
    a command that never embeds (``stats`` took MEMSTRATA_EMBEDDER=bogus silently); the
    known names and ``none`` pass."""
    home = tmp_path / "home"
    home.mkdir()
    if file_line:
        (home / "config.toml").write_text(file_line + "\n")
    flags = {"embedder": flag} if flag else None
    with pytest.raises(ConfigError) as err:
        load_config(flags, env={"MEMSTRATA_HOME": str(home), **env})
    assert where in str(err.value) and "none" in (err.value.hint or "")
    if not flag:
        out = CliRunner().invoke(cli, ["stats"], env={"MEMSTRATA_HOME": str(home), **env})
        assert out.exit_code != 0 and where in out.output
    for good in ("minilm", "hash:64", "none", "HASH"):
        load_config({"embedder": good}, env={"MEMSTRATA_HOME": str(home)})
