"""Procedures: evaluation rules, validation, YAML, versions, eval-gated activation, rollback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memstrata import (
    AccessDenied,
    ActivationRefused,
    Conflict,
    ManualClock,
    Memory,
    NotFound,
    Scope,
    ValidationError,
)
from memstrata.cli import cli
from memstrata.layers.procedure_model import (
    CaseReport,
    Procedure,
    ProcedureState,
    diff,
    dump_procedure,
    evaluate,
    load_procedure,
    run_cases,
)

DEPLOY: dict[str, Any] = {
    "name": "deploy",
    "owner": "alice",
    "preconditions": ["on_call", "branch_green"],
    "escalate_if": ["incident_open", "budget_exhausted"],
    "steps": [
        "build",
        {"name": "test", "text": "run the suite"},
        {"name": "migrate", "when": ["schema_changed"]},
        {"name": "release", "requires": ["approved", "window_open"]},
        "verify",
    ],
    "cases": [
        {"name": "start", "state": {"conditions": ["on_call", "branch_green"]},
         "expect": {"next_step": "build"}},
        {"name": "no-approval", "state": {"conditions": ["on_call", "branch_green"],
                                          "done": ["build", "test"]},
         "expect": {"blocked": "approved"}},
        {"name": "approved", "state": {"conditions": ["on_call", "branch_green", "approved",
                                                      "window_open"],
                                       "done": ["build", "test"]},
         "expect": {"next_step": "release"}},
        {"name": "incident", "state": {"conditions": ["incident_open"]},
         "expect": {"escalate": "incident_open"}},
    ],
}
ALL = ["on_call", "branch_green", "approved", "window_open"]


def proc(**changes: Any) -> Procedure:
    return Procedure(**{**DEPLOY, **changes})


def with_lint(**changes: Any) -> Procedure:
    """A variant whose first step is lint, with its cases updated to match."""
    return proc(steps=["lint", *DEPLOY["steps"]],
                cases=[{"state": {"conditions": ALL}, "expect": {"next_step": "lint"}}],
                **changes)


def decide(p: Procedure, conditions: list[str], done: list[str] | None = None) -> dict[str, Any]:
    return evaluate(p, ProcedureState(conditions=conditions, done=done or [])).as_expect()


# -- evaluation rules -------------------------------------------------------
def test_escalation_is_checked_first_in_declared_order() -> None:
    p = proc()
    # escalation beats a missing precondition, and a complete procedure
    assert decide(p, ["incident_open"]) == {"escalate": "incident_open"}
    assert decide(p, [*ALL, "budget_exhausted"], ["build", "test", "release", "verify"]) == {
        "escalate": "budget_exhausted"}
    assert decide(p, ["budget_exhausted", "incident_open"]) == {"escalate": "incident_open"}


def test_missing_precondition_blocks_naming_the_first_missing_one() -> None:
    p = proc()
    assert decide(p, []) == {"blocked": "on_call"}
    assert decide(p, ["on_call"]) == {"blocked": "branch_green"}
    d = evaluate(p, ProcedureState(conditions=["branch_green"]))
    assert d.kind == "blocked" and d.condition == "on_call" and d.step is None


def test_next_step_is_the_first_pending_step_in_order() -> None:
    p = proc()
    assert decide(p, ALL) == {"next_step": "build"}
    # steps done out of order never let a later step jump the queue
    assert decide(p, ALL, ["test", "release"]) == {"next_step": "build"}
    d = evaluate(p, {"conditions": ALL, "done": ["build"]})
    assert d.kind == "next_step" and d.step == "test" and d.text == "run the suite"


def test_step_requirements_block_instead_of_skipping_ahead() -> None:
    p = proc()
    assert decide(p, ["on_call", "branch_green"], ["build", "test"]) == {"blocked": "approved"}
    d = evaluate(p, {"conditions": ["on_call", "branch_green", "approved"],
                     "done": ["build", "test"]})
    assert (d.kind, d.step, d.condition) == ("blocked", "release", "window_open")


def test_when_conditions_make_a_step_apply_or_be_skipped() -> None:
    p = proc()
    assert decide(p, ALL, ["build", "test"]) == {"next_step": "release"}
    assert decide(p, [*ALL, "schema_changed"], ["build", "test"]) == {"next_step": "migrate"}


def test_complete_when_every_applicable_step_is_done() -> None:
    p = proc()
    assert decide(p, ALL, ["build", "test", "release", "verify"]) == {"complete": True}
    # migrate applies once the schema changed, so the same done list is no longer complete
    assert decide(p, [*ALL, "schema_changed"], ["build", "test", "release", "verify"]) == {
        "next_step": "migrate"}


def test_unknown_done_step_is_an_error_not_silently_ignored() -> None:
    with pytest.raises(ValidationError, match="unknown step"):
        evaluate(proc(), {"conditions": ALL, "done": ["buidl"]})


# -- validation and YAML -----------------------------------------------------
@pytest.mark.parametrize("changes, match", [
    ({"steps": ["build", "build"]}, "unique"),
    ({"steps": []}, "steps"),
    ({"preconditions": ["on_call"], "escalate_if": ["on_call"]}, "never proceed"),
    ({"cases": [{"expect": {"next_step": "build", "complete": True}}]}, "exactly one"),
    ({"cases": [{"expect": {}}]}, "exactly one"),
    ({"cases": [{"expect": {"complete": False}}]}, "only be true"),
    ({"name": "has space"}, "may only contain"),
    ({"steps": [{"name": "x", "requires": "approved"}]}, "list of names"),
    ({"cases": [{"name": "a", "expect": {"complete": True}},
                {"name": "a", "expect": {"complete": True}}]}, "case names"),
])
def test_invalid_procedures_are_refused(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        load_procedure({**DEPLOY, **changes})


def test_yaml_round_trip_and_short_step_form(tmp_path: Path) -> None:
    p = proc(version=3, description="Deploy the site.")
    text = dump_procedure(p)
    assert "- build\n" in text  # a name-only step is written as a plain string
    f = tmp_path / "deploy.yaml"
    f.write_text(text)
    again = load_procedure(f)
    assert again == p
    assert again.step("release").requires == ["approved", "window_open"]
    with pytest.raises(ValidationError, match="does not parse"):
        load_procedure("name: [unclosed")


def test_run_cases_reports_each_failure_with_a_reason() -> None:
    # the change drops the approval requirement; a person's case still relies on it
    steps = [s if s != DEPLOY["steps"][3] else {"name": "release"} for s in DEPLOY["steps"]]
    report = run_cases(proc(steps=steps, version=2))
    assert not report.ok
    assert [f.name for f in report.failures] == ["no-approval"]
    failure = report.failures[0]
    assert failure.expected == {"blocked": "approved"}
    assert failure.actual == {"next_step": "release"}
    assert "approved is no longer" in (failure.note or "")
    assert "3/4 cases pass" in report.summary()
    assert run_cases(proc()).ok


def test_case_naming_unknown_done_step_fails_instead_of_raising() -> None:
    report = run_cases(proc(cases=[{"state": {"done": ["gone"]}, "expect": {"complete": True}}]))
    assert not report.ok and "error" in report.failures[0].actual


def test_diff_lists_changes_per_element() -> None:
    a = proc(version=1)
    b = proc(version=2, preconditions=["on_call"], owner="bob",
             steps=[*DEPLOY["steps"][:4], {"name": "purge_cache"}, "verify"])
    d = diff(a, b)
    assert "- precondition branch_green" in d.changes
    assert "+ step purge_cache" in d.changes
    assert "~ owner: 'alice' -> 'bob'" in d.changes
    assert d.unified.startswith("--- deploy@1\n+++ deploy@2")
    assert diff(a, a).same


# -- the store layer ----------------------------------------------------------
def test_propose_versions_are_assigned_unique_and_proposed(mem: Memory) -> None:
    v1 = mem.procedures.propose(proc(), proposed_by="agent")
    assert (v1.version, v1.status, v1.proposed_by) == (1, "proposed", "agent")
    # status in the input is ignored: a proposal never activates itself
    v2 = mem.procedures.propose(proc(status="active", owner="bob"))
    assert (v2.version, v2.status, v2.proposed_by) == (2, "proposed", "bob")
    assert mem.procedures.active("deploy") is None
    # same version, same content: harmless; same version, other content: Conflict
    assert mem.procedures.propose(proc(version=2, owner="bob")).version == 2
    with pytest.raises(Conflict, match="already exists"):
        mem.procedures.propose(proc(version=2, owner="carol"))
    assert mem.procedures.propose(proc(version=7)).version == 7
    assert [p.version for p in mem.procedures.versions("deploy")] == [1, 2, 7]
    assert mem.procedures.get("deploy").version == 7  # nothing active: the latest


def test_activation_runs_cases_and_a_failing_case_blocks_it(mem: Memory,
                                                            clock: ManualClock) -> None:
    mem.procedures.propose(proc())
    v1 = mem.procedures.activate("deploy", 1, activated_by="alice")
    assert (v1.status, v1.activated_by, v1.activated_at) == ("active", "alice", clock.now())
    steps = [s if s != DEPLOY["steps"][3] else {"name": "release"} for s in DEPLOY["steps"]]
    mem.procedures.propose(proc(steps=steps), proposed_by="agent")
    clock.advance(hours=1)
    with pytest.raises(ActivationRefused) as info:
        mem.procedures.activate("deploy", 2, activated_by="alice")
    report = info.value.details["report"]
    assert isinstance(report, CaseReport)
    assert [f.name for f in report.failures] == ["no-approval"]
    assert "no-approval" in str(info.value)
    # nothing changed but the record of the refusal
    assert mem.procedures.active("deploy").version == 1
    assert mem.procedures.get("deploy", 2).status == "proposed"
    assert mem.procedures.next_step(
        "deploy", {"conditions": ["on_call", "branch_green"], "done": ["build", "test"]}
    ).as_expect() == {"blocked": "approved"}
    last = mem.procedures.history("deploy")[-1]
    assert (last.action, last.version, last.by) == ("refused", 2, "alice")
    assert "no-approval" in (last.detail or "")


def test_a_version_without_cases_cannot_be_activated(mem: Memory) -> None:
    mem.procedures.propose(proc(cases=[]))
    with pytest.raises(ActivationRefused, match="no eval cases"):
        mem.procedures.activate("deploy", 1, activated_by="alice")


def test_only_a_person_activates_or_rolls_back(mem: Memory) -> None:
    mem.procedures.propose(proc(), proposed_by="agent")
    for who in ("agent", "agent:planner", "Agent"):
        with pytest.raises(AccessDenied):
            mem.procedures.activate("deploy", 1, activated_by=who)
    mem.procedures.activate("deploy", 1, activated_by="alice")
    with pytest.raises(AccessDenied):
        mem.procedures.rollback("deploy", by="agent")


def test_exactly_one_active_version_enforced_by_the_schema(mem: Memory) -> None:
    for owner in ("alice", "bob", "carol"):
        mem.procedures.propose(proc(owner=owner))
    mem.procedures.activate("deploy", 1, activated_by="alice")
    mem.procedures.activate("deploy", 3, activated_by="alice")
    statuses = {p.version: p.status for p in mem.procedures.versions("deploy")}
    assert statuses == {1: "inactive", 2: "proposed", 3: "active"}
    # activating the active version again is a no-op
    assert mem.procedures.activate("deploy", 3, activated_by="bob").activated_by == "alice"
    with pytest.raises(Conflict), mem.db.transaction("default") as tx:
        tx.execute("UPDATE procedures SET status = 'active' WHERE tenant = 'default' AND "
                   "version = 2")


def test_rollback_is_undo_of_activations(mem: Memory, clock: ManualClock) -> None:
    for owner in ("alice", "bob", "carol"):
        mem.procedures.propose(proc(owner=owner))
    with pytest.raises(Conflict, match="no active version"):
        mem.procedures.rollback("deploy", by="alice")
    for v in (1, 2, 3):
        clock.advance(minutes=5)
        mem.procedures.activate("deploy", v, activated_by="alice")
    restored = mem.procedures.rollback("deploy", by="dana")
    assert (restored.version, restored.status, restored.activated_by) == (2, "active", "dana")
    assert mem.procedures.get("deploy", 3).status == "rolled_back"
    assert mem.procedures.rollback("deploy", by="dana").version == 1
    with pytest.raises(Conflict, match="no earlier active version"):
        mem.procedures.rollback("deploy", by="dana")
    assert mem.procedures.active("deploy").version == 1
    # a rolled-back version can be activated again once a person decides so
    assert mem.procedures.activate("deploy", 3, activated_by="alice").status == "active"
    assert mem.procedures.rollback("deploy", by="alice").version == 1
    history = mem.procedures.history("deploy")
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    assert [(e.action, e.version) for e in history][3:] == [
        ("activated", 1), ("deactivated", 1), ("activated", 2), ("deactivated", 2),
        ("activated", 3), ("rolled_back", 3), ("activated", 2), ("rolled_back", 2),
        ("activated", 1), ("deactivated", 1), ("activated", 3), ("rolled_back", 3),
        ("activated", 1)]
    assert "rollback from v3" in (history[-1].detail or "")


def test_next_step_follows_the_active_version(mem: Memory) -> None:
    with pytest.raises(NotFound):
        mem.procedures.next_step("deploy", {"conditions": ALL})
    mem.procedures.propose(proc())
    mem.procedures.propose(with_lint())
    with pytest.raises(NotFound, match="no active version"):
        mem.procedures.next_step("deploy", {"conditions": ALL})
    mem.procedures.activate("deploy", 1, activated_by="alice")
    assert mem.procedures.next_step("deploy", {"conditions": ALL}).step == "build"
    mem.procedures.activate("deploy", 2, activated_by="alice")
    assert mem.procedures.next_step("deploy", {"conditions": ALL}).step == "lint"
    mem.procedures.rollback("deploy", by="alice")
    assert mem.procedures.next_step("deploy", {"conditions": ALL}).step == "build"


def test_scopes_most_specific_active_version_wins(mem: Memory) -> None:
    docs = Scope(project="docs-site")
    mem.procedures.propose(proc())
    mem.procedures.activate("deploy", 1, activated_by="alice")
    mem.procedures.propose(with_lint(), scope=docs)
    mem.procedures.activate("deploy", 1, activated_by="alice", scope=docs)
    assert mem.procedures.next_step("deploy", {"conditions": ALL}).step == "build"
    assert mem.procedures.next_step("deploy", {"conditions": ALL},
                                    scope=Scope(user="bob", project="docs-site")).step == "lint"
    assert mem.procedures.next_step("deploy", {"conditions": ALL},
                                    scope=Scope(project="api")).step == "build"
    assert mem.procedures.active("deploy", scope=Scope(tenant="other")) is None
    assert [p.version for p in mem.procedures.list()] == [1]
    assert [p.scope for p in mem.procedures.list(scope=docs)] == [docs]


def test_state_survives_a_restart(store_url: str, clock: ManualClock) -> None:
    with Memory.open(store_url, clock=clock, embedder=None) as m:
        m.procedures.propose(proc())
        m.procedures.activate("deploy", 1, by="alice")
    with Memory.open(store_url, clock=clock, embedder=None) as m:
        active = m.procedures.active("deploy")
        assert active is not None and active.version == 1 and active == m.procedures.get(
            "deploy", 1)
        assert len(m.procedures.history("deploy")) == 2


# -- CLI --------------------------------------------------------------------
def test_cli_add_activate_refused_next_diff_rollback(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    v1 = tmp_path / "v1.yaml"
    v1.write_text(dump_procedure(proc()))
    steps = [s if s != DEPLOY["steps"][3] else {"name": "release"} for s in DEPLOY["steps"]]
    v2 = tmp_path / "v2.yaml"
    v2.write_text(dump_procedure(proc(steps=steps)))
    v3 = tmp_path / "v3.yaml"
    v3.write_text(dump_procedure(proc(owner="bob")))
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(cli, [*args, "--url", url], catch_exceptions=False)

    out = run("procedures", "add", str(v1))
    assert out.exit_code == 0 and "proposed deploy v1" in out.output
    assert "4/4 cases pass" in out.output
    assert run("procedures", "activate", "deploy", "1", "--by", "alice").exit_code == 0
    assert run("procedures", "add", str(v2), "--by", "agent").exit_code == 0
    refused = run("procedures", "activate", "deploy", "2", "--by", "alice")
    assert refused.exit_code == 1
    assert "ActivationRefused" in refused.output and "no-approval" in refused.output
    nxt = run("procedures", "next", "deploy", "--condition", "on_call", "--condition",
              "branch_green", "--done", "build", "--done", "test", "--json")
    assert nxt.exit_code == 0 and '"condition": "approved"' in nxt.output
    d = run("procedures", "diff", "deploy", "1", "2")
    assert "~ step release: requires changed" in d.output
    assert run("procedures", "check", "deploy", "--version", "2").exit_code == 1
    assert run("procedures", "check", str(v1)).exit_code == 0
    assert run("procedures", "add", str(v3)).exit_code == 0
    assert run("procedures", "activate", "deploy", "3", "--by", "alice").exit_code == 0
    back = run("procedures", "rollback", "deploy", "--by", "alice")
    assert back.exit_code == 0 and "v1 is active again" in back.output
    listed = run("procedures", "list", "--json")
    assert '"version": 1' in listed.output and '"status": "active"' in listed.output
    shown = run("procedures", "show", "deploy", "--version", "2")
    assert shown.output.startswith("# deploy v2: proposed") and "proposed by agent" in shown.output
    assert load_procedure(shown.output.split("\n", 1)[1]).steps[3].requires == []
    hist = run("procedures", "history", "deploy", "--json")
    assert '"action": "refused"' in hist.output
    missing = run("procedures", "show", "nope")
    assert missing.exit_code == 1 and "NotFound" in missing.output


def test_a_key_given_twice_in_a_procedure_file_is_refused(tmp_path: Path) -> None:
    """YAML keeps the last of two equal keys: a second ``cases:`` silently dropped the first
    one's failing case, and the version activated. A key given twice is a ValidationError
    naming it, from a file and from text alike."""
    text = ("name: deploy\nowner: alice\nsteps:\n  - name: build\n    text: build it\n"
            "cases:\n  - expect: {next_step: deploy}\ncases:\n  - expect: {next_step: build}\n")
    path = tmp_path / "deploy.yaml"
    path.write_text(text)
    for source in (path, text):
        with pytest.raises(ValidationError, match="'cases' is given twice"):
            load_procedure(source)
    assert load_procedure(text.replace("cases:\n  - expect: {next_step: deploy}\n", "")).name == \
        "deploy"
