"""The review queue (DESIGN §2, §5): pending identity, untrusted and restricted facts.

Contract:
- ``pending(scope)`` lists the facts waiting for a person, within the scope's read filter.
- ``approve(id, by=PERSON)`` makes a pending fact the active fact of its slot at that
  moment (superseding the current one, whose restricted readers it inherits when it names
  none); with ``claim=`` the person edits the claim first, which is screened again: an
  edit carrying a secret returns ``WriteResult(status="rejected")`` and changes nothing.
  The edited claim is re-indexed and re-embedded.
- ``reject(id, reason=...)`` records the reason; the fact stays in history as
  ``rejected``.
- By id: with ``scope`` the fact must apply to it and be readable (NotFound otherwise).
  Review writes no SQL of its own: the facts layer owns the table.
- Task checkpoints follow the decision: in the same transaction, every open task whose
  current checkpoint lists the fact under ``pending_identity_changes`` (``fact:ID ...``,
  as extraction with ``task=`` writes it) gets a new version without it, through the
  checkpoints layer (:func:`memstrata.extraction.run.sync_pending_identity`, the one rule
  for that list); a closed task is left as it closed. So the session context and
  ``get_current_task`` never offer an approved or rejected claim as pending.
"""

from __future__ import annotations

from typing import Any

from ..calls import checked_calls
from ..clock import Clock
from ..errors import AccessDenied, Conflict, ValidationError
from ..governance.policy import Candidate
from ..governance.safety import person_arg, screened_arg
from ..inputs import record_id_arg, text_arg
from ..models import Fact, Scope, WriteResult, build
from ..store.base import Database, Tx
from .checkpoints import Checkpoints
from .facts import Facts
from .indexing import RecordIndex
from .selector import Selector


@checked_calls
class Review:
    """The review queue; reached as ``mem.review``."""

    def __init__(self, db: Database, facts: Facts, index: RecordIndex, clock: Clock, *,
                 checkpoints: Checkpoints | None = None) -> None:
        self._db = db
        self._facts = facts
        self._index = index
        self._clock = clock
        #: The checkpoints layer, which writes the task lists a decision changes.
        self._checkpoints = checkpoints if checkpoints is not None else \
            Checkpoints(db, clock, index=index)

    def pending(self, scope: Scope | dict[str, Any], *, principal: str | None = None,
                limit: int = 200) -> list[Fact]:
        """Facts waiting for a person, readable in ``scope`` (not those past their
        ``expires_at``: they can no longer be approved)."""
        return self._facts.list(scope, status="pending_review", principal=principal,
                                limit=limit, include_expired=False)

    def approve(self, fact_id: str, *, by: str | None = None, claim: str | None = None,
                scope: Scope | dict[str, Any] | None = None, principal: str | None = None,
                tenant: str | None = None, reviewer: str | None = None) -> WriteResult:
        """A person approves a pending fact (optionally editing its claim first).

        ``by`` names the person (``reviewer=`` is the older spelling)."""
        person = _person(by, reviewer)
        fact_id = record_id_arg(fact_id, "fact")
        tenant, sc = self._facts.caller(scope, tenant)
        edited = None
        if claim is not None:
            edited = text_arg(claim, "claim", max_len=1000)
        vector = self._index.embed([Facts.embed_text(edited)], tenant=tenant) if edited \
            else None
        now = self._clock.now()
        with self._db.transaction(tenant) as tx:
            fact = self._facts.get_in(tx, tenant, fact_id, sc, principal)
            if fact.status != "pending_review":
                raise Conflict(f"fact {fact.id} is {fact.status}, not pending review")
            if sc is not None and self._facts.slot_hidden_in(tx, fact, sc, principal):
                # approving would replace (and show) a current fact this reviewer may not
                # read: one of its readers, or the operator, decides
                raise AccessDenied(
                    f"fact {fact.id} would replace its slot's current fact, which is "
                    "restricted to readers the approver is not one of; nothing changed",
                    hint="approve as one of that fact's readers (principal=...) or as the "
                         "operator (no scope)")
            if edited is not None:
                cand = build(Candidate, scope=fact.scope, kind=fact.kind, subject=fact.subject,
                             attribute=fact.attribute, claim=edited, actor=fact.actor,
                             source=fact.source)
                from ..governance.sensitivity import scan

                found = scan(cand.claim)
                if found.has_secret:
                    return WriteResult(
                        status="rejected", record=fact,
                        reason="the edited claim contains a secret ("
                               + ", ".join(sorted({f.detector for f in found.secrets}))
                               + "); not approved, nothing changed",
                        detectors=[f"secret:{f.detector}" for f in found.secrets])
                edited = cand.claim
            record, old = self._facts.activate_in(tx, fact, reviewer=person, claim=edited,
                                                vector=vector, now=now)
            self._sync_tasks(tx, record)
        if old is not None:
            return WriteResult(status="superseding", record=record, superseded=old,
                               reason=f"approved by {person}; supersedes {old.ref}")
        return WriteResult(status="committed", record=record, reason=f"approved by {person}")

    def reject(self, fact_id: str, *, reason: str, by: str | None = None,
               scope: Scope | dict[str, Any] | None = None, principal: str | None = None,
               tenant: str | None = None) -> Fact:
        """A person rejects a pending fact; the reason is recorded."""
        fact_id = record_id_arg(fact_id, "fact")
        if by is not None:
            reason = (f"{text_arg(reason, 'reason', max_len=2000)} "
                      f"(rejected by {text_arg(by, 'by', max_len=128)})")
        reason = screened_arg(reason, "reason", max_len=2200)
        tenant, sc = self._facts.caller(scope, tenant)
        with self._db.transaction(tenant) as tx:
            fact = self._facts.get_in(tx, tenant, fact_id, sc, principal)
            if fact.status != "pending_review":
                raise Conflict(f"fact {fact.id} is {fact.status}, not pending review")
            rejected = self._facts.reject_in(tx, fact, reason=reason, now=self._clock.now())
            self._sync_tasks(tx, rejected)
            return rejected

    def _sync_tasks(self, tx: Tx, fact: Fact) -> None:
        """Drop the decided ``fact`` from the pending identity changes of every open task
        whose checkpoint lists it (inside the decision's transaction: both or neither)."""
        from ..extraction.run import sync_pending_identity

        listing = self._checkpoints.selected(tx, Selector(scope=fact.scope, match=fact.ref))
        tasks = sorted({(row["scope_key"], row["task"]) for row in
                        (listing.rows if listing is not None else [])})
        for key, task in tasks:
            scope = _scope_of_key(fact.scope.tenant, key)
            current = self._checkpoints.current(scope, task)
            if current is None or current.status == "closed":
                continue  # a closed task keeps its last words; it is out of every context
            if any(line.split(" ", 1)[0] == fact.ref
                   for line in current.pending_identity_changes):
                sync_pending_identity(self._facts, self._checkpoints, scope, task)


def _scope_of_key(tenant: str, key: str) -> Scope:
    """The scope a row's ``scope_key`` (:attr:`Scope.key`: ``u=..;p=..;a=..``) names; a
    name holds no ``;``, and its first ``=`` ends the field's letter."""
    fields = dict(part.partition("=")[::2] for part in key.split(";"))
    return Scope(tenant=tenant, user=fields.get("u") or None,
                 project=fields.get("p") or None, agent=fields.get("a") or None)


def _person(by: str | None, reviewer: str | None) -> str:
    if by is not None and reviewer is not None and by != reviewer:
        raise ValidationError("by= and reviewer= name different people", hint="pass one")
    name = by if by is not None else reviewer
    if name is None:
        raise ValidationError("approving needs the person's name",
                              hint="pass by='alice' (the reviewer)")
    return person_arg(name, "by", act="only a person approves a fact for the durable set "
                                      "(an identity fact above all)")


__all__ = ["Review"]
