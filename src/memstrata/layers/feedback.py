"""Feedback on recalled items (DESIGN §6.7); the only writer of ``feedback``.

Contract:
- ``record(ref, signal, scope=...)`` stores one signal (useful | contradicted | superseded
  | ignored) for ``fact:ID`` or ``episode:ID``, with an optional note (screened for
  secrets). The record must apply to the caller's scope and be readable by its principal,
  else :class:`NotFound`: nobody can weigh on a record they cannot see.
- For a fact the signal has an effect, in the same transaction
  (:meth:`memstrata.layers.facts.Facts.apply_feedback`): useful confirms it, contradicted
  demotes it, and repeated contradiction retires it. Only the fact's own scope (or the
  operator, without a scope) has that effect: on a fact shared beyond the caller's scope
  (:func:`~memstrata.scoping.shared_beyond`: a project-wide fact seen by one user) the
  signal is recorded (as ``<signal>:shared``) and changes nothing, now or later: it never
  counts toward the contradictions that retire the fact, so one user's agents cannot
  demote or retire what others rely on (retiring it is a reviewer's act).
- ``forget_refs`` deletes the feedback of forgotten records; ``forget_rows`` deletes the
  feedback on the scope's records whose note contains a forgotten text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..clock import Clock
from ..errors import ValidationError
from ..governance.safety import screened_arg
from ..inputs import MAX_TEXT, text_arg
from ..models import Scope
from ..scoping import resolve_caller, shared_beyond
from ..store.base import Database, Tx
from ..store.sql import chunks, contains_sql, like_param, marks
from .episodes import Episodes
from .facts import Facts
from .selector import Selector

SIGNALS = ("useful", "contradicted", "superseded", "ignored")
#: Stored after the signal of feedback on a fact shared beyond the caller's scope: kept
#: for people to read, and never counted toward retiring the fact.
SHARED = ":shared"


class Feedback:
    """Feedback signals; reached through ``mem.feedback(ref, signal)``."""

    table = "feedback"

    def __init__(self, db: Database, clock: Clock, facts: Facts, episodes: Episodes, *,
                 default_tenant: str = "default") -> None:
        self._db = db
        self._clock = clock
        self._facts = facts
        self._episodes = episodes
        self._default_tenant = default_tenant

    def record(self, ref: str, signal: str, *, scope: Scope | dict[str, Any] | None = None,
               principal: str | None = None, note: str | None = None,
               tenant: str | None = None) -> dict[str, Any]:
        """Record how a recalled item served; returns ``{ref, signal, action}``."""
        if signal not in SIGNALS:
            raise ValidationError(f"signal must be one of {', '.join(SIGNALS)}, got {signal!r}",
                                  hint="useful: it helped; contradicted: it was wrong; "
                                       "superseded: something newer replaced it; ignored: "
                                       "it was not used")
        ref = text_arg(ref, "ref", max_len=200, hint="fact:ID or episode:ID")
        layer, _, ident = ref.partition(":")
        if layer not in ("fact", "episode") or not ident:
            raise ValidationError(f"feedback takes fact:ID or episode:ID refs, got {ref!r}",
                                  hint="pass the ref of a fact or episode hit as recall or "
                                       "search returned it")
        if note is not None:
            note = screened_arg(note, "note", max_len=MAX_TEXT)
        tenant, sc = resolve_caller(scope, tenant, self._default_tenant)
        now = self._clock.now()
        with self._db.transaction(tenant) as tx:
            if layer == "fact":
                fact = self._facts.get_in(tx, tenant, ident, sc, principal)
            else:
                self._episodes.get(ident, sc, principal=principal, tenant=tenant)
                fact = None
            ref = f"{layer}:{ident}"
            applies = fact is None or sc is None or not shared_beyond(fact.scope, sc)
            tx.execute("INSERT INTO feedback (tenant, ref, signal, note, created_at) "
                       "VALUES (?, ?, ?, ?, ?)",
                       (tenant, ref, signal if applies else signal + SHARED, note, now))
            action = "recorded"
            if fact is not None and applies:
                row = tx.one("SELECT count(*) AS n FROM feedback WHERE tenant = ? AND ref = ? "
                             "AND signal = 'contradicted'", (tenant, ref))
                action = self._facts.apply_feedback(
                    tx, fact, signal, contradictions=int(row["n"]) if row else 0, now=now)
        return {"ref": ref, "signal": signal, "action": action}

    def forget_rows(self, tx: Tx, sel: Selector, refs: Sequence[str], *,
                    dry_run: bool) -> int:
        """Delete (unless ``dry_run``) the feedback given on these (forgotten) records, and
        the feedback on records the scope owns whose note contains ``sel.match`` (the notes
        of other scopes' feedback are not this scope's to delete): each row counted once,
        so a dry run counts what the forget deletes."""
        found = 0
        noted: tuple[str, list[Any]] | None = None
        if sel.match is not None:
            owned, params = sel.owned()
            noted = (f"note IS NOT NULL AND {contains_sql('note')} AND ("
                     f"ref IN (SELECT 'fact:' || r.id FROM facts r WHERE {owned}) OR "
                     f"ref IN (SELECT 'episode:' || r.id FROM episodes r WHERE {owned}))",
                     [like_param(sel.match), *params, *params])
            found += self._take(tx, f"tenant = ? AND {noted[0]}",
                                [sel.scope.tenant, *noted[1]], dry_run)
        for chunk in chunks(list(refs)):
            where = f"tenant = ? AND ref IN ({marks(chunk)})"
            params = [sel.scope.tenant, *chunk]
            if dry_run and noted is not None:  # deleted above by a real forget
                where += f" AND NOT ({noted[0]})"
                params += noted[1]
            found += self._take(tx, where, params, dry_run)
        return found

    @staticmethod
    def _take(tx: Tx, where: str, params: Sequence[Any], dry_run: bool) -> int:
        """Count (``dry_run``) or delete the feedback rows ``where`` selects."""
        if dry_run:
            row = tx.one(f"SELECT count(*) AS n FROM feedback WHERE {where}", params)
            return int(row["n"]) if row else 0
        return tx.execute(f"DELETE FROM feedback WHERE {where}", params)


__all__ = ["SIGNALS", "Feedback"]
