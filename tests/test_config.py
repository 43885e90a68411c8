"""Configuration: flags > environment > config file > defaults, each value with its source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memstrata import ConfigError, Scope
from memstrata.cli import cli
from memstrata.config import load_config


def _home(tmp_path: Path, toml: str) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(toml, "utf-8")
    return home


def test_precedence_and_sources(tmp_path: Path) -> None:
    home = _home(tmp_path, f'url = "sqlite:///{tmp_path}/file.db"\nuser = "carol"\n'
                           'project = "site"\nembedder = "hash"\n\n[policy]\n'
                           'min_confidence = 0.8\nsecrets = "redact"\n')
    env = {"MEMSTRATA_HOME": str(home), "MEMSTRATA_USER": "dave"}
    cfg = load_config({"project": "blog"}, env=env)
    assert cfg.url == f"sqlite:///{tmp_path}/file.db"
    assert cfg.sources["url"] == f"file:{home / 'config.toml'}"
    assert cfg.scope() == Scope(user="dave", project="blog")
    assert cfg.sources["user"] == "env:MEMSTRATA_USER" and cfg.sources["project"] == "flag"
    assert cfg.embedder == "hash" and cfg.sources["tenant"] == "default"
    policy = cfg.policy()
    assert policy.min_confidence == 0.8 and policy.secrets == "redact"
    assert cfg.sources["policy.min_confidence"].startswith("file:")
    env["MEMSTRATA_MIN_CONFIDENCE"] = "0.95"
    assert load_config(env=env).policy().min_confidence == 0.95
    bare = load_config(env={"MEMSTRATA_HOME": str(tmp_path / "empty")})
    assert bare.url == f"sqlite:///{tmp_path / 'empty' / 'memory.db'}"
    assert bare.scope() == Scope() and bare.policy_values == {}
    assert not (tmp_path / "empty").exists()  # loading creates nothing


@pytest.mark.parametrize(("toml", "message"), [
    ('usr = "alice"\n', "unknown key(s) usr"),
    ('[policy]\nmin_confidence = "high"\n', "must be a number"),
    ('[policy]\nmin_confidence = 1.5\n', "from 0 to 1"),
    ('[policy]\nsecrets = "keep"\n', "'reject' or 'redact'"),
    ('[policy]\nthreshold = 0.5\n', "unknown policy key(s) threshold"),
    ("url = 5\n", "url must be a string"),
    ("url = \n", "not valid TOML"),
])
def test_bad_config_names_the_problem(tmp_path: Path, toml: str, message: str) -> None:
    home = _home(tmp_path, toml)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(env={"MEMSTRATA_HOME": str(home)})


def test_the_configured_store_and_policy_are_what_commands_use(tmp_path: Path) -> None:
    db = tmp_path / "configured.db"
    home = _home(tmp_path, f'url = "sqlite:///{db}"\nuser = "alice"\nembedder = "none"\n'
                           '[policy]\nmin_confidence = 0.95\n')
    runner = CliRunner()
    env = {"MEMSTRATA_HOME": str(home), "MEMSTRATA_URL": None, "MEMSTRATA_USER": None,
           "MEMSTRATA_EMBEDDER": None}
    base = ["facts", "propose", "--kind", "preference", "--subject", "alice", "--actor", "user",
            "--source", "chat:1"]
    low = runner.invoke(cli, [*base, "Likes tea", "--attribute", "drink", "--confidence",
                              "0.9"], env=env)
    assert low.exit_code == 1 and "below the threshold 0.95" in low.output
    ok = runner.invoke(cli, [*base, "Likes tea", "--attribute", "drink", "--confidence",
                             "0.99"], env=env)
    assert ok.exit_code == 0, ok.output
    assert db.exists()
    listed = runner.invoke(cli, ["facts", "list", "--json"], env=env)
    facts = json.loads(listed.stdout)
    assert [f["claim"] for f in facts] == ["Likes tea"]
    assert facts[0]["scope"]["user"] == "alice"  # the user came from the file
    other = runner.invoke(cli, ["facts", "list", "--json", "--user", "bob"], env=env)
    assert json.loads(other.stdout) == []

    shown = runner.invoke(cli, ["config", "show", "--json", "--project", "p1"], env=env)
    data = json.loads(shown.stdout)
    assert data["url"] == {"value": f"sqlite:///{db}",
                           "source": f"file:{home / 'config.toml'}"}
    assert data["project"] == {"value": "p1", "source": "flag"}
    assert data["policy.min_confidence"]["value"] == "0.95"
    table = runner.invoke(cli, ["config", "show"], env={**env, "COLUMNS": "200"})
    assert table.exit_code == 0 and "env:MEMSTRATA_HOME" in table.output


def test_a_relative_store_path_is_opened_in_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memstrata import Memory

    work, home = tmp_path / "work", tmp_path / "user-home"
    work.mkdir()
    home.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    alice = Scope(user="alice")
    expected = {"plain.db": work / "plain.db", "./dot.db": work / "dot.db",
                "sqlite:prefixed.db": work / "prefixed.db",
                "sqlite:///~/tilde.db": home / "tilde.db"}
    for url, path in expected.items():
        mem = Memory.open(url, embedder=None)
        mem.episodes.append(alice, text="hello", actor="user", source="chat:1")
        assert Path(mem.stats()["path"]) == path, url
        mem.close()
        assert path.exists(), url
    # the environment and the command line name a store the same way
    runner = CliRunner()
    env = {"MEMSTRATA_HOME": "rel-home", "MEMSTRATA_URL": "env.db", "MEMSTRATA_USER": None,
           "MEMSTRATA_EMBEDDER": "none"}
    shown = runner.invoke(cli, ["init", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["path"] == str(work / "env.db")
    flagged = runner.invoke(cli, ["init", "--json", "--url", "flag.db"], env=env)
    assert json.loads(flagged.stdout)["path"] == str(work / "flag.db")
    defaulted = runner.invoke(cli, ["init", "--json"], env={**env, "MEMSTRATA_URL": None})
    assert json.loads(defaulted.stdout)["path"] == str(work / "rel-home" / "memory.db")


def test_a_command_that_only_reads_never_creates_a_missing_store(tmp_path: Path) -> None:
    """A mistyped --url or $MEMSTRATA_URL is an error that says how to create the store,
    not an empty new store shown as the answer; no file is left behind. A command that
    writes creates the store, and the reads then work. The default store under the home is
    created by any command, as on a fresh install."""
    runner = CliRunner()
    env = {"MEMSTRATA_HOME": str(tmp_path / "home"), "MEMSTRATA_URL": None,
           "MEMSTRATA_USER": None, "MEMSTRATA_EMBEDDER": "none"}
    typo = tmp_path / "tpyo.db"
    reads = (["recall", "deploy"], ["stats"], ["facts", "list"], ["episodes", "search", "x"],
             ["context"], ["forget", "--match", "x", "--user", "a"], ["doctor"],
             ["ledger", "list"], ["procedures", "list"], ["keys", "list"], ["review", "list"],
             ["get", "fact:abc"], ["checkpoint", "show", "t"], ["sweep"], ["reindex"],
             ["export", "--markdown", str(tmp_path / "md")])
    for args in reads:
        for where in (["--url", str(typo)], {"MEMSTRATA_URL": str(typo)}):  # flag, env
            out = runner.invoke(cli, [*args, *(where if isinstance(where, list) else [])],
                                env={**env, **(where if isinstance(where, dict) else {})})
            assert out.exit_code != 0, (args, where, out.output)
            assert "no memstrata store at" in out.output and "memstrata init" in out.output
    assert not typo.exists() and not (tmp_path / "md").exists()
    # the default store under the home is the product's own: a fresh install reads it empty
    fresh = runner.invoke(cli, ["facts", "list", "--user", "a", "--json"], env=env)
    assert fresh.exit_code == 0 and json.loads(fresh.stdout) == []
    wrote = runner.invoke(cli, ["episodes", "append", "deploy went fine", "--actor", "user",
                                "--source", "ci:1", "--user", "a", "--url", str(typo)], env=env)
    assert wrote.exit_code == 0, wrote.output
    found = runner.invoke(cli, ["recall", "deploy", "--user", "a", "--url", str(typo),
                                "--json"], env=env)
    assert found.exit_code == 0 and "deploy went fine" in found.output


def test_a_groups_store_flags_reach_its_commands(tmp_path: Path) -> None:
    """`memstrata review --url X --user u list` reads X as u (the group's flags were
    dropped: the default store was read and created instead)."""
    runner = CliRunner()
    env = {"MEMSTRATA_HOME": str(tmp_path / "home"), "MEMSTRATA_URL": None,
           "MEMSTRATA_USER": None, "MEMSTRATA_EMBEDDER": "none"}
    store = tmp_path / "team.db"
    held = runner.invoke(cli, ["facts", "propose", "u likes tea", "--kind", "preference",
                               "--subject", "u", "--attribute", "drink", "--actor", "agent",
                               "--source", "chat:1", "--user", "u", "--url", str(store)],
                         env=env)
    assert held.exit_code == 0, held.output
    listed = runner.invoke(cli, ["review", "--url", str(store), "--user", "u", "list",
                                 "--json"], env=env)
    assert listed.exit_code == 0 and [f["claim"] for f in json.loads(listed.stdout)] == \
        ["u likes tea"]
    assert not (tmp_path / "home" / "memory.db").exists()
    missing = runner.invoke(cli, ["review", "--url", str(tmp_path / "nope.db"), "list"],
                            env=env)
    assert missing.exit_code == 1 and "no memstrata store at" in missing.output
