"""The reads of durable facts: the read filter, by-id reads and listings.

Contract:
- :meth:`FactReads.filter_sql` is the facts' read filter (the scope applies, the principal
  may read, the status, unexpired); every listing here, the ranker, the evaluation harness
  and by-id reads use it. By-id reads take the caller's ``scope``
  (:func:`memstrata.scoping.resolve_caller`): a fact outside it or unreadable by its
  principal is :class:`~memstrata.errors.NotFound`; without a scope the caller is the
  tenant's operator.
- What a write or a forget reads first: a slot's current or pending row and its
  duplicate, whether a slot's current fact is hidden from a writer, the facts a forget's
  selector chooses (with their supersession lineage), leaves to others, or keeps (identity
  facts a program may not forget).
- Nothing here writes: :class:`memstrata.layers.facts.Facts` (the only writer of
  ``facts``) inherits these reads.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..calls import checked_calls
from ..clock import Clock, from_text
from ..errors import NotFound
from ..governance.policy import Candidate, normalise_claim
from ..inputs import MAX_NAME, bool_arg, choice_arg, int_arg, record_id_arg, text_arg
from ..models import FACT_STATUSES, Fact, Provenance, Scope, make_scope
from ..scoping import (
    SCOPE_COLUMNS,
    applies_sql,
    exact_sql,
    hidden_from_writer,
    load_json_list,
    owned_sql,
    principal_of,
    resolve_caller,
    scope_from_row,
)
from ..store.base import Database, Row, Tx
from ..store.sql import chunks, marks, prefix_param
from .indexing import RecordIndex
from .selector import Selector, narrowed, read_not_owned

COLUMNS = (
    "id, kind, subject, attribute, claim, confidence, tier, sensitivity, status, actor, source, "
    "evidence, created_at, valid_from, valid_to, recheck_after, expires_at, supersedes, "
    "superseded_by, reason, readers, last_confirmed_at, reviewer, flags"
)
#: The select of every fact read (alias ``r``).
SELECT = f"SELECT {SCOPE_COLUMNS}, {COLUMNS} FROM facts r"


def fact_from_row(row: Row, now: datetime | None = None) -> Fact:
    """A Fact from its row; with ``now``, an active or pending fact past ``expires_at``
    reads as ``expired`` even before a sweep records it."""
    expires = from_text(row["expires_at"])
    status = row["status"]
    if (now is not None and expires is not None and expires <= now
            and status in ("active", "pending_review")):
        status = "expired"
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
        status=status,
        provenance=Provenance.model_construct(actor=row["actor"], source=row["source"],
                                              evidence=row["evidence"]),
        created_at=from_text(row["created_at"]),
        valid_from=from_text(row["valid_from"]),
        valid_to=from_text(row["valid_to"]),
        recheck_after=from_text(row["recheck_after"]),
        expires_at=expires,
        supersedes=row["supersedes"],
        superseded_by=row["superseded_by"],
        reason=row["reason"],
        readers=load_json_list(row["readers"]),
        last_confirmed_at=from_text(row["last_confirmed_at"]),
        reviewer=row["reviewer"],
        flags=load_json_list(row["flags"]) or [],
    )


#: Text columns a forget ``match`` searches.
TEXT_COLUMNS = ("claim", "subject", "attribute", "evidence", "source", "reason")

@checked_calls
class FactReads:
    """Reads of the ``facts`` table (mixed into :class:`memstrata.layers.facts.Facts`)."""

    _db: Database
    _clock: Clock
    _index: RecordIndex
    _default_tenant: str

    def filter_sql(self, scope: Scope, principal: str | None, *,
                   statuses: Sequence[str] | None = ("active",),
                   include_expired: bool = False,
                   owned: bool = False) -> tuple[str, list[Any]]:
        """The WHERE fragment (alias ``r``) every read of facts applies before ranking:
        the scope applies (with ``owned``: the scope owns the fact,
        :func:`memstrata.scoping.owned_sql`), the principal may read, the status is one of
        ``statuses`` (None: any) and, unless ``include_expired``, the fact has not expired."""
        where, params = owned_sql(scope) if owned else applies_sql(scope)
        where += f" AND {self._db.readers_clause('r.readers')}"
        params.append(principal_of(scope, principal))
        if statuses is not None:
            where += f" AND r.status IN ({marks(statuses)})"
            params += list(statuses)
        if not include_expired:
            where += " AND (r.expires_at IS NULL OR r.expires_at > ?)"
            params.append(self._clock.now())
        return where, params

    def caller(self, scope: Scope | dict[str, Any] | None,
                tenant: str | None) -> tuple[str, Scope | None]:
        return resolve_caller(scope, tenant, self._default_tenant)
    # -- reads ------------------------------------------------------------
    def get(self, fact_id: str, scope: Scope | dict[str, Any] | None = None, *,
            principal: str | None = None, tenant: str | None = None) -> Fact:
        """One fact by id (or ``fact:ID``). With ``scope``, it must apply to the scope and be
        readable by the principal, else NotFound."""
        fact_id = record_id_arg(fact_id, "fact")
        tenant, sc = self.caller(scope, tenant)
        with self._db.transaction(tenant, write=False) as tx:
            return self.get_in(tx, tenant, fact_id, sc, principal)

    def get_in(self, tx: Tx, tenant: str, fact_id: str, scope: Scope | None = None,
             principal: str | None = None) -> Fact:
        fact_id = fact_id.removeprefix("fact:")
        if scope is None:
            row = tx.one(f"{SELECT} WHERE r.tenant = ? AND r.id = ?", (tenant, fact_id))
        else:
            where, params = self.filter_sql(scope, principal, statuses=None,
                                            include_expired=True)
            row = tx.one(f"{SELECT} WHERE {where} AND r.id = ?", (*params, fact_id))
        if row is None:
            where_ = f" in {scope}" if scope is not None else f" in tenant {tenant}"
            raise NotFound(f"no fact {fact_id}{where_}",
                           hint="list facts with `memstrata facts list`")
        return fact_from_row(row, self._clock.now())

    def _read(self, tx: Tx, tenant: str, fact_id: str) -> Fact:
        row = tx.one(f"{SELECT} WHERE r.tenant = ? AND r.id = ?", (tenant, fact_id))
        assert row is not None
        return fact_from_row(row, self._clock.now())

    def read_many(self, tx: Tx, tenant: str, ids: Sequence[str]) -> dict[str, Fact]:
        """Facts by id inside the caller's transaction (the caller filtered them already)."""
        out: dict[str, Fact] = {}
        now = self._clock.now()
        for chunk in chunks(list(ids)):
            for row in tx.all(f"{SELECT} WHERE r.tenant = ? AND r.id IN ({marks(chunk)})",
                              (tenant, *chunk)):
                out[row["id"]] = fact_from_row(row, now)
        return out

    def current(self, scope: Scope | dict[str, Any], limit: int = 40, *,
                principal: str | None = None, kind: str | None = None,
                tier: str | None = None) -> builtins.list[Fact]:
        """Active, unexpired facts that apply to ``scope`` and that the principal may read:
        identity first, then the most specific scope, newest first."""
        scope = make_scope(scope)
        limit = int_arg(limit, "limit", low=0, high=100_000)
        extra, params = "", []
        if kind is not None:
            extra += " AND r.kind = ?"
            params.append(text_arg(kind, "kind", max_len=64))
        if tier is not None:
            extra += " AND r.tier = ?"
            params.append(text_arg(tier, "tier", max_len=64))
        rows = self._select(scope, principal, ("active",), extra, params, limit=limit)
        return [fact_from_row(r) for r in rows]

    def in_namespace(self, scope: Scope | dict[str, Any], subject: str, *,
                     attribute: str | None = None, deeper: bool = False,
                     principal: str | None = None, limit: int = 5000,
                     status: str = "active") -> builtins.list[Fact]:
        """Unexpired facts of one ``status`` (default active) of exactly ``scope`` (readers
        apply) whose subject is ``subject`` (with ``deeper``: or starts with ``subject +
        "."``), of one ``attribute`` if given, newest first: the reads of a key-value view
        of facts (the LangGraph store)."""
        scope = make_scope(scope)
        subject = text_arg(subject, "subject", max_len=200)
        limit = int_arg(limit, "limit", low=0, high=100_000)
        status = choice_arg(status, "status", FACT_STATUSES)
        where, params = self.filter_sql(scope, principal, statuses=(status,))
        where += " AND r.scope_key = ?"
        params.append(scope.key)
        if deeper:
            where += " AND (r.subject = ? OR r.subject LIKE ? ESCAPE '\\')"
            params += [subject, prefix_param(subject + ".")]
        else:
            where += " AND r.subject = ?"
            params.append(subject)
        if attribute is not None:
            where += " AND r.attribute = ?"
            params.append(text_arg(attribute, "attribute", max_len=200))
        with self._db.transaction(scope.tenant, write=False) as tx:
            rows = tx.all(f"{SELECT} WHERE {where} ORDER BY r.created_at DESC, r.id DESC "
                          "LIMIT ?", [*params, limit])
        return [fact_from_row(r) for r in rows]

    def subject_groups(self, scope: Scope | dict[str, Any], root: str, *,
                       principal: str | None = None
                       ) -> builtins.list[tuple[Scope, str, str | None]]:
        """(scope, subject, one evidence text) per scope and subject ``root`` or under
        ``root + "."`` among the active, unexpired facts *owned* by ``scope`` that the
        principal may read: the namespaces of a key-value view of facts (the LangGraph
        store)."""
        scope = make_scope(scope)
        root = text_arg(root, "root", max_len=200)
        where, params = self.filter_sql(scope, principal, owned=True)
        with self._db.transaction(scope.tenant, write=False) as tx:
            rows = tx.all(
                f"SELECT r.tenant AS tenant, r.s_user AS s_user, r.s_project AS s_project, "
                f"r.s_agent AS s_agent, r.subject AS subject, MIN(r.evidence) AS evidence "
                f"FROM facts r WHERE {where} AND (r.subject = ? OR r.subject LIKE ? "
                f"ESCAPE '\\') GROUP BY r.tenant, r.s_user, r.s_project, r.s_agent, r.subject",
                [*params, root, prefix_param(root + ".")])
        return [(scope_from_row(r), r["subject"], r["evidence"]) for r in rows]

    def list(self, scope: Scope | dict[str, Any], *, status: str | None = None,
             principal: str | None = None, limit: int = 200,
             subject: str | None = None, include_expired: bool = True) -> builtins.list[Fact]:
        """Facts of any status (or one) that apply to the scope, for people and exports
        (``subject``: only facts about it; ``include_expired=False``: none past its
        ``expires_at``, filtered before the limit)."""
        scope = make_scope(scope)
        limit = int_arg(limit, "limit", low=0, high=100_000)
        statuses = None if status is None else (choice_arg(
            status, "status", FACT_STATUSES, hint="leave status out for every status"),)
        extra, extra_params = "", []
        if subject is not None:
            extra, extra_params = " AND r.subject = ?", [text_arg(subject, "subject",
                                                                  max_len=MAX_NAME)]
        rows = self._select(scope, principal, statuses, extra, extra_params, limit=limit,
                            include_expired=bool_arg(include_expired, "include_expired"))
        now = self._clock.now()
        return [fact_from_row(r, now) for r in rows]

    def _select(self, scope: Scope, principal: str | None, statuses: Sequence[str] | None,
                extra: str, extra_params: Sequence[Any], *, limit: int,
                include_expired: bool = False) -> builtins.list[Row]:
        where, params = self.filter_sql(scope, principal, statuses=statuses,
                                        include_expired=include_expired)
        sql = (f"{SELECT} WHERE {where}{extra} ORDER BY CASE r.tier WHEN 'identity' THEN 0 "
               "ELSE 1 END, (CASE WHEN r.s_user IS NULL THEN 0 ELSE 1 END + CASE WHEN "
               "r.s_project IS NULL THEN 0 ELSE 1 END + CASE WHEN r.s_agent IS NULL THEN 0 "
               "ELSE 1 END) DESC, r.created_at DESC, r.id DESC LIMIT ?")
        with self._db.transaction(scope.tenant, write=False) as tx:
            return tx.all(sql, [*params, *extra_params, limit])

    def owned(self, scope: Scope | dict[str, Any]) -> builtins.list[Fact]:
        """Every fact *owned* by the scope (:func:`memstrata.scoping.owned_sql`), any
        status: what a forget of this scope could reach."""
        scope = make_scope(scope)
        where, params = owned_sql(scope)
        with self._db.transaction(scope.tenant, write=False) as tx:
            rows = tx.all(f"{SELECT} WHERE {where} ORDER BY r.created_at, r.id", params)
        return [fact_from_row(r) for r in rows]

    def history(self, fact_id: str, scope: Scope | dict[str, Any] | None = None, *,
                principal: str | None = None,
                tenant: str | None = None) -> builtins.list[Fact]:
        """Every version of this fact's slot lineage, oldest first (with ``scope``: only
        versions the caller may read; the fact itself must be one)."""
        fact_id = record_id_arg(fact_id, "fact")
        tenant, sc = self.caller(scope, tenant)
        with self._db.transaction(tenant, write=False) as tx:
            start = self.get_in(tx, tenant, fact_id, sc, principal)
            chain = [start]
            seen = {start.id}
            for link in ("supersedes", "superseded_by"):
                cur = start
                while getattr(cur, link) and getattr(cur, link) not in seen:
                    try:
                        cur = self.get_in(tx, tenant, getattr(cur, link), sc, principal)
                    except NotFound:
                        break
                    seen.add(cur.id)
                    if link == "supersedes":
                        chain.insert(0, cur)
                    else:
                        chain.append(cur)
        return chain

    def claim_cosines(self, scope: Scope, claim: str,
                      ids: Sequence[str]) -> builtins.list[tuple[str, float]]:
        """Cosine of ``claim`` to each listed fact of the tenant, best first (empty without
        an embedder). Used by the conflict judges of extraction."""
        index = self._index.vectors
        if index is None or not ids:
            return []
        qvec = self._index.embed_query(claim)
        if qvec is None:
            return []
        with self._db.transaction(scope.tenant, write=False) as tx:
            return index.fact_scores(tx, f"r.tenant = ? AND r.id IN ({marks(ids)})",
                                     [scope.tenant, *ids], qvec, len(ids))

    # -- what a write or a forget reads first --------------------------------
    def _slot_row(self, tx: Tx, scope: Scope, subject: str, attribute: str,
                  status: str) -> Row | None:
        where, params = exact_sql(scope)
        return tx.one(f"{SELECT} WHERE {where} AND r.subject = ? AND r.attribute = ? "
                      "AND r.status = ? ORDER BY r.created_at DESC LIMIT 1",
                      (*params, subject, attribute, status))

    def _find_duplicate(self, tx: Tx, cand: Candidate, active: Row | None,
                        writer: str | None) -> Row | None:
        """The active, else the pending, fact of the candidate's slot with an equivalent
        claim (the only duplicate there is), among those the writer may read."""
        norm = normalise_claim(cand.claim)
        if active is not None and normalise_claim(active["claim"]) == norm:
            return active
        pending = self._slot_row(tx, cand.scope, cand.subject, cand.attribute, "pending_review")
        if pending is not None and normalise_claim(pending["claim"]) == norm and \
                not hidden_from_writer(load_json_list(pending["readers"]), cand.scope, writer):
            return pending
        return None

    def slot_hidden_in(self, tx: Tx, fact: Fact, scope: Scope,
                       principal: str | None) -> bool:
        """Whether the current fact of ``fact``'s slot (another one) is hidden from a write
        in ``scope`` by ``principal`` (:func:`~memstrata.scoping.hidden_from_writer`)."""
        active = self._slot_row(tx, fact.scope, fact.subject, fact.attribute, "active")
        return active is not None and active["id"] != fact.id and \
            hidden_from_writer(load_json_list(active["readers"]), scope, principal)

    def kept_identity(self, tx: Tx, sel: Selector) -> builtins.list[str]:
        """The identity facts a program's forget (``sel.keep_identity``) selects and leaves:
        only a person changes who someone is."""
        chosen = self._chosen(tx, sel) if sel.keep_identity else None
        if chosen is None:
            return []
        where, params = chosen
        return [r["id"] for r in tx.all(
            f"SELECT r.id AS id FROM facts r WHERE {where} AND r.tier = 'identity'", params)]

    def _chosen(self, tx: Tx, sel: Selector) -> tuple[str, builtins.list[Any]] | None:
        """The filter (alias ``r``) of the facts ``sel`` selects, every status and tier (None:
        it names fact ids, none of them here)."""
        where, params = sel.where(TEXT_COLUMNS)
        readers, more = sel.readers(self._db.readers_clause)
        where, params = where + readers, [*params, *more]
        named = sel.ids_for("fact")
        if named is not None:
            if not named:
                return None
            # a fact is forgotten with its whole supersession history (the versions share
            # its slot and usually its text)
            ids = self._lineage(tx, sel, named)
            where += f" AND r.id IN ({marks(ids)})"
            params += ids
        if sel.subject is not None:
            where += " AND r.subject = ?"
            params.append(sel.subject)
        return where, params

    def kept_rows(self, tx: Tx, sel: Selector) -> builtins.list[tuple[str, Scope]]:
        """(id, scope) of the facts ``sel`` would select (current or superseded) among
        those its scope reads but does not own (user-wide ones seen from a project): what
        its forget leaves, to be reported."""
        chosen = narrowed(sel, "fact", sel.where(TEXT_COLUMNS, read_not_owned(
            sel, self.filter_sql(sel.scope, sel.principal,
                                       statuses=("active", "superseded")))))
        if chosen is None:
            return []
        where, params = chosen
        if sel.subject is not None:
            where += " AND r.subject = ?"
            params.append(sel.subject)
        return [(r["id"], scope_from_row(r)) for r in tx.all(
            f"SELECT r.id AS id, {SCOPE_COLUMNS} FROM facts r WHERE {where}", params)]

    def _lineage(self, tx: Tx, sel: Selector, ids: Sequence[str]) -> builtins.list[str]:
        """``ids`` and every fact linked to them by supersession, within the owned scope."""
        found, todo = set(ids), list(ids)
        owned, params = sel.owned()
        while todo:
            batch, todo = todo[:500], todo[500:]
            for row in tx.all(f"SELECT r.id AS id, r.supersedes AS s, r.superseded_by AS b FROM "
                              f"facts r WHERE {owned} AND (r.id IN ({marks(batch)}) OR "
                              f"r.supersedes IN ({marks(batch)}) OR r.superseded_by IN "
                              f"({marks(batch)}))", [*params, *batch, *batch, *batch]):
                for other in (row["id"], row["s"], row["b"]):
                    if other and other not in found:
                        found.add(other)
                        todo.append(other)
        return sorted(found)


__all__ = ["COLUMNS", "SELECT", "TEXT_COLUMNS", "FactReads", "fact_from_row"]
