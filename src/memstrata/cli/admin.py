"""CLI: store lifecycle (init, doctor, stats, sweep, forget), tasks, recall and context."""

from __future__ import annotations

import click

from ._common import (
    current_scope,
    emit_json,
    hits_table,
    json_option,
    open_memory,
    short_date,
    store_options,
    table,
)


@click.command()
@store_options
@json_option
def init(as_json: bool) -> None:
    """Create the store (applies migrations) and print where it is."""
    mem = open_memory(create=True, embedder=None)
    stats = mem.stats()
    if as_json:
        emit_json(stats)
    else:
        click.echo(f"memstrata store ready: {mem.db.url}")
        click.echo(f"migrations: {', '.join(stats['migrations'])}")


@click.command()
@store_options
@json_option
def doctor(as_json: bool) -> None:
    """Verify stored invariants (integrity, one current fact per slot, indexes, history)."""
    mem = open_memory(embedder=None)
    problems = mem.doctor()
    if as_json:
        emit_json({"ok": not problems, "problems": problems, "url": mem.db.url})
    elif problems:
        click.echo(f"{len(problems)} problem(s) in {mem.db.url}:")
        for p in problems:
            click.echo(f"  - {p}")
    else:
        click.echo(f"ok: {mem.db.url} passes every check")
    if problems:
        raise SystemExit(1)


@click.command()
@store_options
@json_option
def stats(as_json: bool) -> None:
    """Row counts and size of the store."""
    mem = open_memory(embedder=None)
    s = mem.stats()
    if as_json:
        emit_json(s)
    else:
        table(f"{s.get('backend')} {mem.db.url}", ["table", "rows"], sorted(s["rows"].items()))
        if "bytes" in s:
            click.echo(f"size: {s['bytes'] / 1e6:.2f} MB")


@click.command()
@store_options
@json_option
def sweep(as_json: bool) -> None:
    """Retention: drop expired scratch and episodes, mark expired facts."""
    mem = open_memory(embedder=None)
    out = mem.sweep()
    if as_json:
        emit_json(out)
    else:
        click.echo(", ".join(f"{k}: {v}" for k, v in out.items()))


@click.command()
@store_options
@json_option
@click.option("--match", default=None, help="Forget records containing this text.")
@click.option("--subject", default=None, help="Forget facts about this subject.")
@click.option("--id", "record_ids", multiple=True, help="Forget these record ids/refs.")
@click.option("--force", is_flag=True, help="Allow a tenant-wide forget (no user/project).")
@click.option("--dry-run", is_flag=True, help="Count what would go; delete nothing.")
def forget(as_json: bool, match: str | None, subject: str | None,
           record_ids: tuple[str, ...], force: bool, dry_run: bool) -> None:
    """Delete for real from every layer and index; prints counts per layer."""
    mem = open_memory(embedder=None)
    report = mem.forget(current_scope(), match=match, subject=subject,
                        record_ids=list(record_ids) or None, force=force, dry_run=dry_run)
    if as_json:
        emit_json(report)
    else:
        verb = "would forget" if dry_run else "forgot"
        click.echo(f"{verb} {report.total} item(s) in {report.scope}: " +
                   ", ".join(f"{k} {v}" for k, v in report.counts.items()))
        for note in report.notes:
            click.echo(f"note: {note}")


@click.group()
def checkpoint() -> None:
    """Task checkpoints: the handoff state a fresh worker resumes from."""


@checkpoint.command("show")
@store_options
@json_option
@click.argument("task")
@click.option("--all-versions", is_flag=True, help="Show every saved version.")
def checkpoint_show(as_json: bool, task: str, all_versions: bool) -> None:
    """Show the current checkpoint of TASK."""
    from ..retrieval.context import checkpoint_text

    mem = open_memory(embedder=None)
    scope = current_scope()
    if all_versions:
        versions = mem.checkpoints.versions(scope, task)
        if as_json:
            emit_json(versions)
        else:
            for n, cp in enumerate(versions, 1):
                click.echo(checkpoint_text(cp, superseded=n < len(versions)) + "\n")
        return
    cp = mem.checkpoints.current(scope, task)
    if as_json:
        emit_json(cp)
    elif cp is None:
        click.echo(f"no checkpoint for task {task!r} in {scope}")
    else:
        click.echo(checkpoint_text(cp))


@checkpoint.command("save")
@store_options
@json_option
@click.argument("task")
@click.option("--objective", default=None)
@click.option("--next-action", default=None)
@click.option("--constraint", "constraints", multiple=True)
@click.option("--completed", multiple=True)
@click.option("--plan", multiple=True)
@click.option("--source-ref", "source_refs", multiple=True)
def checkpoint_save(as_json: bool, task: str, objective: str | None, next_action: str | None,
                    constraints: tuple[str, ...], completed: tuple[str, ...],
                    plan: tuple[str, ...], source_refs: tuple[str, ...]) -> None:
    """Overwrite the given fields of TASK's checkpoint (a new version)."""
    fields: dict[str, object] = {}
    if objective is not None:
        fields["objective"] = objective
    if next_action is not None:
        fields["next_action"] = next_action
    for name, values in (("constraints", constraints), ("completed", completed),
                         ("plan", plan), ("source_refs", source_refs)):
        if values:
            fields[name] = list(values)
    mem = open_memory(create=True)  # the configured embedder: a version gets its vector when saved
    cp = mem.checkpoints.save(current_scope(), task, by="cli", **fields)
    if as_json:
        emit_json(cp)
    else:
        click.echo(f"saved checkpoint {task} v{cp.version}")


@checkpoint.command("close")
@store_options
@json_option
@click.argument("task")
@click.option("--outcome", default=None, help="How the task ended (also logged as an episode).")
def checkpoint_close(as_json: bool, task: str, outcome: str | None) -> None:
    """End TASK: it leaves working context and session context; its history stays."""
    mem = open_memory()  # the closing version and its outcome episode get their vectors
    cp = mem.checkpoints.close(current_scope(), task, outcome=outcome, by="cli")
    if as_json:
        emit_json(cp)
    else:
        click.echo(f"closed task {task} (checkpoint v{cp.version})"
                   + (f": {cp.outcome}" if cp.outcome else ""))


@click.group()
def ledger() -> None:
    """The operation ledger: idempotency keys for side effects."""


@ledger.command("list")
@store_options
@json_option
@click.option("--status", type=click.Choice(["pending", "succeeded", "failed", "unknown"]))
def ledger_list(as_json: bool, status: str | None) -> None:
    """Operations of the scope."""
    mem = open_memory(embedder=None)
    ops = mem.ledger.list(current_scope(), status=status)
    if as_json:
        emit_json(ops)
    else:
        table("operations", ["key", "intent", "status", "external_ref", "attempts", "updated"],
              [[o.key, o.intent, o.status, o.external_ref, o.attempts, short_date(o.updated_at)]
               for o in ops])


@ledger.command("show")
@store_options
@json_option
@click.argument("key")
def ledger_show(as_json: bool, key: str) -> None:
    """One operation by key."""
    mem = open_memory(embedder=None)
    op = mem.ledger.get(current_scope(), key)
    if as_json:
        emit_json(op)
    elif op is None:
        click.echo(f"no operation {key!r}")
    else:
        click.echo(f"{op.key}: {op.status} (intent: {op.intent}; ref: {op.external_ref}; "
                   f"attempts: {op.attempts})")


@click.command()
@store_options
@json_option
@click.argument("need")
@click.option("--decision", type=click.Choice(["planning", "lookup", "side_effect", "recovery"]),
              default="lookup", show_default=True)
@click.option("-k", "k", type=int, default=5, show_default=True)
@click.option("--budget-tokens", type=int, default=800, show_default=True)
@click.option("--layer", "layers", multiple=True,
              type=click.Choice(["facts", "episodes", "handoffs"]),
              help="Read only these layers (repeat). handoffs: earlier checkpoint versions and "
                   "closed tasks, searched only when asked for.")
@click.option("--since", default=None, help="Only items dated on/after this date.")
@click.option("--until", default=None, help="Only items dated on/before this date.")
def recall(as_json: bool, need: str, decision: str, k: int, budget_tokens: int,
           layers: tuple[str, ...], since: str | None, until: str | None) -> None:
    """The retrieval gate: filtered, ranked references; may return nothing."""
    mem = open_memory()
    res = mem.recall(current_scope(), need, decision=decision, k=k, budget_tokens=budget_tokens,
                     layers=list(layers) or None, since=since, until=until)
    if as_json:
        emit_json(res)
        return
    if not res.items:
        click.echo(f"nothing recalled: {res.empty_reason}")
        return
    hits_table(f"recall ({decision}): {need}", res.items)


@click.command()
@store_options
@json_option
@click.option("--task", default=None, help="Include this task's current checkpoint.")
@click.option("--query", default=None, help="Add targeted recalls for this query.")
@click.option("--budget-tokens", type=int, default=2000, show_default=True)
@click.option("--manifest/--no-manifest", default=True, show_default=True)
def context(as_json: bool, task: str | None, query: str | None, budget_tokens: int,
            manifest: bool) -> None:
    """Assemble what a session starts with, and show what entered and why."""
    mem = open_memory()
    ctx = mem.context(current_scope(), task=task, query=query, budget_tokens=budget_tokens)
    if as_json:
        emit_json(ctx)
        return
    click.echo(ctx.text or "(empty context)")
    click.echo(f"\n-- {ctx.tokens} of {ctx.budget_tokens} tokens")
    if manifest:
        table("manifest", ["ref", "layer", "in", "why", "tokens"],
              [[m.ref, m.layer, "yes" if m.included else "no", m.reason, m.tokens]
               for m in ctx.manifest])


@click.command()
@store_options
@json_option
@click.argument("ref")
@click.argument("signal", type=click.Choice(["useful", "contradicted", "superseded", "ignored"]))
@click.option("--note", default=None)
def feedback(as_json: bool, ref: str, signal: str, note: str | None) -> None:
    """Record how a recalled item served (contradictions demote, then retire)."""
    mem = open_memory(embedder=None)
    out = mem.feedback(ref, signal, note=note, scope=current_scope())
    if as_json:
        emit_json(out)
    else:
        click.echo(f"{out['action']}: {ref} ({signal})")


@click.command()
@store_options
@json_option
@click.argument("ref")
def get(as_json: bool, ref: str) -> None:
    """Open one reference (fact:ID, episode:ID, checkpoint:TASK@N) in full."""
    mem = open_memory(embedder=None)
    record = mem.get(ref, scope=current_scope())
    emit_json(record) if as_json else click.echo(record.model_dump_json(indent=2))


@click.command()
@store_options
@json_option
@click.option("--embedder", default=None, help="Embedder spec (default: the configured one).")
@click.option("--missing", is_flag=True,
              help="Embed only the records that have no vector (written while the store was "
                   "opened without an embedder; `memstrata doctor` counts them).")
def reindex(as_json: bool, embedder: str | None, missing: bool) -> None:
    """Re-embed every fact, episode and checkpoint version (after changing the embedding
    model), or with --missing only those without a vector."""
    from ..errors import ConfigError
    from .bench import _progress

    mem = open_memory(embedder=embedder or "default")
    if mem.embedder is None:
        raise ConfigError("no embedder is configured, so there is nothing to reindex",
                          hint="install memstrata[embeddings] or pass --embedder minilm")
    bar, update = _progress()
    with bar:
        total = mem.reindex(progress=lambda done, n: update("re-embedding", done, n),
                            missing=missing)
    if as_json:
        emit_json({"reindexed": total, "model": mem.embedder.model_name, "missing": missing})
    else:
        click.echo(f"{'embedded' if missing else 're-embedded'} {total} "
                   f"{'records without a vector' if missing else 'records'} with "
                   f"{mem.embedder.model_name}")


def register(group: click.Group) -> None:
    for cmd in (init, doctor, stats, sweep, forget, checkpoint, ledger, recall, context,
                feedback, get, reindex):
        group.add_command(cmd)
