"""CLI: durable facts, the review queue and the episodic log."""

from __future__ import annotations

from typing import Any

import click

from ._common import (
    current_scope,
    emit_json,
    hits_table,
    json_option,
    login_name,
    open_memory,
    short_date,
    store_options,
    table,
)

KINDS = ["preference", "profile", "constraint", "relationship", "system_fact", "decision",
         "lesson"]
ACTORS = ["user", "tool", "agent", "reviewer", "system", "import"]


def _fact_rows(facts: list[Any]) -> list[list[Any]]:
    return [[f.id, f.tier, f.kind, f"{f.subject}/{f.attribute}", f.claim, f.status,
             f"{f.provenance.actor}:{f.provenance.source}", short_date(f.valid_from)]
            for f in facts]


_FACT_COLS = ["id", "tier", "kind", "slot", "claim", "status", "provenance", "since"]


def _print_result(res: Any, as_json: bool) -> None:
    if as_json:
        emit_json(res)
        return
    click.echo(f"{res.status}: {res.reason}")
    if res.record is not None:
        click.echo(f"  {res.record.ref} [{res.record.status}] {res.record.claim}")
    if res.superseded is not None:
        click.echo(f"  superseded {res.superseded.ref}: {res.superseded.claim}")
    if res.detectors:
        click.echo(f"  detectors: {', '.join(res.detectors)}")


@click.group()
def facts() -> None:
    """Durable facts: propose, list, history, retire."""


@facts.command("list")
@store_options
@json_option
@click.option("--status", type=click.Choice(["active", "pending_review", "superseded", "retired",
                                             "expired", "rejected", "all"]), default="active",
              show_default=True, help="Which facts to show.")
@click.option("--limit", type=int, default=40, show_default=True)
def facts_list(as_json: bool, status: str, limit: int) -> None:
    """List facts that apply to the scope (current ones by default)."""
    mem = open_memory(embedder=None)
    scope = current_scope()
    if status == "active":
        found = mem.facts.current(scope, limit=limit)
    else:
        found = mem.facts.list(scope, status=None if status == "all" else status, limit=limit)
    if as_json:
        emit_json(found)
    else:
        table(f"facts ({status}) for {scope}", _FACT_COLS, _fact_rows(found))


@facts.command("propose")
@store_options
@json_option
@click.argument("claim")
@click.option("--kind", type=click.Choice(KINDS), required=True)
@click.option("--subject", required=True, help="Who or what the fact is about.")
@click.option("--attribute", required=True, help="The slot, e.g. standup_format.")
@click.option("--actor", type=click.Choice(ACTORS), required=True, help="Who said it.")
@click.option("--source", required=True, help="Where it came from (message, file, URL).")
@click.option("--confidence", type=float, default=0.9, show_default=True)
@click.option("--tier", type=click.Choice(["standard", "identity"]), default="standard",
              show_default=True)
@click.option("--evidence", default=None, help="Quote or pointer supporting the claim.")
@click.option("--expires-at", default=None, help="ISO date after which the fact expires.")
@click.option("--reader", "readers", multiple=True, help="Restrict reading to this principal.")
def facts_propose(as_json: bool, claim: str, kind: str, subject: str, attribute: str,
                  actor: str, source: str, confidence: float, tier: str, evidence: str | None,
                  expires_at: str | None, readers: tuple[str, ...]) -> None:
    """Propose a fact; the write policy decides (committed, superseding, pending...)."""
    mem = open_memory(create=True)
    res = mem.facts.propose(current_scope(), claim=claim, kind=kind, subject=subject,
                            attribute=attribute, actor=actor, source=source,
                            confidence=confidence, tier=tier, evidence=evidence,
                            expires_at=expires_at, readers=list(readers) or None)
    _print_result(res, as_json)
    if res.status == "rejected":
        raise SystemExit(1)


@facts.command("history")
@store_options
@json_option
@click.argument("fact_id")
def facts_history(as_json: bool, fact_id: str) -> None:
    """Every version of a fact's slot, oldest first."""
    mem = open_memory(embedder=None)
    chain = mem.facts.history(fact_id, scope=current_scope())
    if as_json:
        emit_json(chain)
    else:
        table("history (oldest first)", ["id", "claim", "status", "valid_from", "valid_to",
                                         "reason"],
              [[f.id, f.claim, f.status, short_date(f.valid_from), short_date(f.valid_to),
                f.reason] for f in chain])


@facts.command("retire")
@store_options
@json_option
@click.argument("fact_id")
@click.option("--reason", required=True, help="Why the fact no longer holds.")
def facts_retire(as_json: bool, fact_id: str, reason: str) -> None:
    """Retire a fact (kept in history, no longer current)."""
    mem = open_memory(embedder=None)
    fact = mem.facts.retire(fact_id, reason=reason, scope=current_scope())
    if as_json:
        emit_json(fact)
    else:
        click.echo(f"retired {fact.ref}: {fact.reason}")


@facts.command("undo-supersede")
@store_options
@json_option
@click.argument("fact_id")
@click.option("--reason", required=True, help="Why the supersession was wrong.")
def facts_undo_supersede(as_json: bool, fact_id: str, reason: str) -> None:
    """Undo a supersession: retire FACT_ID and make the fact it replaced current again."""
    mem = open_memory(embedder=None)
    restored = mem.facts.undo_supersede(fact_id, reason=reason,
                                       scope=current_scope())
    if as_json:
        emit_json(restored)
    else:
        click.echo(f"restored {restored.ref} [{restored.status}] {restored.claim}")
        click.echo(f"  retired fact:{fact_id.removeprefix('fact:')}: {reason}")


@click.group(invoke_without_command=True)
@store_options
@click.option("--reviewer", default=None, help="The person reviewing (default: your login).")
@click.pass_context
def review(ctx: click.Context, reviewer: str | None) -> None:
    """The review queue: identity, untrusted and restricted facts wait for a person.

    Without a subcommand: go through the queue one fact at a time, with its provenance
    and why it waits: [a]pprove, [e]dit then approve, [r]eject (with a reason), [s]kip,
    [q]uit.
    """
    if ctx.invoked_subcommand is not None:
        return
    mem = open_memory()
    scope = current_scope()
    person = reviewer or login_name()
    items = mem.review.pending(scope)
    if not items:
        click.echo(f"nothing waits for review in {scope}")
        return
    done = {"approved": 0, "rejected": 0, "skipped": 0}
    for n, f in enumerate(items, 1):
        click.echo(f"\n[{n}/{len(items)}] {f.ref}  ({f.tier}, {f.kind}) "
                   f"{f.subject}/{f.attribute}")
        click.echo(f"  claim:  {f.claim}")
        click.echo(f"  from:   {f.provenance.actor} via {f.provenance.source}"
                   + (f"  evidence: {f.provenance.evidence}" if f.provenance.evidence else ""))
        click.echo(f"  waits:  {f.reason}" + (f"  flags: {', '.join(f.flags)}"
                                               if f.flags else ""))
        choice = click.prompt("  [a]pprove, [e]dit, [r]eject, [s]kip, [q]uit",
                              type=click.Choice(["a", "e", "r", "s", "q"]), default="s",
                              show_choices=False)
        if choice == "q":
            break
        if choice == "s":
            done["skipped"] += 1
            continue
        if choice == "r":
            why = click.prompt("  reason")
            mem.review.reject(f.id, reason=why, by=person, scope=scope)
            done["rejected"] += 1
            continue
        claim = click.prompt("  claim", default=f.claim) if choice == "e" else None
        res = mem.review.approve(f.id, by=person, claim=claim, scope=scope)
        click.echo(f"  {res.status}: {res.reason}")
        done["approved"] += res.status != "rejected"
    click.echo(", ".join(f"{v} {k}" for k, v in done.items()) + f" (reviewer {person})")


@review.command("list")
@store_options
@json_option
def review_list(as_json: bool) -> None:
    """Pending facts with their provenance and why they wait."""
    mem = open_memory(embedder=None)
    items = mem.review.pending(current_scope())
    if as_json:
        emit_json(items)
    else:
        table("pending review", ["id", "tier", "slot", "claim", "provenance", "why", "flags"],
              [[f.id, f.tier, f"{f.subject}/{f.attribute}", f.claim,
                f"{f.provenance.actor}:{f.provenance.source}", f.reason, ",".join(f.flags)]
               for f in items])


@review.command("approve")
@store_options
@json_option
@click.argument("fact_id", required=False)
@click.option("--reviewer", default=None, help="The person approving (default: your login).")
@click.option("--claim", default=None, help="Edit the claim before approving.")
@click.option("--all", "approve_all", is_flag=True,
              help="Approve every pending fact of the scope (narrow it with --source).")
@click.option("--source", default=None,
              help="With --all: only facts whose source starts with this.")
def review_approve(as_json: bool, fact_id: str | None, reviewer: str | None,
                   claim: str | None, approve_all: bool, source: str | None) -> None:
    """Approve a pending fact (optionally edited), or --all of them; an approved fact may
    supersede the current one."""
    if approve_all == (fact_id is not None):
        raise click.UsageError("give one FACT_ID, or --all (with --source to narrow it)")
    if claim is not None and approve_all:
        raise click.UsageError("--claim edits one fact; it cannot go with --all")
    mem = open_memory()
    scope = current_scope()
    person = reviewer or login_name()
    if fact_id is not None:
        _print_result(mem.review.approve(fact_id, by=person, claim=claim, scope=scope), as_json)
        return
    chosen = [f for f in mem.review.pending(scope)
              if source is None or f.provenance.source.startswith(source)]
    results = [mem.review.approve(f.id, by=person, scope=scope) for f in chosen]
    if as_json:
        emit_json(results)
        return
    for res in results:
        _print_result(res, False)
    click.echo(f"approved {sum(r.ok for r in results)} of {len(chosen)} pending fact(s)"
               + (f" from sources starting {source!r}" if source else "")
               + f" (reviewer {person})")


@review.command("reject")
@store_options
@json_option
@click.argument("fact_id")
@click.option("--reason", required=True)
@click.option("--reviewer", default=None, help="The person rejecting (default: your login).")
def review_reject(as_json: bool, fact_id: str, reason: str, reviewer: str | None) -> None:
    """Reject a pending fact, recording why."""
    mem = open_memory(embedder=None)
    fact = mem.review.reject(fact_id, reason=reason, by=reviewer or login_name(),
                             scope=current_scope())
    if as_json:
        emit_json(fact)
    else:
        click.echo(f"rejected {fact.ref}: {fact.reason}")


@click.group()
def episodes() -> None:
    """The episodic log: append dated, sourced events; search them narrowly."""


@episodes.command("append")
@store_options
@json_option
@click.argument("text")
@click.option("--event", default="note", show_default=True, help="Short event type.")
@click.option("--actor", type=click.Choice(ACTORS), default="agent", show_default=True)
@click.option("--source", required=True, help="Where it came from.")
@click.option("--observed-at", default=None, help="When it was true (ISO date/time).")
@click.option("--outcome", default=None)
@click.option("--supersedes", default=None, help="Episode id this entry corrects.")
@click.option("--expires-at", default=None)
@click.option("--subject", default=None, help="Who or what it is about (speaker, system).")
@click.option("--thread", default=None,
              help="The conversation, run or ticket it belongs to (default: the source).")
def episodes_append(as_json: bool, text: str, event: str, actor: str, source: str,
                    observed_at: str | None, outcome: str | None, supersedes: str | None,
                    expires_at: str | None, subject: str | None, thread: str | None) -> None:
    """Append one episode (append-only; corrections supersede)."""
    mem = open_memory(create=True)
    ep = mem.episodes.append(current_scope(), text=text, event=event, actor=actor,
                             source=source, observed_at=observed_at, outcome=outcome,
                             supersedes=supersedes, expires_at=expires_at, subject=subject,
                             thread=thread)
    if as_json:
        emit_json(ep)
    else:
        click.echo(f"appended {ep.ref} ({ep.event}, observed {ep.observed_at.date()})")


@episodes.command("search")
@store_options
@json_option
@click.argument("query")
@click.option("-k", "k", type=int, default=5, show_default=True)
@click.option("--since", default=None, help="Only events observed on/after this date.")
@click.option("--until", default=None, help="Only events observed on/before this date.")
def episodes_search(as_json: bool, query: str, k: int, since: str | None,
                    until: str | None) -> None:
    """Search the log within scope (targeted; never loads it whole)."""
    mem = open_memory()
    hits = mem.episodes.search(current_scope(), query, k=k, since=since, until=until)
    if as_json:
        emit_json(hits)
    else:
        hits_table(f"episodes matching {query!r}", hits)


def register(group: click.Group) -> None:
    group.add_command(facts)
    group.add_command(review)
    group.add_command(episodes)
