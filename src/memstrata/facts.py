"""Durable facts and the review queue (DESIGN §2, §3, §5).

Contract:
- ``propose`` runs the write policy (:mod:`memstrata.policy`), then, in one
  transaction, dedup and conflict: an equivalent claim in the same slot
  (scope + subject + attribute) keeps the older record and bumps its
  ``last_confirmed_at``; a different claim *supersedes* the active one (old:
  status ``superseded``, ``superseded_by``, ``valid_to``, reason; new:
  ``supersedes``). Nothing is deleted. Every outcome is a WriteResult.
- At most one active fact per slot, enforced by a partial unique index.
- ``current`` returns active, unexpired facts that apply to the scope and
  that the principal may read, identity tier first, capped (default 40).
- ``history`` follows the supersession chain, oldest first.
- Identity-tier and untrusted facts wait in the review queue; approving one
  runs the conflict step at that moment; rejecting records the reason.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .clock import from_text
from .errors import Conflict, NotFound, ValidationError
from .ids import new_id
from .models import Fact, Provenance, Scope, WriteResult, build, make_scope
from .policy import Candidate, Verdict, normalise_claim
from .runtime import Runtime
from .scoping import (
    SCOPE_COLUMNS,
    applies_sql,
    dump_readers,
    exact_sql,
    load_json_list,
    principal_of,
    scope_from_row,
    scope_values,
)
from .store.base import Row, Tx

_COLUMNS = (
    "id, kind, subject, attribute, claim, confidence, tier, sensitivity, status, actor, source, "
    "evidence, created_at, valid_from, valid_to, recheck_after, expires_at, supersedes, "
    "superseded_by, reason, readers, last_confirmed_at, reviewer, flags"
)


def fact_from_row(row: Row) -> Fact:
    return Fact.model_construct(
        id=row["id"],
        scope=scope_from_row(row),
        kind=row["kind"],
        subject=row["subject"],
        attribute=row["attribute"],
        claim=row["claim"],
        confidence=float(row["confidence"]),
        tier=row["tier"],
        sensitivity=row["sensitivity"],
        status=row["status"],
        provenance=Provenance.model_construct(actor=row["actor"], source=row["source"],
                                              evidence=row["evidence"]),
        created_at=from_text(row["created_at"]),
        valid_from=from_text(row["valid_from"]),
        valid_to=from_text(row["valid_to"]),
        recheck_after=from_text(row["recheck_after"]),
        expires_at=from_text(row["expires_at"]),
        supersedes=row["supersedes"],
        superseded_by=row["superseded_by"],
        reason=row["reason"],
        readers=load_json_list(row["readers"]),
        last_confirmed_at=from_text(row["last_confirmed_at"]),
        reviewer=row["reviewer"],
        flags=load_json_list(row["flags"]) or [],
    )


class Facts:
    """The durable-fact layer; reached as ``mem.facts``."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    # -- writes -----------------------------------------------------------
    def propose(self, scope: Scope | dict[str, Any], *, claim: str, kind: str, subject: str,
                attribute: str, actor: str | None, source: str | None,
                confidence: float = 0.9, tier: str = "standard",
                sensitivity: str = "internal", evidence: str | None = None,
                valid_from: datetime | str | None = None,
                expires_at: datetime | str | None = None,
                recheck_after: datetime | str | None = None,
                readers: Sequence[str] | None = None, reason: str | None = None) -> WriteResult:
        """Propose a durable fact; the write policy decides what happens to it."""
        cand = build(
            Candidate, scope=make_scope(scope), claim=claim, kind=kind, subject=subject,
            attribute=attribute, actor=actor, source=source, confidence=confidence, tier=tier,
            sensitivity=sensitivity, evidence=evidence, valid_from=valid_from,
            expires_at=expires_at, recheck_after=recheck_after,
            readers=readers, reason=reason,
        )
        return self.propose_candidate(cand)

    def propose_candidate(self, cand: Candidate) -> WriteResult:
        """Judge and store a validated candidate (used by extraction and import too)."""
        now = self._rt.clock.now()
        verdict = self._rt.policy.judge(cand, now)
        if verdict.action == "reject":
            return WriteResult(status="rejected", reason=verdict.reason,
                               detectors=list(verdict.detectors))
        cand = verdict.candidate
        similar = self._similar_vectors(cand)
        # a fact's vector is its claim's embedding, computed before the write transaction
        vector = self._rt.index.embed([cand.claim])
        with self._rt.db.transaction(cand.scope.tenant) as tx:
            active = self._slot_row(tx, cand.scope, cand.subject, cand.attribute, "active")
            dup = self._find_duplicate(tx, cand, active, similar)
            if dup is not None:
                tx.execute("UPDATE facts SET last_confirmed_at = ? WHERE tenant = ? AND id = ?",
                           (now, cand.scope.tenant, dup["id"]))
                dup["last_confirmed_at"] = now
                return WriteResult(status="duplicate", record=fact_from_row(dup),
                                   reason="an equivalent fact exists; kept the older record "
                                          "and confirmed it", detectors=list(verdict.detectors))
            if verdict.action == "pending":
                fact = self._insert(tx, cand, verdict, now, status="pending_review",
                                    vector=vector)
                return WriteResult(status="pending", record=fact, reason=verdict.reason,
                                   detectors=list(verdict.detectors))
            old = fact_from_row(active) if active is not None else None
            fact = self._commit_active(tx, cand, verdict, now, old, vector)
        if old is not None:
            old = self.get(old.id, tenant=cand.scope.tenant)
            return WriteResult(status="superseding", record=fact, superseded=old,
                               reason=f"supersedes {old.ref}: a different claim for "
                                      f"{cand.subject}/{cand.attribute}",
                               detectors=list(verdict.detectors))
        return WriteResult(status="committed", record=fact, reason=verdict.reason,
                           detectors=list(verdict.detectors))

    def _commit_active(self, tx: Tx, cand: Candidate, verdict: Verdict, now: datetime,
                       old: Fact | None, vector: Any = None) -> Fact:
        new_id_ = new_id()
        if old is not None:
            why = cand.reason or f"superseded by fact:{new_id_}"
            tx.execute(
                "UPDATE facts SET status = 'superseded', superseded_by = ?, valid_to = ?, "
                "reason = ? WHERE tenant = ? AND id = ?",
                (new_id_, cand.valid_from or now, why, cand.scope.tenant, old.id),
            )
            if cand.readers is None and old.readers is not None:
                # access follows the source: a replacement inherits restricted readers
                cand = cand.model_copy(update={"readers": old.readers})
        return self._insert(tx, cand, verdict, now, status="active", fact_id=new_id_,
                            supersedes=old.id if old else None, vector=vector)

    def _insert(self, tx: Tx, cand: Candidate, verdict: Verdict, now: datetime, *,
                status: str, fact_id: str | None = None,
                supersedes: str | None = None, vector: Any = None) -> Fact:
        fid = fact_id or new_id()
        values = [
            *scope_values(cand.scope), fid, cand.kind, cand.subject, cand.attribute, cand.claim,
            cand.confidence, cand.tier, cand.sensitivity, status, cand.actor, cand.source,
            cand.evidence, now, cand.valid_from or now, None, cand.recheck_after,
            cand.expires_at, supersedes, None, cand.reason if status == "active" else
            verdict.reason, dump_readers(cand.readers), now, None, json.dumps(list(verdict.flags)),
        ]
        tx.execute(f"INSERT INTO facts ({SCOPE_COLUMNS}, {_COLUMNS}) VALUES "
                   f"({', '.join('?' * len(values))})", values)
        self._rt.index.add(tx, "facts", cand.scope.tenant, [(fid, self._index_text(cand))],
                           vector)
        row = tx.one(f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM facts WHERE tenant = ? AND id = ?",
                     (cand.scope.tenant, fid))
        assert row is not None
        return fact_from_row(row)

    @staticmethod
    def _index_text(cand: Candidate) -> str:
        return f"{cand.claim}\n{cand.subject} {cand.attribute} {cand.kind}"

    def _slot_row(self, tx: Tx, scope: Scope, subject: str, attribute: str,
                  status: str) -> Row | None:
        where, params = exact_sql(scope)
        return tx.one(
            f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM facts r WHERE {where} AND r.subject = ? "
            "AND r.attribute = ? AND r.status = ? ORDER BY r.created_at DESC LIMIT 1",
            (*params, subject, attribute, status),
        )

    def _similar_vectors(self, cand: Candidate) -> list[tuple[str, float]]:
        """Facts of the same scope and kind whose vectors are near the claim (cosine)."""
        vectors = self._rt.index.vectors
        if vectors is None:
            return []
        found: list[tuple[str, float]] = vectors.similar_facts(
            cand.scope, cand.kind, cand.claim, self._rt.policy.config.dedup_cosine)
        return found

    def _find_duplicate(self, tx: Tx, cand: Candidate, active: Row | None,
                        similar: list[tuple[str, float]]) -> Row | None:
        norm = normalise_claim(cand.claim)
        if active is not None and normalise_claim(active["claim"]) == norm:
            return active
        pending = self._slot_row(tx, cand.scope, cand.subject, cand.attribute, "pending_review")
        if pending is not None and normalise_claim(pending["claim"]) == norm:
            return pending
        for fid, _score in similar:
            if active is not None and fid == active["id"]:
                continue  # a different claim in the same slot is a conflict, never a duplicate
            row = tx.one(f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM facts WHERE tenant = ? "
                         "AND id = ? AND status IN ('active', 'pending_review') AND scope_key = ?",
                         (cand.scope.tenant, fid, cand.scope.key))
            if row is not None and row["kind"] == cand.kind and \
                    _negated(row["claim"]) == _negated(cand.claim):
                return row
        return None

    def retire(self, fact_id: str, *, reason: str, tenant: str | None = None) -> Fact:
        """Take a fact out of the current set without replacing it; history keeps it."""
        reason = _reason(reason)
        tenant = tenant or self._rt.default_tenant
        now = self._rt.clock.now()
        with self._rt.db.transaction(tenant) as tx:
            fact = self._get(tx, tenant, fact_id)
            if fact.status not in ("active", "pending_review"):
                raise Conflict(f"fact {fact_id} is {fact.status}; only active or pending facts "
                               "can be retired")
            tx.execute("UPDATE facts SET status = 'retired', valid_to = ?, reason = ? "
                       "WHERE tenant = ? AND id = ?", (now, reason, tenant, fact_id))
        return self.get(fact_id, tenant=tenant)

    def undo_supersede(self, fact_id: str, *, reason: str, tenant: str | None = None) -> Fact:
        """Undo the supersession made by ``fact_id``: its predecessor is current again.

        In one transaction ``fact_id`` is retired (reason recorded, flag
        ``supersession_undone``) and the fact it superseded becomes active again
        (``valid_to`` cleared, reason says why). The two links are cleared so the
        chain stays consistent for later supersessions; both reasons name the
        other record. Refused (Conflict) unless ``fact_id`` is active and
        supersedes a fact that is still ``superseded`` by it, unexpired, with its
        slot free. Returns the restored fact.
        """
        reason = _reason(reason)
        tenant = tenant or self._rt.default_tenant
        now = self._rt.clock.now()
        with self._rt.db.transaction(tenant) as tx:
            fact = self._get(tx, tenant, fact_id)
            if fact.status != "active":
                later = f" by fact:{fact.superseded_by}" if fact.superseded_by else ""
                raise Conflict(f"fact {fact.id} is {fact.status}{later}; only the current fact "
                               "of a chain can be undone",
                               hint="undo the latest supersession first")
            if not fact.supersedes:
                raise Conflict(f"fact {fact.id} did not supersede anything",
                               hint="use `memstrata facts retire` to take it out")
            prev = self._get(tx, tenant, fact.supersedes)
            if prev.status != "superseded" or prev.superseded_by != fact.id:
                raise Conflict(f"fact {prev.id} is {prev.status}, no longer superseded by "
                               f"{fact.id}; the chain moved on")
            if prev.expires_at is not None and prev.expires_at <= now:
                raise Conflict(f"fact {prev.id} expired on {prev.expires_at.date()}; "
                               "propose it again instead")
            occupant = self._slot_row(tx, prev.scope, prev.subject, prev.attribute, "active")
            if occupant is not None and occupant["id"] != fact.id:
                raise Conflict(f"fact {occupant['id']} is now current in the slot of {prev.id}")
            tx.execute(
                "UPDATE facts SET status = 'retired', valid_to = ?, supersedes = NULL, "
                "reason = ?, flags = ? WHERE tenant = ? AND id = ?",
                (now, f"supersession of fact:{prev.id} undone: {reason}",
                 json.dumps(sorted({*fact.flags, "supersession_undone"})), tenant, fact.id))
            tx.execute(
                "UPDATE facts SET status = 'active', valid_to = NULL, superseded_by = NULL, "
                "reason = ? WHERE tenant = ? AND id = ?",
                (f"restored: supersession by fact:{fact.id} undone: {reason}", tenant, prev.id))
        return self.get(prev.id, tenant=tenant)

    # -- reads ------------------------------------------------------------
    def get(self, fact_id: str, *, tenant: str | None = None) -> Fact:
        tenant = tenant or self._rt.default_tenant
        with self._rt.db.transaction(tenant, write=False) as tx:
            return self._get(tx, tenant, fact_id)

    def _get(self, tx: Tx, tenant: str, fact_id: str) -> Fact:
        fact_id = fact_id.removeprefix("fact:")
        row = tx.one(f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM facts WHERE tenant = ? AND id = ?",
                     (tenant, fact_id))
        if row is None:
            raise NotFound(f"no fact {fact_id} in tenant {tenant}",
                           hint="list facts with `memstrata facts list`")
        return fact_from_row(row)

    def current(self, scope: Scope | dict[str, Any], limit: int = 40, *,
                principal: str | None = None, kind: str | None = None,
                tier: str | None = None) -> list[Fact]:
        """Active, unexpired facts that apply to ``scope`` and that the principal may read."""
        scope = make_scope(scope)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise ValidationError(f"limit must be a non-negative integer, got {limit!r}")
        rows = self._select(scope, principal, "r.status = 'active'", kind=kind, tier=tier,
                            limit=limit)
        return [fact_from_row(r) for r in rows]

    def list(self, scope: Scope | dict[str, Any], *, status: str | None = None,
             principal: str | None = None, limit: int = 200) -> builtins.list[Fact]:
        """Facts of any status that apply to the scope (for people and exports)."""
        scope = make_scope(scope)
        cond = "1 = 1" if status is None else "r.status = ?"
        extra = [] if status is None else [status]
        rows = self._select(scope, principal, cond, extra=extra, limit=limit,
                            include_expired=True)
        return [fact_from_row(r) for r in rows]

    def _select(self, scope: Scope, principal: str | None, cond: str, *,
                extra: Sequence[Any] = (), kind: str | None = None, tier: str | None = None,
                limit: int = 40, include_expired: bool = False) -> builtins.list[Row]:
        where, params = applies_sql(scope)
        sql = (f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM facts r WHERE {where} AND {cond} "
               f"AND {self._rt.db.readers_clause('r.readers')}")
        params += [*extra, principal_of(scope, principal)]
        if not include_expired:
            sql += " AND (r.expires_at IS NULL OR r.expires_at > ?)"
            params.append(self._rt.clock.now())
        if kind is not None:
            sql += " AND r.kind = ?"
            params.append(kind)
        if tier is not None:
            sql += " AND r.tier = ?"
            params.append(tier)
        sql += (" ORDER BY CASE r.tier WHEN 'identity' THEN 0 ELSE 1 END, "
                "(CASE WHEN r.s_user IS NULL THEN 0 ELSE 1 END + CASE WHEN r.s_project IS NULL "
                "THEN 0 ELSE 1 END + CASE WHEN r.s_agent IS NULL THEN 0 ELSE 1 END) DESC, "
                "r.created_at DESC LIMIT ?")
        params.append(limit)
        with self._rt.db.transaction(scope.tenant, write=False) as tx:
            return tx.all(sql, params)

    def history(self, fact_id: str, *, tenant: str | None = None) -> builtins.list[Fact]:
        """Every version of this fact's slot lineage, oldest first."""
        tenant = tenant or self._rt.default_tenant
        with self._rt.db.transaction(tenant, write=False) as tx:
            start = self._get(tx, tenant, fact_id)
            chain = [start]
            seen = {start.id}
            cur = start
            while cur.supersedes and cur.supersedes not in seen:
                try:
                    cur = self._get(tx, tenant, cur.supersedes)
                except NotFound:
                    break
                seen.add(cur.id)
                chain.insert(0, cur)
            cur = start
            while cur.superseded_by and cur.superseded_by not in seen:
                try:
                    cur = self._get(tx, tenant, cur.superseded_by)
                except NotFound:
                    break
                seen.add(cur.id)
                chain.append(cur)
        return chain


class Review:
    """The review queue: pending identity, untrusted and restricted facts."""

    def __init__(self, rt: Runtime, facts: Facts) -> None:
        self._rt = rt
        self._facts = facts

    def pending(self, scope: Scope | dict[str, Any], *, principal: str | None = None,
                limit: int = 200) -> builtins.list[Fact]:
        scope = make_scope(scope)
        rows = self._facts._select(scope, principal, "r.status = 'pending_review'",
                                   limit=limit, include_expired=True)
        return [fact_from_row(r) for r in rows]

    def approve(self, fact_id: str, *, reviewer: str, claim: str | None = None,
                tenant: str | None = None) -> WriteResult:
        """A person approves a pending fact (optionally editing its claim first)."""
        reviewer = _reason(reviewer, "reviewer")
        tenant = tenant or self._rt.default_tenant
        now = self._rt.clock.now()
        with self._rt.db.transaction(tenant) as tx:
            fact = self._facts._get(tx, tenant, fact_id)
            if fact.status != "pending_review":
                raise Conflict(f"fact {fact.id} is {fact.status}, not pending review")
            if claim is not None:
                edited = build(Candidate, scope=fact.scope, kind=fact.kind, subject=fact.subject,
                               attribute=fact.attribute, claim=claim, actor=fact.actor,
                               source=fact.source)
                from .sensitivity import scan

                if scan(edited.claim).has_secret:
                    raise ValidationError("the edited claim contains a secret; not approved")
                tx.execute("UPDATE facts SET claim = ? WHERE tenant = ? AND id = ?",
                           (edited.claim, tenant, fact.id))
                self._rt.db.index_text(tx, "facts", fact.id, tenant,
                                       f"{edited.claim}\n{fact.subject} {fact.attribute} "
                                       f"{fact.kind}")
            active = self._facts._slot_row(tx, fact.scope, fact.subject, fact.attribute,
                                           "active")
            superseded = None
            if active is not None:
                superseded = active["id"]
                tx.execute(
                    "UPDATE facts SET status = 'superseded', superseded_by = ?, valid_to = ?, "
                    "reason = ? WHERE tenant = ? AND id = ?",
                    (fact.id, now, f"superseded by reviewed fact:{fact.id}", tenant, superseded),
                )
            tx.execute(
                "UPDATE facts SET status = 'active', reviewer = ?, supersedes = ?, "
                "valid_from = ?, last_confirmed_at = ?, reason = ? WHERE tenant = ? AND id = ?",
                (reviewer, superseded, now, now, f"approved by {reviewer}", tenant, fact.id),
            )
        record = self._facts.get(fact.id, tenant=tenant)
        if superseded:
            return WriteResult(status="superseding", record=record,
                               superseded=self._facts.get(superseded, tenant=tenant),
                               reason=f"approved by {reviewer}; supersedes fact:{superseded}")
        return WriteResult(status="committed", record=record, reason=f"approved by {reviewer}")

    def reject(self, fact_id: str, *, reason: str, tenant: str | None = None) -> Fact:
        reason = _reason(reason)
        tenant = tenant or self._rt.default_tenant
        with self._rt.db.transaction(tenant) as tx:
            fact = self._facts._get(tx, tenant, fact_id)
            if fact.status != "pending_review":
                raise Conflict(f"fact {fact.id} is {fact.status}, not pending review")
            tx.execute("UPDATE facts SET status = 'rejected', reason = ?, valid_to = ? "
                       "WHERE tenant = ? AND id = ?",
                       (reason, self._rt.clock.now(), tenant, fact.id))
        return self._facts.get(fact.id, tenant=tenant)


_NEGATIONS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "neither", "nor",
                        "without", "longer", "stopped", "anymore"})


def _negated(claim: str) -> bool:
    """Whether a claim carries a negation word (so 'X' and 'no longer X' never dedup)."""
    words = set(claim.lower().replace("n't", " not").split())
    return bool(words & _NEGATIONS)


def _reason(value: Any, field: str = "reason") -> str:
    from .models import clean_text

    try:
        return clean_text(value, field=field, max_len=2000)
    except ValueError as exc:
        raise ValidationError(str(exc)) from exc


__all__ = ["Facts", "Review", "fact_from_row"]
