"""Procedures in the store: versioned workflows with eval-gated activation (DESIGN §2, §3);
the only writer of ``procedures``.

The model (:class:`Procedure`, :func:`evaluate`, :func:`run_cases`) is pure and lives in
:mod:`memstrata.layers.procedure_model`.

Store contract (:class:`Procedures`, reached as ``mem.procedures``):

- ``propose`` stores a new version with status ``proposed`` (whatever status
  the input carried); anyone, an agent included, may propose. The version is
  ``max + 1`` when omitted; an existing version number is a Conflict unless
  the content is identical (then the stored version is returned: adding the
  same file twice is harmless). Version content is never changed afterwards.
  Its text is screened like every stored string: secrets are redacted (description,
  steps, cases), and a name holding one is refused.
- ``activate(name, version, activated_by=PERSON)`` runs every case of that
  version; any failure (or no cases at all) raises
  :class:`~memstrata.errors.ActivationRefused` with the :class:`CaseReport`
  in ``details["report"]``, records a ``refused`` event and changes nothing
  else. Activation is a person's act: an ``activated_by`` of ``agent`` or
  ``agent:*`` is AccessDenied.
- Exactly one active version per (tenant, scope, name) — a partial unique
  index — and the previously active version becomes ``inactive``.
- ``rollback(name, by=PERSON)`` is undo: the active version becomes
  ``rolled_back`` and the most recently active ``inactive`` version is active
  again; rolling back twice goes two activations back. Nothing to go back to
  is a Conflict.
- Every proposal, activation, refusal, deactivation and rollback is an event
  in ``history(name)`` (oldest first), kept in the version rows' JSON
  (:func:`~memstrata.store.sql.json_text`).
- Scope: procedures belong to the tenant by default (``Scope(tenant=...)``);
  pass ``scope=`` for a user- or project-specific procedure. Management calls
  (propose, get, versions, list, activate, rollback, history) address exactly
  that scope; ``active`` and ``next_step`` read like every other layer — the
  most specific scope that applies to the request wins.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ..calls import checked_calls
from ..clock import Clock, from_text
from ..errors import ActivationRefused, Conflict, NotFound, ValidationError
from ..governance.safety import person_arg, redact_value, refuse_secret
from ..inputs import MAX_NAME, int_arg, text_arg
from ..models import Scope, _Model, build, make_scope
from ..scoping import SCOPE_COLUMNS, applies_sql, exact_sql, scope_from_row, scope_values
from ..store.base import Database, Row, Tx
from ..store.sql import json_text
from .procedure_model import (
    CaseReport,
    EventAction,
    Procedure,
    ProcedureDiff,
    ProcedureState,
    ProcedureStatus,
    StepDecision,
    diff,
    evaluate,
    load_procedure,
    run_cases,
    state_arg,
)
from .selector import Selector, kept_versions, versions_where


# -- the store layer ------------------------------------------------------
class ProcedureEvent(_Model):
    """One entry of a procedure's history."""

    seq: int
    version: int
    action: EventAction
    at: datetime
    by: str | None = None
    detail: str | None = None


_COLUMNS = "name, version, status, data, owner, created_at, activated_at, activated_by"

def _data(row: Row) -> dict[str, Any]:
    raw = row["data"]
    return dict(raw) if isinstance(raw, dict) else dict(json.loads(raw))


def procedure_from_row(row: Row) -> Procedure:
    data = _data(row)
    events = data.get("events", [])
    proposed = next((e for e in events if e["action"] == "proposed"), None)
    return build(Procedure, **data["procedure"]).model_copy(update={
        "version": int(row["version"]), "status": row["status"], "scope": scope_from_row(row),
        "owner": row["owner"], "created_at": from_text(row["created_at"]),
        "activated_at": from_text(row["activated_at"]), "activated_by": row["activated_by"],
        "proposed_by": proposed.get("by") if proposed else None,
    })


@checked_calls
class Procedures:
    """The procedures layer; reached as ``mem.procedures``."""

    table = "procedures"

    def __init__(self, db: Database, clock: Clock, *, default_tenant: str = "default") -> None:
        self._db = db
        self._clock = clock
        self._default_tenant = default_tenant

    def _scope(self, scope: Scope | dict[str, Any] | None) -> Scope:
        return make_scope(scope) if scope is not None else Scope(tenant=self._default_tenant)

    # -- writes -----------------------------------------------------------
    def propose(self, proc: Procedure | Mapping[str, Any] | str | Path, *,
                scope: Scope | dict[str, Any] | None = None, by: str | None = None,
                proposed_by: str | None = None) -> Procedure:
        """Store a new version with status ``proposed``; returns it as stored. ``by`` names
        who proposed it (``proposed_by=`` is the older spelling; default: the owner)."""
        if not isinstance(proc, Procedure):
            proc = load_procedure(proc)
        sc = self._scope(scope)
        refuse_secret(proc.name, "procedure name")
        named = _one_of(by, proposed_by, "proposed_by")
        by = (None if named is None else _text(named, "by")) or proc.owner
        now = self._clock.now()
        with self._db.transaction(sc.tenant) as tx:
            rows = self._rows(tx, sc, proc.name)
            version = proc.version or max((int(r["version"]) for r in rows), default=0) + 1
            # a procedure's text outlives the run like a fact: secrets are redacted
            content = {**redact_value(proc.content()), "version": version}
            for r in rows:
                if int(r["version"]) == version:
                    if _data(r)["procedure"] == content:
                        return procedure_from_row(r)
                    raise Conflict(f"procedure {proc.name} v{version} already exists with "
                                   "different content",
                                   hint="omit version to get the next one, or pick a new one")
            seq = _next_seq(rows)
            data = {"procedure": content, "events": [_event(seq, version, "proposed", now, by)]}
            tx.execute(f"INSERT INTO procedures ({SCOPE_COLUMNS}, {_COLUMNS}) VALUES "
                       "(?, ?, ?, ?, ?, ?, ?, 'proposed', ?, ?, ?, NULL, NULL)",
                       (*scope_values(sc), proc.name, version, json_text(data), proc.owner,
                        now))
            row = self._row(tx, sc, proc.name, version)
        return procedure_from_row(row)

    def activate(self, name: str, version: int, *, by: str | None = None,
                 activated_by: str | None = None,
                 scope: Scope | dict[str, Any] | None = None) -> Procedure:
        """Make ``version`` the active one if every case passes, else ActivationRefused.
        ``by`` names the person (``activated_by=`` is the older spelling)."""
        who = _person(_one_of(by, activated_by, "activated_by"), "by")
        version = int_arg(version, "version", low=1)
        sc = self._scope(scope)
        with self._db.transaction(sc.tenant, write=False) as tx:
            proc = procedure_from_row(self._row(tx, sc, name, version))
        if proc.status == "active":
            return proc
        report = run_cases(proc)
        now = self._clock.now()
        if not report.ok:
            with self._db.transaction(sc.tenant) as tx:
                rows = self._rows(tx, sc, name)
                self._add_event(tx, sc, _by_version(rows, version),
                                _event(_next_seq(rows), version, "refused", now, who,
                                       report.summary()))
            raise ActivationRefused(
                f"{name} v{version} was not activated: {report.summary()}",
                hint="fix the procedure or its cases and propose a new version",
                report=report)
        with self._db.transaction(sc.tenant) as tx:
            rows = self._rows(tx, sc, name)
            self._switch(tx, sc, rows, version, now, who, "activated", None)
            row = self._row(tx, sc, name, version)
        return procedure_from_row(row)

    def rollback(self, name: str, *, by: str | None = None,
                 scope: Scope | dict[str, Any] | None = None) -> Procedure:
        """Undo the last activation: restore the previously active version."""
        who = _person(by, "by")
        sc = self._scope(scope)
        now = self._clock.now()
        with self._db.transaction(sc.tenant) as tx:
            rows = self._rows(tx, sc, name)
            if not rows:
                raise NotFound(f"no procedure {name!r} in {sc}")
            current = next((r for r in rows if r["status"] == "active"), None)
            if current is None:
                raise Conflict(f"procedure {name} has no active version to roll back")
            previous = [r for r in rows if r["status"] == "inactive"]
            if not previous:
                raise Conflict(f"procedure {name} v{current['version']} has no earlier active "
                               "version to restore")
            target = max(previous, key=_last_activation)
            self._switch(tx, sc, rows, int(target["version"]), now, who, "activated",
                         f"rollback from v{current['version']}", displaced="rolled_back")
            row = self._row(tx, sc, name, int(target["version"]))
        return procedure_from_row(row)

    def _switch(self, tx: Tx, sc: Scope, rows: list[Row], version: int, now: datetime,
                who: str, action: EventAction, detail: str | None, *,
                displaced: ProcedureStatus = "inactive") -> None:
        target = _by_version(rows, version)
        seq = _next_seq(rows)
        bare, params = exact_sql(sc, "")
        for r in rows:
            if r["status"] == "active" and int(r["version"]) != version:
                # the old one steps down first: the partial unique index allows one active
                tx.execute(f"UPDATE procedures SET status = ? WHERE {bare} AND name = ? "
                           "AND version = ?", (displaced, *params, r["name"], r["version"]))
                act: EventAction = "rolled_back" if displaced == "rolled_back" else "deactivated"
                self._add_event(tx, sc, r, _event(seq, int(r["version"]), act, now, who,
                                                  f"replaced by v{version}"))
                seq += 1
        tx.execute(f"UPDATE procedures SET status = 'active', activated_at = ?, activated_by = ? "
                   f"WHERE {bare} AND name = ? AND version = ?",
                   (now, who, *params, target["name"], version))
        self._add_event(tx, sc, self._row(tx, sc, target["name"], version),
                        _event(seq, version, action, now, who, detail))

    def _add_event(self, tx: Tx, sc: Scope, row: Row, event: dict[str, Any]) -> None:
        data = _data(row)
        data["events"] = [*data.get("events", []), event]
        bare, params = exact_sql(sc, "")
        tx.execute(f"UPDATE procedures SET data = ? WHERE {bare} AND name = ? AND version = ?",
                   (json_text(data), *params, row["name"], row["version"]))

    # -- reads ------------------------------------------------------------
    def _rows(self, tx: Tx, sc: Scope, name: str) -> list[Row]:
        where, params = exact_sql(sc)
        return tx.all(f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM procedures r WHERE {where} "
                      "AND r.name = ? ORDER BY r.version", (*params, _text(name, "name")))

    def _row(self, tx: Tx, sc: Scope, name: str, version: int) -> Row:
        version = int_arg(version, "version", low=1)
        name = _text(name, "name")
        where, params = exact_sql(sc)
        row = tx.one(f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM procedures r WHERE {where} "
                     "AND r.name = ? AND r.version = ?", (*params, name, version))
        if row is None:
            raise NotFound(f"no procedure {name} v{version} in {sc}",
                           hint="list versions with `memstrata procedures show NAME`")
        return row

    def get(self, name: str, version: int | None = None, *,
            scope: Scope | dict[str, Any] | None = None) -> Procedure:
        """One version; without ``version`` the active one, else the latest."""
        sc = self._scope(scope)
        with self._db.transaction(sc.tenant, write=False) as tx:
            if version is not None:
                return procedure_from_row(self._row(tx, sc, name, version))
            rows = self._rows(tx, sc, name)
        if not rows:
            raise NotFound(f"no procedure {name!r} in {sc}")
        active = [r for r in rows if r["status"] == "active"]
        return procedure_from_row(active[0] if active else rows[-1])

    def versions(self, name: str, *,
                 scope: Scope | dict[str, Any] | None = None) -> list[Procedure]:
        """Every version, oldest first."""
        sc = self._scope(scope)
        with self._db.transaction(sc.tenant, write=False) as tx:
            rows = self._rows(tx, sc, name)
        if not rows:
            raise NotFound(f"no procedure {name!r} in {sc}")
        return [procedure_from_row(r) for r in rows]

    def active(self, name: str, *,
               scope: Scope | dict[str, Any] | None = None) -> Procedure | None:
        """The active version that applies to ``scope`` (most specific scope wins), or None."""
        sc = self._scope(scope)
        where, params = applies_sql(sc)
        with self._db.transaction(sc.tenant, write=False) as tx:
            row = tx.one(
                f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM procedures r WHERE {where} "
                "AND r.name = ? AND r.status = 'active' ORDER BY "
                "(CASE WHEN r.s_user IS NULL THEN 0 ELSE 1 END + CASE WHEN r.s_project IS NULL "
                "THEN 0 ELSE 1 END + CASE WHEN r.s_agent IS NULL THEN 0 ELSE 1 END) DESC "
                "LIMIT 1", (*params, _text(name, "name")))
        return procedure_from_row(row) if row else None

    def next_step(self, name: str, state: ProcedureState | Mapping[str, Any], *,
                  scope: Scope | dict[str, Any] | None = None) -> StepDecision:
        """Evaluate the active version against ``state``."""
        state = state_arg(state)
        proc = self.active(name, scope=scope)
        if proc is None:
            raise NotFound(f"procedure {name!r} has no active version",
                           hint="activate one with `memstrata procedures activate`")
        return evaluate(proc, state)

    def check(self, name: str, version: int, *,
              scope: Scope | dict[str, Any] | None = None) -> CaseReport:
        """Run a version's cases without activating it."""
        return run_cases(self.get(name, version, scope=scope))

    def diff(self, name: str, v1: int, v2: int, *,
             scope: Scope | dict[str, Any] | None = None) -> ProcedureDiff:
        return diff(self.get(name, v1, scope=scope), self.get(name, v2, scope=scope))

    def history(self, name: str, *,
                scope: Scope | dict[str, Any] | None = None) -> list[ProcedureEvent]:
        """Every proposal, activation, refusal, deactivation and rollback, oldest first."""
        sc = self._scope(scope)
        with self._db.transaction(sc.tenant, write=False) as tx:
            rows = self._rows(tx, sc, name)
        if not rows:
            raise NotFound(f"no procedure {name!r} in {sc}")
        events = [ProcedureEvent(**e) for r in rows for e in _data(r).get("events", [])]
        return sorted(events, key=lambda e: e.seq)

    def forget_rows(self, tx: Tx, sel: Selector, *, dry_run: bool) -> list[str]:
        """Delete (unless ``dry_run``) the versions whose name or data (content and history:
        its strings, not its field names, however the JSON escaped them) contains
        ``sel.match`` (every version the scope owns without a match; none for a subject or
        ids). Returns the names, one per version."""
        if sel.ids is not None or sel.subject is not None:
            return []
        chosen = kept_versions(tx, sel, "procedures", "name", *versions_where(sel, "name"))
        if chosen.rows and not dry_run:
            where, runs = chosen.deletion(sel.scope.tenant)
            tx.executemany(f"DELETE FROM procedures AS r WHERE {where}", runs)
        return [r["name"] for r in chosen.rows]

    # defined last: inside the class body the name shadows the builtin in annotations
    def list(self, *, scope: Scope | dict[str, Any] | None = None) -> list[Procedure]:
        """One entry per name: the active version, else the latest; sorted by name."""
        sc = self._scope(scope)
        where, params = exact_sql(sc)
        with self._db.transaction(sc.tenant, write=False) as tx:
            rows = tx.all(f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM procedures r WHERE {where} "
                          "ORDER BY r.name, r.version", params)
        chosen: dict[str, Row] = {}
        for r in rows:
            if chosen.get(r["name"], {}).get("status") != "active":
                chosen[r["name"]] = r
        return [procedure_from_row(r) for r in chosen.values()]


def _event(seq: int, version: int, action: EventAction, at: datetime, by: str | None,
           detail: str | None = None) -> dict[str, Any]:
    return {"seq": seq, "version": version, "action": action, "at": at.isoformat(), "by": by,
            "detail": detail}


def _next_seq(rows: Sequence[Row]) -> int:
    return max((int(e["seq"]) for r in rows for e in _data(r).get("events", [])), default=0) + 1


def _last_activation(row: Row) -> int:
    return max((int(e["seq"]) for e in _data(row).get("events", [])
                if e["action"] == "activated"), default=0)


def _by_version(rows: Sequence[Row], version: int) -> Row:
    for r in rows:
        if int(r["version"]) == version:
            return r
    raise NotFound(f"no version {version}")


def _text(value: Any, field: str) -> str:
    return text_arg(value, field, max_len=MAX_NAME)


def _one_of(by: str | None, old: str | None, old_name: str) -> str | None:
    if by is not None and old is not None and by != old:
        raise ValidationError(f"by= and {old_name}= name different people", hint="pass one")
    return by if by is not None else old


def _person(value: Any, field: str) -> str:
    return person_arg(value, field, max_len=MAX_NAME,
                      act="an agent may propose a procedure, only a person activates or "
                          "rolls one back")


__all__ = ["ProcedureEvent", "Procedures", "procedure_from_row"]
