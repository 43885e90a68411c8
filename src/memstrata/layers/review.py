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
from ..store.base import Database
from .facts import Facts
from .indexing import RecordIndex


@checked_calls
class Review:
    """The review queue; reached as ``mem.review``."""

    def __init__(self, db: Database, facts: Facts, index: RecordIndex, clock: Clock) -> None:
        self._db = db
        self._facts = facts
        self._index = index
        self._clock = clock

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
            return self._facts.reject_in(tx, fact, reason=reason, now=self._clock.now())


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
