"""Durable facts (DESIGN §2, §3, §5): the only writer of the ``facts`` table.

Contract:
- ``propose`` runs the write policy (:mod:`memstrata.governance.policy`), then, in one
  transaction, dedup and conflict: an equivalent claim in the same slot (scope + subject +
  attribute) keeps the older record and bumps its ``last_confirmed_at``; a different claim
  *supersedes* the active one (old: status ``superseded``, ``superseded_by``, ``valid_to``,
  reason; new: ``supersedes``, and the old fact's restricted ``readers`` when it names
  none: access follows the source). Nothing is deleted. Every outcome is a WriteResult,
  built inside the transaction (no read after the commit can fail a stored write).
- The writer is ``principal=`` (an agent's), else the scope's user; with neither, the
  operator (:func:`memstrata.scoping.writer_of`). A slot's current fact restricted to readers the
  writer is not one of is never shown to, matched by or replaced by its write: the claim is
  held for review (:data:`HIDDEN_SLOT`); a pending or near fact it may not read is never its
  duplicate or named in ``similar``.
- Similarity only suggests: a claim near (by cosine) a fact of *another* slot is stored in
  its own slot like any other, and the result names the near facts (``similar``, and the
  reason), so a person or a judge may merge them. Dedup never drops a claim about a
  different slot ("lives in Lyon" and "works in Lyon" are two facts).
- At most one active fact per slot, enforced by a partial unique index.
- A claim the policy lets through outright (the user's own words) that equals a pending
  claim of the same slot (an agent's, say) becomes current; the pending record is closed
  (``rejected``, reason naming the new fact), never left to swallow the confirmation.
- The read filter of facts is :meth:`Facts.filter_sql` (scope applies, readers, status,
  unexpired): ``current``, the ranker, the evaluation harness and by-id reads use it. The
  reads live in :mod:`memstrata.layers.fact_reads` (inherited); the writes are here.
- By-id calls (``get``, ``history``, ``retire``, ``undo_supersede``, review, feedback)
  take the caller's ``scope`` (:func:`memstrata.scoping.resolve_caller`): a fact outside it
  or unreadable by its principal is :class:`NotFound`. Without a scope the caller is the
  tenant's operator.
- A fact's vector is the embedding of its claim (:meth:`Facts.embed_text`); its lexical
  entry is the claim plus its slot and kind. An edited claim (review) is re-indexed and
  re-embedded.
- Forgetting a fact by id takes its whole supersession lineage with it.
- The review queue (:mod:`memstrata.layers.review`), feedback
  (:mod:`memstrata.layers.feedback`), retention and forget change facts only through the
  methods here that take an open transaction (``activate_in``, ``reject_in``,
  ``apply_feedback``, ``expire_due``, ``forget_rows``, ``clear_links``).
"""

from __future__ import annotations

import builtins
import dataclasses
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..calls import checked_calls
from ..clock import Clock, from_text
from ..errors import AccessDenied, Conflict, ValidationError
from ..governance.policy import Candidate, Verdict, WritePolicy
from ..governance.safety import is_machine, screened_arg
from ..ids import new_id
from ..inputs import MAX_NAME, date_arg, name_arg, record_id_arg, text_arg
from ..models import DEFAULT_CONFIDENCE, Fact, Scope, WriteResult, build, make_scope
from ..scoping import (
    SCOPE_COLUMNS,
    dump_readers,
    exact_sql,
    hidden_from_writer,
    load_json_list,
    scope_values,
    shared_beyond,
    writer_of,
)
from ..store.base import Database, Row, Tx
from ..store.sql import chunks, marks
from .fact_reads import COLUMNS, FactReads, fact_from_row
from .indexing import IndexEntry, RecordIndex
from .selector import Selector

#: Text columns a forget ``match`` searches.
#: Contradicted this many times, a fact is retired (and flagged for review).
RETIRE_AFTER_CONTRADICTIONS = 3
#: How ``propose`` looks for duplicates (see :meth:`Facts.propose`).
DEDUP_MODES = ("policy", "slot", "off")


#: Why a claim waits for review when its slot's current fact is hidden from its writer.
HIDDEN_SLOT = ("held for review: this slot's current fact is restricted to other readers, so "
               "this write may not replace it; a reviewer who may read both decides")
#: Why a write that would replace an identity fact waits.
IDENTITY_SLOT = ("held for review: this slot's current fact is an identity fact, which only a "
                 "person changes (memstrata review approve)")


def _near_note(similar: Sequence[tuple[str, float]]) -> str:
    """The reason's suffix naming facts of other slots near the claim (a suggestion)."""
    if not similar:
        return ""
    named = ", ".join(f"fact:{fid} (cosine {score:.2f})" for fid, score in similar[:3])
    return f"; stored in its own slot, near {named}: merge them if they say the same"


@checked_calls
class Facts(FactReads):
    """The durable-fact layer; reached as ``mem.facts``."""

    table = "facts"

    def __init__(self, db: Database, clock: Clock, policy: WritePolicy, index: RecordIndex,
                 *, default_tenant: str = "default") -> None:
        self._db = db
        self._clock = clock
        self._policy = policy
        self._index = index
        self._default_tenant = default_tenant

    # -- the rules of this layer -------------------------------------------
    @staticmethod
    def embed_text(claim: str) -> str:
        """What a fact's vector is made from: its claim."""
        return claim

    @staticmethod
    def index_text(claim: str, subject: str, attribute: str, kind: str) -> str:
        """A fact's lexical entry: the claim, then its slot and kind."""
        return f"{claim}\n{subject} {attribute} {kind}"

    # -- writes -----------------------------------------------------------
    def propose(self, scope: Scope | dict[str, Any], *, claim: str, kind: str, subject: str,
                attribute: str, actor: str | None, source: str | None,
                confidence: float = DEFAULT_CONFIDENCE, tier: str = "standard",
                sensitivity: str = "internal", evidence: str | None = None,
                valid_from: datetime | str | None = None,
                expires_at: datetime | str | None = None,
                recheck_after: datetime | str | None = None,
                readers: Sequence[str] | None = None, reason: str | None = None,
                dedup: str = "policy", principal: str | None = None) -> WriteResult:
        """Propose a durable fact; the write policy decides what happens to it.

        ``dedup``: ``"policy"`` (an equivalent claim in the slot is a duplicate; facts of
        other slots near it by cosine are named in ``WriteResult.similar``, never merged),
        ``"slot"`` (the same, without the similarity search), ``"off"`` (every proposal that
        passes the policy is a new version of its slot: for callers whose record carries
        more than its claim and who compare records themselves, such as the LangGraph
        store). ``principal``: who writes, when not the scope's user (an agent's
        principal): a slot's current fact it may not read is not replaced."""
        cand = build(
            Candidate, scope=make_scope(scope), claim=claim, kind=kind, subject=subject,
            attribute=attribute, actor=actor, source=source, confidence=confidence, tier=tier,
            sensitivity=sensitivity, evidence=evidence, valid_from=valid_from,
            expires_at=expires_at, recheck_after=recheck_after,
            readers=readers, reason=reason,
        )
        return self.propose_candidate(cand, dedup=dedup, principal=principal)

    def propose_candidate(self, cand: Candidate, *, dedup: str = "policy",
                          principal: str | None = None) -> WriteResult:
        """Judge and store a validated candidate (used by extraction and import too)."""
        if not isinstance(cand, Candidate):
            raise ValidationError(f"expected a Candidate, got {type(cand).__name__}")
        writer = None if principal is None else name_arg(principal, "principal")
        if dedup not in DEDUP_MODES:
            raise ValidationError(f"dedup must be one of {', '.join(DEDUP_MODES)}, not "
                                  f"{dedup!r}")
        now = self._clock.now()
        verdict = self._policy.judge(cand, now)
        if verdict.action == "reject":
            return WriteResult(status="rejected", reason=verdict.reason,
                               detectors=list(verdict.detectors))
        cand = verdict.candidate
        # the claim's vector is computed before the write transaction opens
        vector = self._index.embed([self.embed_text(cand.claim)], tenant=cand.scope.tenant)
        with self._db.transaction(cand.scope.tenant) as tx:
            similar = self._similar(tx, cand, vector, writer) if dedup == "policy" else []
            active = self._slot_row(tx, cand.scope, cand.subject, cand.attribute, "active")
            if active is not None and hidden_from_writer(load_json_list(active["readers"]),
                                                         cand.scope, writer):
                # the slot's current fact is restricted to readers the writer is not one
                # of: never shown, matched or replaced by this write; a reviewer decides
                active = None
                verdict = dataclasses.replace(verdict, action="pending", reason=HIDDEN_SLOT)
            if active is not None and active["tier"] == "identity" and \
                    verdict.action == "store":
                # who someone is changes only when a person approves (whatever the new
                # claim's tier or actor: a user-mode MCP server writes as the user); an
                # equal claim still only confirms it, and an equal pending one is that one
                verdict = dataclasses.replace(verdict, action="pending", reason=IDENTITY_SLOT)
            dup = None if dedup == "off" else self._find_duplicate(tx, cand, active, writer)
            confirmed = None
            if dup is not None and dup["status"] == "pending_review" and \
                    verdict.action == "store":
                # a claim that may be stored outright (the user's own words) is never
                # swallowed by a pending one of its slot: it becomes current below, and the
                # pending record is closed as confirmed
                confirmed, dup = dup, None
            if dup is not None:
                if self._policy.is_untrusted(cand.actor):
                    # an agent or a tool saying it again is no one's confirmation: a stale
                    # fact stays stale until someone who knows restates it
                    return WriteResult(status="duplicate", record=fact_from_row(dup),
                                       reason=f"an equivalent fact exists; kept the older "
                                              f"record ({cand.actor} content confirms "
                                              "nothing)", detectors=list(verdict.detectors))
                dup["recheck_after"] = self._confirm(
                    tx, cand.scope.tenant, dup["id"], now,
                    since=(from_text(dup["last_confirmed_at"]), from_text(dup["created_at"])),
                    recheck=from_text(dup["recheck_after"]))
                dup["last_confirmed_at"] = now
                return WriteResult(status="duplicate", record=fact_from_row(dup),
                                   reason="an equivalent fact exists; kept the older record "
                                          "and confirmed it", detectors=list(verdict.detectors))
            near = [f"fact:{fid}" for fid, _ in similar]
            hint = _near_note(similar)
            if verdict.action == "pending":
                fact = self._insert(tx, cand, verdict, now, status="pending_review",
                                    vector=vector)
                return WriteResult(status="pending", record=fact,
                                   reason=verdict.reason + hint, similar=near,
                                   detectors=list(verdict.detectors))
            fact_id = new_id()
            old = None
            if active is not None:
                why = cand.reason or f"superseded by fact:{fact_id}"
                inherited = self._supersede(tx, active, fact_id, cand.valid_from or now, why)
                if cand.readers is None and inherited is not None:
                    cand = cand.model_copy(update={"readers": inherited})
                old = self._read(tx, cand.scope.tenant, active["id"])
            fact = self._insert(tx, cand, verdict, now, status="active", fact_id=fact_id,
                                supersedes=active["id"] if active else None, vector=vector)
            if confirmed is not None:
                tx.execute("UPDATE facts SET status = 'rejected', valid_to = ?, reason = ? "
                           "WHERE tenant = ? AND id = ?",
                           (now, f"confirmed by {cand.actor} in fact:{fact_id}; this proposal "
                                 "is closed", cand.scope.tenant, confirmed["id"]))
        if old is not None:
            return WriteResult(status="superseding", record=fact, superseded=old,
                               reason=f"supersedes {old.ref}: a different claim for "
                                      f"{cand.subject}/{cand.attribute}{hint}",
                               similar=near, detectors=list(verdict.detectors))
        reason = verdict.reason
        if confirmed is not None:
            reason = (f"{reason}; confirms the pending fact:{confirmed['id']} (closed in its "
                      "favour)")
        return WriteResult(status="committed", record=fact, reason=reason + hint,
                           similar=near, detectors=list(verdict.detectors))

    @staticmethod
    def _confirm(tx: Tx, tenant: str, fact_id: str, now: datetime, *,
                 since: tuple[datetime | None, datetime | None],
                 recheck: datetime | None) -> datetime | None:
        """Record that the fact was confirmed ``now`` (restated by someone trusted): its
        ``last_confirmed_at``, and its recheck date moved as far past now as it lay past
        its last confirmation before it (``since``: that and the creation; the creation
        where the recheck date did not lie past the confirmation, as confirmations left it
        before), so a fact confirmed today is no longer stale (before, it stayed stale, and
        recall kept asking to verify it). Its expiry, a date the fact stops holding, is not
        moved. Returns the new recheck date."""
        confirmed, created = since
        base = confirmed if confirmed is not None and recheck is not None and \
            recheck > confirmed else created
        moved = recheck if recheck is None or base is None else \
            max(recheck, now + (recheck - base))
        tx.execute("UPDATE facts SET last_confirmed_at = ?, recheck_after = ? WHERE tenant = ? "
                   "AND id = ?", (now, moved, tenant, fact_id))
        return moved

    def _supersede(self, tx: Tx, old: Row, new_id_: str, when: datetime,
                   reason: str) -> list[str] | None:
        """Mark ``old`` superseded by ``new_id_``; returns its readers, which the new fact
        inherits when it names none (access follows the source)."""
        tx.execute("UPDATE facts SET status = 'superseded', superseded_by = ?, valid_to = ?, "
                   "reason = ? WHERE tenant = ? AND id = ?",
                   (new_id_, when, reason, old["tenant"], old["id"]))
        return load_json_list(old["readers"])

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
        tx.execute(f"INSERT INTO facts ({SCOPE_COLUMNS}, {COLUMNS}) VALUES "
                   f"({', '.join('?' * len(values))})", values)
        self._index.write(tx, "facts", cand.scope.tenant, [IndexEntry(
            fid, self.index_text(cand.claim, cand.subject, cand.attribute, cand.kind))], vector)
        return self._read(tx, cand.scope.tenant, fid)

    def _similar(self, tx: Tx, cand: Candidate, vector: Any,
                 writer: str | None) -> list[tuple[str, float]]:
        """Active or pending facts of exactly this scope and kind, in other slots, that the
        writer may read, whose vectors are near the claim (cosine >= the policy's
        ``dedup_cosine``), best first."""
        index = self._index.vectors
        if index is None or vector is None:
            return []
        where, params = exact_sql(cand.scope)
        where += " AND r.kind = ? AND r.status IN ('active', 'pending_review') AND NOT " \
                 "(r.subject = ? AND r.attribute = ?)"
        params = [*params, cand.kind, cand.subject, cand.attribute]
        reader = writer_of(cand.scope, writer)
        if reader is not None:  # the writer's reads (hidden_from_writer)
            where += f" AND {self._db.readers_clause('r.readers')}"
            params.append(reader)
        scored = index.fact_scores(tx, where, params, vector[0], 50)
        threshold = self._policy.config.dedup_cosine
        return [(fid, s) for fid, s in scored if s >= threshold]

    def retire(self, fact_id: str, *, reason: str, scope: Scope | dict[str, Any] | None = None,
               principal: str | None = None, tenant: str | None = None,
               actor: str | None = None) -> Fact:
        """Take a fact out of the current set without replacing it; history keeps it.
        ``actor``: who retires it; a program's (``agent``, ``tool``...:
        :func:`~memstrata.governance.safety.is_machine`) may not retire an identity fact,
        nor one that applies beyond the caller's ``scope`` (a project-wide fact seen by one
        user: :func:`~memstrata.scoping.shared_beyond`)."""
        fact_id = record_id_arg(fact_id, "fact")
        reason = screened_arg(reason, "reason", max_len=2000)
        if actor is not None:
            actor = text_arg(actor, "actor", max_len=MAX_NAME,
                             hint="who retires it: a person's name, or agent, tool...")
        tenant, sc = self.caller(scope, tenant)
        now = self._clock.now()
        with self._db.transaction(tenant) as tx:
            fact = self.get_in(tx, tenant, fact_id, sc, principal)
            if fact.status not in ("active", "pending_review"):
                raise Conflict(f"fact {fact_id} is {fact.status}; only active or pending facts "
                               "can be retired")
            if fact.tier == "identity" and is_machine(actor):
                raise AccessDenied(f"fact {fact_id} is an identity fact: only a person retires "
                                   "it; nothing changed",
                                   hint="ask your user (memstrata review, or the inspector)")
            if sc is not None and is_machine(actor) and shared_beyond(fact.scope, sc):
                # as feedback on it changes nothing: others rely on it
                raise AccessDenied(f"fact {fact_id} applies beyond {sc} (to {fact.scope}): a "
                                   "program retires only what its own scope holds; nothing "
                                   "changed", hint="ask a person (memstrata review, or the "
                                                   "inspector) to retire a shared fact")
            tx.execute("UPDATE facts SET status = 'retired', valid_to = ?, reason = ? "
                       "WHERE tenant = ? AND id = ?", (now, reason, tenant, fact.id))
            return self._read(tx, tenant, fact.id)

    def extend_expiry(self, scope: Scope | dict[str, Any],
                      until: dict[str, datetime]) -> int:
        """Move ``expires_at`` of active facts of exactly ``scope`` to the given times (a
        time-to-live refreshed on read); returns how many changed."""
        scope = make_scope(scope)
        if not isinstance(until, dict):
            raise ValidationError(f"until must map fact ids to times, got {type(until).__name__}")
        by_time: dict[datetime, builtins.list[str]] = {}
        for fid, when in until.items():  # one UPDATE per distinct time (usually one)
            at = date_arg(when, "until")
            if at is None:
                raise ValidationError("until needs a time for every fact id")
            by_time.setdefault(at, []).append(record_id_arg(fid, "fact"))
        changed = 0
        where, params = exact_sql(scope)
        with self._db.transaction(scope.tenant) as tx:
            for when, ids in by_time.items():
                for part in chunks(ids):
                    changed += tx.execute(
                        f"UPDATE facts AS r SET expires_at = ? WHERE {where} AND r.id IN "
                        f"({marks(part)}) AND r.status = 'active'", (when, *params, *part))
        return changed

    def undo_supersede(self, fact_id: str, *, reason: str,
                       scope: Scope | dict[str, Any] | None = None,
                       principal: str | None = None, tenant: str | None = None) -> Fact:
        """Undo the supersession made by ``fact_id``: its predecessor is current again.

        In one transaction ``fact_id`` is retired (reason recorded, flag
        ``supersession_undone``) and the fact it superseded becomes active again
        (``valid_to`` cleared, reason says why). The two links are cleared so the
        chain stays consistent for later supersessions; both reasons name the
        other record. Refused (Conflict) unless ``fact_id`` is active and
        supersedes a fact that is still ``superseded`` by it, unexpired, with its
        slot free. Returns the restored fact.
        """
        fact_id = record_id_arg(fact_id, "fact")
        reason = screened_arg(reason, "reason", max_len=2000)
        tenant, sc = self.caller(scope, tenant)
        now = self._clock.now()
        with self._db.transaction(tenant) as tx:
            fact = self.get_in(tx, tenant, fact_id, sc, principal)
            if fact.status != "active":
                later = f" by fact:{fact.superseded_by}" if fact.superseded_by else ""
                raise Conflict(f"fact {fact.id} is {fact.status}{later}; only the current fact "
                               "of a chain can be undone",
                               hint="undo the latest supersession first")
            if not fact.supersedes:
                raise Conflict(f"fact {fact.id} did not supersede anything",
                               hint="use `memstrata facts retire` to take it out")
            prev = self.get_in(tx, tenant, fact.supersedes, sc, principal)
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
            return self._read(tx, tenant, prev.id)

    # -- review (called by memstrata.layers.review inside its transaction) --------------
    def activate_in(self, tx: Tx, fact: Fact, *, reviewer: str, claim: str | None,
                  vector: Any, now: datetime) -> tuple[Fact, Fact | None]:
        """A person approved the pending ``fact`` (optionally with an edited claim): it
        becomes the active fact of its slot, superseding the current one, and takes that
        one's identity tier (a slot that says who someone is keeps saying it: a plain claim
        approved into it would otherwise become a fact any agent may retire). Returns the
        approved fact and the one it superseded."""
        tenant = fact.scope.tenant
        if claim is not None:
            tx.execute("UPDATE facts SET claim = ? WHERE tenant = ? AND id = ?",
                       (claim, tenant, fact.id))
            self._index.write(tx, "facts", tenant, [IndexEntry(
                fact.id, self.index_text(claim, fact.subject, fact.attribute, fact.kind))],
                vector)
            if vector is None and claim != fact.claim:
                # no embedder to make the new claim's vector: the old claim's must not stay
                # (it would answer for words that are gone); `reindex --missing` remakes it
                self._index.drop_vectors(tx, tenant, [fact.id])
        active = self._slot_row(tx, fact.scope, fact.subject, fact.attribute, "active")
        superseded = None
        readers = fact.readers
        tier = "identity" if active is not None and active["tier"] == "identity" else fact.tier
        if active is not None:
            superseded = active["id"]
            inherited = self._supersede(tx, active, fact.id, now,
                                        f"superseded by reviewed fact:{fact.id}")
            if readers is None:
                readers = inherited
        tx.execute(
            "UPDATE facts SET status = 'active', reviewer = ?, supersedes = ?, valid_from = ?, "
            "last_confirmed_at = ?, reason = ?, readers = ?, tier = ? WHERE tenant = ? AND "
            "id = ?",
            (reviewer, superseded, now, now, f"approved by {reviewer}", dump_readers(readers),
             tier, tenant, fact.id))
        old = self._read(tx, tenant, superseded) if superseded else None
        return self._read(tx, tenant, fact.id), old

    def reject_in(self, tx: Tx, fact: Fact, *, reason: str, now: datetime) -> Fact:
        tx.execute("UPDATE facts SET status = 'rejected', reason = ?, valid_to = ? "
                   "WHERE tenant = ? AND id = ?", (reason, now, fact.scope.tenant, fact.id))
        return self._read(tx, fact.scope.tenant, fact.id)

    # -- feedback, retention, forget (inside the caller's transaction) -------------------
    def apply_feedback(self, tx: Tx, fact: Fact, signal: str, *, contradictions: int,
                       now: datetime) -> str:
        """The effect of one feedback signal on ``fact``: useful confirms it, contradicted
        demotes it and, after :data:`RETIRE_AFTER_CONTRADICTIONS`, retires an active fact;
        none on an identity fact (only a person changes it). Returns the action taken."""
        tenant = fact.scope.tenant
        if fact.tier == "identity":  # a signal, not a person's decision: it changes nothing
            return "recorded"
        if signal == "useful":  # it helped: no one re-checked it, so its recheck date stays
            tx.execute("UPDATE facts SET feedback_score = feedback_score + 1, "
                       "last_confirmed_at = ? WHERE tenant = ? AND id = ?", (now, tenant, fact.id))
            return "recorded"
        if signal != "contradicted":
            return "recorded"
        tx.execute("UPDATE facts SET feedback_score = feedback_score - 1 "
                   "WHERE tenant = ? AND id = ?", (tenant, fact.id))
        if contradictions >= RETIRE_AFTER_CONTRADICTIONS and fact.status == "active":
            tx.execute("UPDATE facts SET status = 'retired', valid_to = ?, reason = ? "
                       "WHERE tenant = ? AND id = ?",
                       (now, f"retired after {contradictions} contradictions", tenant, fact.id))
            return "retired"
        return "demoted"

    def expire_due(self, tx: Tx, tenant: str, now: datetime) -> int:
        """Record ``expired`` on the tenant's active and pending facts past ``expires_at``."""
        return tx.execute(
            "UPDATE facts SET status = 'expired', valid_to = expires_at WHERE tenant = ? AND "
            "status IN ('active', 'pending_review') AND expires_at IS NOT NULL AND "
            "expires_at <= ?", (tenant, now))

    def forget_rows(self, tx: Tx, sel: Selector, *, dry_run: bool) -> list[str]:
        """Delete (unless ``dry_run``) the facts ``sel`` selects, every status (but identity
        facts, for a program's forget: :meth:`kept_identity`); their full-text entries and
        vectors go by trigger. Returns the ids."""
        chosen = self._chosen(tx, sel)
        if chosen is None:
            return []
        where, params = chosen
        if sel.keep_identity:
            where += " AND r.tier <> 'identity'"
        ids = [r["id"] for r in tx.all(f"SELECT r.id AS id FROM facts r WHERE {where}", params)]
        if ids and not dry_run:
            tx.execute(f"DELETE FROM facts AS r WHERE {where}", params)
        return ids

    def clear_links(self, tx: Tx, tenant: str, ids: Sequence[str]) -> None:
        """Clear supersession links that point at forgotten facts (no orphan history)."""
        for chunk in chunks(list(ids)):
            tx.execute(f"UPDATE facts SET supersedes = NULL WHERE tenant = ? AND supersedes IN "
                       f"({marks(chunk)})", (tenant, *chunk))
            tx.execute(f"UPDATE facts SET superseded_by = NULL WHERE tenant = ? AND "
                       f"superseded_by IN ({marks(chunk)})", (tenant, *chunk))

    def embed_items(self, tx: Tx, tenant: str) -> builtins.list[tuple[str, str]]:
        """(id, embed text) of every fact of the tenant, for a reindex."""
        return [(r["id"], self.embed_text(r["claim"])) for r in tx.all(
            "SELECT id, claim FROM facts WHERE tenant = ? ORDER BY id", (tenant,))]

    def hold_stored(self, tx: Tx, tenant: str, ids: Sequence[str]) -> dict[str, str]:
        """Of these facts, those still stored, each with the text its vector is made from
        now (:meth:`embed_text`): for a reindex's batch, read in its write transaction (on
        PostgreSQL the read takes the tenant lock a forget holds). A reviewer's edit
        rewrites a claim in place, so a vector made from the claim listed earlier may no
        longer be this fact's (:func:`memstrata.layers.indexing.reindex` compares)."""
        found: dict[str, str] = {}
        for chunk in chunks(list(ids)):
            found.update((r["id"], self.embed_text(r["claim"])) for r in tx.all(
                f"SELECT id, claim FROM facts WHERE tenant = ? AND id IN ({marks(chunk)})",
                (tenant, *chunk)))
        return found

__all__ = ["COLUMNS", "DEDUP_MODES", "RETIRE_AFTER_CONTRADICTIONS", "Facts", "fact_from_row"]
