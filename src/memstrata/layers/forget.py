"""Forgetting for real (DESIGN §8): content leaves every place it lives.

Contract:
- ``forget(scope, match=... | subject=... | record_ids=...)`` deletes, within the records
  *owned* by the scope (:func:`memstrata.scoping.owned_sql`), matching facts (every status,
  so history rows too), episodes, checkpoint versions, ledger operations, procedures,
  runs, feedback (on the forgotten records, and notes that mention the match) and scratch
  entries; the full-text entries and vectors go with their rows (schema triggers), and the
  neighbours that carried a forgotten episode as thread context are re-indexed without it.
  A fact goes with its whole supersession history. Record ids are the references hits
  carry (``fact:ID``, ``episode:ID``, a handoff's ``checkpoint:TASK@N``: that version
  alone). Without a selector it forgets everything the scope owns.
- Each layer deletes its own rows (``forget_rows``): this module only composes them, in
  one maintenance transaction, all or nothing. Supersession links left pointing at a
  forgotten record are cleared, so no orphan history remains.
- Refused (AccessDenied) when the scope names neither user nor project, unless
  ``force=True``.
- Scratch entries in the database are deleted in the same transaction; in another store
  (Redis) right after the commit, a failure reported in ``notes``.
- Afterwards the backend compacts (FTS optimize, WAL truncate, secure delete), so the
  forgotten text is not in the database file's bytes, and a vector index with files of its
  own scrubs the forgotten vectors from them; a failure of either, or an engine that may
  not compact some tables (a PostgreSQL role without VACUUM rights), or a compaction
  another connection kept from finishing (SQLite: a read held past the busy timeout keeps
  the text in the WAL), is reported (``compacted=False``, a note saying what to do) and
  retried later (by the engine: on SQLite the store records it, and the next write, open
  or close by any process finishes it; and by the next forget or sweep that deletes), never
  raised over a committed forget.
- ``total`` counts the records removed; ``vectors`` (their index entries) is not added.
- Returns a ForgetReport with counts per layer; ``vectors`` counts the stored vectors of
  the forgotten records (measured, the same in a dry run); ``dry_run`` changes nothing.
  Facts and episodes the selection matches that the scope reads but does not own (a
  user-wide record seen from a project) are left, and reported: their refs in ``kept``
  and a note naming the scope each belongs to. With ``principal``, facts and episodes
  restricted to readers are forgotten (and reported) only where the principal is one of
  them. ``as_reader`` (an agent's forget: the tool, the service) reaches no record its
  caller may not read: only the records of exactly its scope (``project=p`` reads none of
  a user's records in ``p``), scratch entries included, and of the restricted ones only
  its principal's (none without one) (:class:`~memstrata.layers.selector.Selector`).
  ``actor``: who forgets; a program (``agent``, ``tool``...) forgets no identity fact
  (only a person changes who someone is): those stay, in ``kept``, with a note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import AccessDenied, MemstrataError
from ..governance.safety import is_machine
from ..inputs import bool_arg, name_arg
from ..models import ForgetReport, Scope
from ..store.base import Database, ScratchStore, VectorIndex
from .checkpoints import Checkpoints
from .checkpoints import vector_ids as checkpoint_vector_ids
from .episodes import Episodes
from .facts import Facts
from .feedback import Feedback
from .ledger import Ledger
from .procedures import Procedures
from .runs import Runs
from .selector import Selector, selector


@dataclass(frozen=True)
class ForgetTargets:
    """The layers a forget reaches."""

    facts: Facts
    episodes: Episodes
    checkpoints: Checkpoints
    ledger: Ledger
    procedures: Procedures
    runs: Runs
    feedback: Feedback
    scratch: ScratchStore
    #: The vector index, when it keeps files of its own beside the database (SQLite).
    vectors: VectorIndex | None = None


def forget(db: Database, layers: ForgetTargets, scope: Scope | dict[str, Any], *,
           match: str | None = None, subject: str | None = None,
           record_ids: Sequence[str] | None = None, force: bool = False,
           dry_run: bool = False, principal: str | None = None,
           as_reader: bool = False, actor: str | None = None) -> ForgetReport:
    """Delete for real; see the module docstring."""
    force = bool_arg(force, "force")
    dry_run = bool_arg(dry_run, "dry_run")
    as_reader = bool_arg(as_reader, "as_reader")
    if actor is not None:
        actor = name_arg(actor, "actor")
    sel = selector(scope, match=match, subject=subject, record_ids=record_ids,
                   principal=principal, reader=as_reader, keep_identity=is_machine(actor))
    if sel.scope.is_unscoped and not force:
        raise AccessDenied(
            f"refusing to forget across the whole tenant {sel.scope.tenant!r}",
            hint="name a user or project, or pass force=True (--force) deliberately",
        )
    tenant = sel.scope.tenant
    counts: dict[str, int] = {}
    with db.transaction(tenant, maintenance=True) as tx:
        fact_ids = layers.facts.forget_rows(tx, sel, dry_run=True)
        episode_ids = layers.episodes.forget_rows(tx, sel, dry_run=True)
        kept = [(f"fact:{i}", sc) for i, sc in layers.facts.kept_rows(tx, sel)] + \
            [(f"episode:{i}", sc) for i, sc in layers.episodes.kept_rows(tx, sel)]
        identity = [f"fact:{i}" for i in layers.facts.kept_identity(tx, sel)]
        versions = layers.checkpoints.selected(tx, sel)  # once: counted, then deleted
        counts["vectors"] = db.vector_count(tx, tenant, [
            *fact_ids, *episode_ids, *checkpoint_vector_ids(versions)])
        if not dry_run:
            # the episodes found, their threads held (an append waits), and no others: one
            # written since into another thread is not this forget's (PostgreSQL reads what
            # committed since at each statement)
            threads = layers.episodes.threads_of(tx, tenant, episode_ids)
            layers.facts.forget_rows(tx, sel, dry_run=False)
            layers.episodes.delete_rows(tx, tenant, episode_ids)
            # the next episodes of each thread had the forgotten ones as context
            layers.episodes.refresh_neighbours(tx, tenant, threads)
        counts["facts"], counts["episodes"] = len(fact_ids), len(episode_ids)
        checkpoint_refs = layers.checkpoints.forget_rows(tx, sel, dry_run=dry_run,
                                                         chosen=versions)
        counts["checkpoints"] = len(checkpoint_refs)
        counts["operations"] = len(layers.ledger.forget_rows(tx, sel, dry_run=dry_run))
        counts["procedures"] = len(layers.procedures.forget_rows(tx, sel, dry_run=dry_run))
        counts["runs"] = len(layers.runs.forget_rows(tx, sel, dry_run=dry_run))
        refs = [f"fact:{i}" for i in fact_ids] + [f"episode:{i}" for i in episode_ids] + \
            checkpoint_refs
        counts["feedback"] = layers.feedback.forget_rows(tx, sel, refs, dry_run=dry_run)
        if not dry_run:
            layers.facts.clear_links(tx, tenant, fact_ids)
            layers.episodes.clear_links(tx, tenant, episode_ids)
        scratch_too = sel.ids is None and sel.subject is None
        counts["scratch"] = 0
        if scratch_too and layers.scratch.transactional:
            # the database's scratch table: inside this transaction (a nested savepoint)
            counts["scratch"] = layers.scratch.forget(sel.scope, sel.match, dry_run=dry_run,
                                                    exact=sel.reader)
    notes: list[str] = []
    if kept:
        notes.append(_kept_note(sel.scope, kept))
    if identity:
        notes.append(f"kept {len(identity)} identity fact(s) ({', '.join(identity[:5])}"
                     f"{' ...' if len(identity) > 5 else ''}): only a person changes who "
                     "someone is; ask your user to forget them (memstrata forget, or the "
                     "inspector)")
    unmatched = _unmatched(sel, {*fact_ids, *episode_ids}, checkpoint_refs,
                           [*kept, *((ref, sel.scope) for ref in identity)])
    if unmatched:
        # by position: an id the caller may not see is never echoed into an answer
        shown = ", ".join(f"#{n}" for n in unmatched[:20]) + (" ..." if len(unmatched) > 20
                                                               else "")
        reads = " and may read" if sel.principal or sel.reader else ""
        notes.append(f"record_ids {shown} (of {len(sel.refs)}) matched nothing this scope "
                     f"owns{reads}: a fact:ID names a fact, an episode:ID an episode, "
                     "checkpoint:TASK@N a checkpoint version")
    if scratch_too and not layers.scratch.transactional:
        try:  # another store (Redis): after the commit, and reported if it fails
            counts["scratch"] = layers.scratch.forget(sel.scope, sel.match, dry_run=dry_run,
                                                    exact=sel.reader)
        except MemstrataError as exc:
            notes.append(f"the records are forgotten, but the scratch store failed: {exc}; "
                         "run the forget again")
    compacted = True
    if not dry_run and any(counts.values()):
        try:
            left = db.compact()
            if left:
                compacted = False
                notes += [f"forgotten, but not compacted: {note}" for note in left]
        except MemstrataError as exc:
            compacted = False
            notes.append(f"forgotten, but compaction failed ({exc}); the next compaction "
                         "(a later forget, or a sweep that deletes) rewrites the files")
        try:  # the index's own files lose the forgotten vectors now, embedder or not
            if layers.vectors is not None:
                layers.vectors.sync(sel.scope.tenant)
            db.sync_vectors(sel.scope.tenant)
        except MemstrataError as exc:
            compacted = False
            notes.append(f"forgotten in the database, but the vector files were not "
                         f"scrubbed: {exc}")
    order = ("facts", "episodes", "checkpoints", "operations", "procedures", "runs",
             "feedback", "scratch", "vectors")
    return ForgetReport(scope=sel.scope, counts={k: counts[k] for k in order}, ids=refs,
                        dry_run=dry_run, compacted=compacted, notes=notes,
                        kept=[ref for ref, _ in kept] + identity)


def _unmatched(sel: Selector, found: set[str], checkpoint_refs: Sequence[str],
               kept: Sequence[tuple[str, Scope]]) -> list[int]:
    """The positions (from 1) of the references of a by-id forget that named no record it
    found, so none is dropped without a word."""
    hit = {*found, *(ref.partition(":")[2] for ref in checkpoint_refs),
           *(ref.partition(":")[2] for ref, _ in kept)}
    return [n for n, (_, i) in enumerate(sel.refs, 1) if i not in hit]


def _kept_note(scope: Scope, kept: Sequence[tuple[str, Scope]]) -> str:
    """What a forget left that its scope reads: records of broader scopes, named with the
    scope that owns them (and so may forget them)."""
    owners: dict[str, list[str]] = {}
    for ref, owner in kept:
        owners.setdefault(str(owner), []).append(ref)
    shown = "; ".join(f"{', '.join(refs[:5])}{' ...' if len(refs) > 5 else ''} in {owner}"
                      for owner, refs in sorted(owners.items()))
    return (f"kept {len(kept)} matching record(s) that {scope} reads but does not own (a "
            f"forget reaches only what its scope owns): {shown}; forget them with the scope "
            "they belong to (CLI: memstrata forget with that scope's --user/--project)")


__all__ = ["ForgetTargets", "forget"]
