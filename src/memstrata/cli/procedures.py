"""CLI: versioned procedures with eval-gated activation (``memstrata procedures ...``).

One command, one library call (:mod:`memstrata.layers.procedures`). A procedure is
tenant-wide unless ``--user``/``--project``/``--agent`` name a narrower scope.
``add`` only proposes; ``activate`` (a person, ``--by``) runs the version's
cases and refuses with the failing cases; ``rollback`` undoes the last
activation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ._common import current_scope, emit_json, json_option, open_memory, store_options, table


def _when(value: Any) -> str:
    return value.isoformat(timespec="minutes") if value is not None else ""


@click.group()
def procedures() -> None:
    """Versioned workflows: propose, check, activate (after cases pass), roll back."""


@procedures.command("add")
@store_options
@json_option
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--by", "proposed_by", default=None, help="Who proposes it (default: owner).")
def procedures_add(as_json: bool, file: Path, proposed_by: str | None) -> None:
    """Propose the procedure in FILE.yaml as a new version (status: proposed)."""
    from ..layers.procedure_model import load_procedure, run_cases

    mem = open_memory(create=True, embedder=None)
    proc = mem.procedures.propose(load_procedure(file), scope=current_scope(),
                                  proposed_by=proposed_by)
    report = run_cases(proc)
    if as_json:
        emit_json({"procedure": proc, "cases": report})
        return
    click.echo(f"proposed {proc.name} v{proc.version} ({proc.status})")
    click.echo(report.summary())
    if report.ok:
        click.echo(f"activate with: memstrata procedures activate {proc.name} {proc.version} "
                   "--by <person>")


@procedures.command("show")
@store_options
@json_option
@click.argument("name")
@click.option("--version", "version", type=int, default=None,
              help="Which version (default: the active one, else the latest).")
def procedures_show(as_json: bool, name: str, version: int | None) -> None:
    """Show one version of NAME as YAML."""
    from ..layers.procedure_model import dump_procedure

    mem = open_memory(embedder=None)
    proc = mem.procedures.get(name, version, scope=current_scope())
    if as_json:
        emit_json(proc)
        return
    click.echo(f"# {proc.name} v{proc.version}: {proc.status}"
               + (f", activated {_when(proc.activated_at)} by {proc.activated_by}"
                  if proc.activated_by else "")
               + (f"; proposed by {proc.proposed_by}" if proc.proposed_by else ""))
    click.echo(dump_procedure(proc), nl=False)


@procedures.command("list")
@store_options
@json_option
def procedures_list(as_json: bool) -> None:
    """Every procedure of the scope: its active version, else its latest."""
    mem = open_memory(embedder=None)
    found = mem.procedures.list(scope=current_scope())
    if as_json:
        emit_json(found)
    else:
        table("procedures", ["name", "version", "status", "owner", "steps", "cases",
                             "activated", "by"],
              [[p.name, p.version, p.status, p.owner, len(p.steps), len(p.cases),
                _when(p.activated_at), p.activated_by] for p in found])


@procedures.command("history")
@store_options
@json_option
@click.argument("name")
def procedures_history(as_json: bool, name: str) -> None:
    """Every proposal, activation, refusal and rollback of NAME, oldest first."""
    mem = open_memory(embedder=None)
    events = mem.procedures.history(name, scope=current_scope())
    if as_json:
        emit_json(events)
    else:
        table(f"history of {name}", ["#", "version", "action", "at", "by", "detail"],
              [[e.seq, e.version, e.action, _when(e.at), e.by, e.detail] for e in events])


@procedures.command("diff")
@store_options
@json_option
@click.argument("name")
@click.argument("v1", type=int)
@click.argument("v2", type=int)
def procedures_diff(as_json: bool, name: str, v1: int, v2: int) -> None:
    """What changed from version V1 to V2 of NAME."""
    mem = open_memory(embedder=None)
    d = mem.procedures.diff(name, v1, v2, scope=current_scope())
    if as_json:
        emit_json(d)
        return
    if d.same:
        click.echo(f"{name} v{v1} and v{v2} have the same content")
        return
    for line in d.changes:
        click.echo(line)
    click.echo()
    click.echo(d.unified, nl=False)


@procedures.command("check")
@store_options
@json_option
@click.argument("target")
@click.option("--version", "version", type=int, default=None,
              help="Stored version to check (default: the active one, else the latest).")
def procedures_check(as_json: bool, target: str, version: int | None) -> None:
    """Run the cases of TARGET (a stored name or a YAML file) without activating."""
    from ..layers.procedure_model import load_procedure, run_cases

    path = Path(target)
    from_file = path.suffix in (".yaml", ".yml") and path.is_file()
    if from_file:
        report = run_cases(load_procedure(path))
    else:
        mem = open_memory(embedder=None)
        report = run_cases(mem.procedures.get(target, version, scope=current_scope()))
    if as_json:
        emit_json(report)
    else:
        click.echo(report.summary(str(path) if from_file else None))
    if not report.ok:
        raise SystemExit(1)


@procedures.command("activate")
@store_options
@json_option
@click.argument("name")
@click.argument("version", type=int)
@click.option("--by", "by", required=True, help="The person activating it.")
def procedures_activate(as_json: bool, name: str, version: int, by: str) -> None:
    """Activate VERSION of NAME if every case passes (else refused, with the failures)."""
    mem = open_memory(embedder=None)
    proc = mem.procedures.activate(name, version, by=by, scope=current_scope())
    if as_json:
        emit_json(proc)
    else:
        click.echo(f"active: {proc.name} v{proc.version} (by {proc.activated_by})")


@procedures.command("rollback")
@store_options
@json_option
@click.argument("name")
@click.option("--by", "by", required=True, help="The person rolling back.")
def procedures_rollback(as_json: bool, name: str, by: str) -> None:
    """Undo the last activation of NAME: the previously active version is active again."""
    mem = open_memory(embedder=None)
    proc = mem.procedures.rollback(name, by=by, scope=current_scope())
    if as_json:
        emit_json(proc)
    else:
        click.echo(f"rolled back: {proc.name} v{proc.version} is active again")


@procedures.command("next")
@store_options
@json_option
@click.argument("name")
@click.option("--condition", "conditions", multiple=True, help="A condition that holds.")
@click.option("--done", "done", multiple=True, help="A step already done.")
def procedures_next(as_json: bool, name: str, conditions: tuple[str, ...],
                    done: tuple[str, ...]) -> None:
    """What to do next in NAME's active version, given the conditions and done steps."""
    mem = open_memory(embedder=None)
    decision = mem.procedures.next_step(
        name, {"conditions": list(conditions), "done": list(done)}, scope=current_scope())
    if as_json:
        emit_json(decision)
        return
    target = decision.step or decision.condition or ""
    click.echo(f"{decision.kind}{': ' + target if target else ''} ({decision.reason})")
    if decision.text:
        click.echo(f"  {decision.text}")


def register(group: click.Group) -> None:
    group.add_command(procedures)
