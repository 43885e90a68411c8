"""The evaluation harness: the starter fixtures pass, a weaker ranker fails, the harness
detects every kind of miss, and the CLI reports it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from memstrata import Memory, Scope, ValidationError
from memstrata.bench.evaluation import (
    Fixture,
    load_fixtures,
    resolve_ranker,
    run_eval,
    run_fixture,
    similarity_only,
)
from memstrata.cli import cli
from memstrata.models import Hit
from memstrata.retrieval.ranking import RankRequest, RankSources

STARTER = Path(__file__).resolve().parents[1] / "evals" / "starter"

STANDING = {
    "stale-deploy-instruction",
    "user-preference-isolation",
    "superseded-ranks-below-replacement",
    "restart-keeps-idempotency-key",
    "procedure-update-must-pass-cases",
    "restricted-record-readers",
    "empty-when-nothing-relevant",
}

DEPLOY: dict[str, Any] = {"kind": "system_fact", "subject": "docs-site",
                          "attribute": "deploy_command", "actor": "user", "source": "chat"}


def fixture(**fields: Any) -> Fixture:
    base: dict[str, Any] = {"name": "t", "now": "2026-03-02T09:00:00Z",
                            "scope": {"project": "docs-site"}}
    return Fixture(**{**base, **fields})


def test_starter_fixtures_all_pass_with_zero_leaks() -> None:
    report = run_eval(STARTER)
    assert {r.name: r.failures for r in report.results if not r.passed} == {}
    assert report.passed
    total = report.total()
    assert total["leaks"] == 0
    assert total["recall"] == 1.0 and total["found"] == total["expected"] > 0
    assert {r.name for r in report.results} >= STANDING
    assert total["fixtures"] >= len(STANDING) + 5
    # fixtures that forbid something did return something else, so a pass is not vacuous
    by_name = {r.name: r for r in report.results}
    assert by_name["restricted-record-readers"].returned == ["band_policy"]
    assert by_name["empty-when-nothing-relevant"].returned == []
    assert by_name["superseded-ranks-below-replacement"].returned[0] == "new_release"
    assert by_name["procedure-update-must-pass-cases"].returned == ["deploy_v1"]
    assert by_name["user-preference-isolation"].tokens > 0


def test_similarity_only_ranker_fails_the_ranking_and_freshness_fixtures() -> None:
    report = run_eval(STARTER, ranker=similarity_only)
    failed = {r.name: r.failures for r in report.results if not r.passed}
    assert "superseded-ranks-below-replacement" in failed
    assert "old_release ranks above new_release" in failed["superseded-ranks-below-replacement"]
    assert "old_deploy not flagged for verification" in failed["stale-deploy-instruction"]
    assert not report.passed and report.ranker == "similarity_only"
    # filters are not the ranker's to break: scope, readers and tenants still hold
    for name in ("user-preference-isolation", "restricted-record-readers",
                 "other-tenant-never-leaks", "other-project-of-same-user"):
        assert name not in failed


def test_memory_ranker_seam_replaces_the_ranking(mem: Memory, alice: Scope) -> None:
    mem.facts.propose(alice, claim="Deploy with make publish", **DEPLOY)
    assert len(mem.recall(alice, "how to deploy")) == 1
    calls: list[str] = []

    def nothing(src: RankSources, req: RankRequest) -> tuple[list[Hit], int]:
        calls.append(req.query)
        return [], 0

    mem.ranker = nothing
    res = mem.recall(alice, "how to deploy")
    assert calls == ["how to deploy"] and res.items == []
    mem.ranker = None
    assert len(mem.recall(alice, "how to deploy")) == 1


def test_harness_counts_misses_and_leaks() -> None:
    fx = fixture(
        store={"facts": [
            {"id": "old", "at": "2026-01-05", "claim": "Deploy with make publish", **DEPLOY},
            {"id": "new", "at": "2026-02-20", "claim": "Deploy with ship docs", **DEPLOY,
             "supersedes": "old"},
            {"id": "bobs", "scope": {"user": "bob"}, "claim": "Bob deploys by hand",
             **{**DEPLOY, "subject": "bob"}}]},
        request={"kind": "recall", "need": "how do we deploy", "decision": "planning"},
        # deliberately wrong expectations: the harness must notice each one
        expect={"include": ["bobs", "new"], "exclude": ["old"], "before": [["old", "new"]],
                "verify": ["new"]})
    r = run_fixture(fx)
    assert not r.passed
    assert (r.expected, r.found, r.recall) == (2, 1, 0.5)
    assert r.leaks == ["old"]
    assert r.failures == ["missing bobs", "leaked old", "new not flagged for verification",
                          "new ranks above old"]
    assert r.returned[:2] == ["new", "old"] and r.tokens > 0


def test_harness_checks_empty_and_operations_and_decisions() -> None:
    empty = run_fixture(fixture(
        store={"facts": [{"id": "f", "claim": "Deploy with make publish", **DEPLOY}]},
        request={"kind": "recall", "need": "deploy"}, expect={"empty": True}))
    assert not empty.passed and empty.failures == ["expected nothing, got f"]
    op = run_fixture(fixture(
        store={"operations": [{"id": "op", "key": "k1", "intent": "publish", "run_id": "r1",
                               "status": "succeeded", "external_ref": "pr/1"}]},
        request={"kind": "ledger_begin", "key": "k1", "intent": "publish", "run_id": "r2",
                 "restart": True},
        expect={"include": ["op"], "operation": {"status": "unknown"}}))
    assert op.failures == ["operation.status is 'succeeded', expected 'unknown'"]
    proc = {"name": "p", "steps": ["a", "b"],
            "cases": [{"expect": {"next_step": "a"}}]}
    nxt = run_fixture(fixture(
        store={"procedures": [{"id": "p1", "procedure": proc, "activate_by": "alice"}]},
        request={"kind": "procedure_next", "name": "p", "state": {"done": ["a"]}},
        expect={"include": ["p1"], "decision": {"next_step": "a"}}))
    assert nxt.failures == ["decision is {'next_step': 'b'}, expected {'next_step': 'a'}"]


def test_setup_that_does_not_happen_as_described_fails_the_fixture() -> None:
    r = run_fixture(fixture(
        store={"facts": [
            {"id": "a", "claim": "Deploy with make publish", **DEPLOY},
            {"id": "b", "claim": "Deploy with ship", **{**DEPLOY, "attribute": "other"},
             "supersedes": "a"}]},
        request={"kind": "recall", "need": "deploy"}))
    assert not r.passed and r.failures[0].startswith("error: fact b was to supersede a")
    rejected = run_fixture(fixture(
        store={"facts": [{"id": "a", "claim": "maybe", **DEPLOY, "confidence": 0.2}]},
        request={"kind": "recall", "need": "deploy"}))
    assert "write was rejected" in rejected.failures[0]


@pytest.mark.parametrize("fields, match", [
    ({"expect": {"include": ["ghost"]}}, "unknown records"),
    ({"store": {"facts": [{"id": "x", "at": "2027-01-01", "claim": "c", **DEPLOY}]}},
     "after now"),
    ({"store": {"facts": [{"id": "x", "claim": "c", **DEPLOY},
                          {"id": "x", "claim": "d", **DEPLOY}]}}, "unique"),
    ({"request": {"kind": "recall"}}, "needs need"),
    ({"request": {"kind": "recall", "need": "x", "colour": "red"}}, "colour"),
    ({"request": {"kind": "telepathy"}}, "kind"),
])
def test_malformed_fixtures_are_refused_at_load(tmp_path: Path, fields: dict[str, Any],
                                                match: str) -> None:
    doc: dict[str, Any] = {"name": "bad", "now": "2026-03-02",
                           "request": {"kind": "recall", "need": "x"}, **fields}
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValidationError, match=match) as info:
        load_fixtures(f)
    assert "bad.yaml" in str(info.value)


def test_loading_files_directories_and_multi_document_yaml(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="no fixture"):
        load_fixtures(tmp_path / "missing")
    with pytest.raises(ValidationError, match=r"no \*\.yaml"):
        load_fixtures(tmp_path)
    docs = [{"name": n, "now": "2026-03-02", "request": {"kind": "context"}} for n in "ab"]
    (tmp_path / "two.yaml").write_text(yaml.safe_dump_all(docs))
    assert [f.name for f in load_fixtures(tmp_path)] == ["a", "b"]
    (tmp_path / "again.yml").write_text(yaml.safe_dump(docs[0]))
    with pytest.raises(ValidationError, match="repeat"):
        load_fixtures(tmp_path)
    starter = load_fixtures(STARTER)
    assert all(f.now.tzinfo is not None for f in starter)


def test_resolve_ranker_names_and_import_paths() -> None:
    assert resolve_ranker(None) == ("default", None)
    assert resolve_ranker("similarity")[1] is similarity_only
    assert resolve_ranker("memstrata.retrieval.ranking:hybrid")[1] is not None
    with pytest.raises(ValidationError, match="unknown ranker"):
        resolve_ranker("best")
    with pytest.raises(ValidationError, match="cannot load"):
        resolve_ranker("memstrata.retrieval.ranking:nope")


def test_cli_eval_table_json_and_exit_status(tmp_path: Path) -> None:
    runner = CliRunner()
    out_file = tmp_path / "report" / "eval.json"
    res = runner.invoke(cli, ["eval", str(STARTER), "--json", "--out", str(out_file)],
                        catch_exceptions=False)
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert data == json.loads(out_file.read_text())
    assert data["total"]["leaks"] == 0 and data["total"]["failed"] == 0
    assert {f["name"] for f in data["fixtures"]} >= STANDING
    table = runner.invoke(cli, ["eval", str(STARTER)], catch_exceptions=False,
                          env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "TOTAL" in table.output and "fixtures pass" in table.output
    weak = runner.invoke(cli, ["eval", str(STARTER), "--ranker", "similarity"],
                         catch_exceptions=False, env={"COLUMNS": "200"})
    assert weak.exit_code == 1 and "FAIL" in weak.output
    bad = runner.invoke(cli, ["eval", str(STARTER), "--ranker", "best"])
    assert bad.exit_code == 1 and "unknown ranker" in bad.output


def test_fixture_clock_and_restart_are_real(tmp_path: Path) -> None:
    # the request runs at `now`, after records written at their own `at`
    fx = fixture(store={"checkpoints": [
        {"id": "v1", "at": "2026-03-01T10:00:00Z", "task": "t", "next_action": "one"},
        {"id": "v2", "at": "2026-03-01T11:00:00Z", "task": "t", "next_action": "two"}]},
        request={"kind": "context", "task": "t", "restart": True},
        expect={"include": ["v2"], "exclude": ["v1"]})
    r = run_fixture(fx)
    assert r.passed and r.returned == ["v2"]
