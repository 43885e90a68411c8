"""The operation ledger: idempotency keys for side effects (DESIGN §2, §3).

Contract:
- ``begin(scope, key, intent=...)`` is idempotent across threads, processes
  and restarts: the first call records a *pending* intent; every later call
  returns the existing operation with its status (``resumed=True``), never a
  new intent. The key is unique per (tenant, scope) by primary key.
- An operation still pending when another run begins the same key was left
  by a run that died or lost track of it: it reads as ``unknown`` (the side
  effect may or may not have happened — reconcile with the external system
  before acting again).
- ``complete`` records success and the external reference (idempotent for
  the same ref; a different ref for an already-succeeded key is a Conflict);
  ``fail`` records the error; beginning a failed key again retries it.
- A secret in an intent, external reference or error is redacted; a key holding one is
  refused (:func:`memstrata.governance.safety.refuse_secret`).
"""

from __future__ import annotations

import builtins
from typing import Any

from ..calls import checked_calls
from ..clock import Clock, from_text
from ..errors import Conflict, NotFound
from ..governance.safety import redact_secrets, refuse_secret
from ..inputs import MAX_TEXT, choice_arg, int_arg, text_arg
from ..models import Operation, Scope, make_scope
from ..scoping import SCOPE_COLUMNS, exact_sql, scope_from_row, scope_values
from ..store.base import Database, Row, Tx
from .runs import run_id_arg
from .selector import Selector

_COLUMNS = "key, intent, status, external_ref, error, attempts, run_id, created_at, updated_at"


_TEXT_COLUMNS = ("key", "intent", "external_ref", "error")
_STATUSES = ("pending", "succeeded", "failed", "unknown")


def _text(value: Any, field: str, max_len: int = MAX_TEXT) -> str:
    text = text_arg(value, field, max_len=max_len)
    # a ledger row outlives the run: a secret in an intent or error is redacted, never
    # stored; one in a key (an identifier) is refused
    return refuse_secret(text, field) if field == "key" else redact_secrets(text)[0]


def operation_from_row(row: Row, resumed: bool = False) -> Operation:
    return Operation.model_construct(
        key=row["key"], scope=scope_from_row(row), intent=row["intent"], status=row["status"],
        external_ref=row["external_ref"], error=row["error"], attempts=int(row["attempts"]),
        run_id=row["run_id"], created_at=from_text(row["created_at"]),
        updated_at=from_text(row["updated_at"]), resumed=resumed,
    )


@checked_calls
class Ledger:
    """The ledger layer; reached as ``mem.ledger`` and ``run.ledger``."""

    table = "operations"

    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def _row(self, tx: Tx, scope: Scope, key: str) -> Row | None:
        where, params = exact_sql(scope)
        return tx.one(f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM operations r WHERE {where} "
                      "AND r.key = ?", (*params, key))

    def begin(self, scope: Scope | dict[str, Any], key: str, *, intent: str,
              run_id: str | None = None) -> Operation:
        """Record the intent for ``key`` once; later calls return the existing operation."""
        scope = make_scope(scope)
        key = _text(key, "key", 500)
        intent = _text(intent, "intent")
        run_id = None if run_id is None else run_id_arg(run_id)
        now = self._clock.now()
        bare, params = exact_sql(scope, "")
        with self._db.transaction(scope.tenant) as tx:
            inserted = tx.execute(
                f"INSERT INTO operations ({SCOPE_COLUMNS}, {_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, 'pending', NULL, NULL, 1, ?, ?, ?) "
                "ON CONFLICT (tenant, scope_key, key) DO NOTHING",
                (*scope_values(scope), key, intent, run_id, now, now),
            )
            row = self._row(tx, scope, key)
            assert row is not None
            if inserted == 1:
                return operation_from_row(row)
            if row["status"] == "pending" and row["run_id"] != run_id:
                tx.execute(f"UPDATE operations SET status = 'unknown', attempts = attempts + 1, "
                           f"updated_at = ? WHERE {bare} AND key = ?",
                           (now, *params, key))
            elif row["status"] == "failed":
                tx.execute(f"UPDATE operations SET status = 'pending', attempts = attempts + 1, "
                           f"run_id = ?, error = NULL, updated_at = ? "
                           f"WHERE {bare} AND key = ?",
                           (run_id, now, *params, key))
            row = self._row(tx, scope, key)
        assert row is not None
        return operation_from_row(row, resumed=True)

    def complete(self, scope: Scope | dict[str, Any], key: str, *,
                 external_ref: str | None = None) -> Operation:
        """Record that the side effect happened (idempotent for the same ref)."""
        scope = make_scope(scope)
        ref = _text(external_ref, "external_ref", 1000) if external_ref is not None else None
        return self._finish(scope, key, "succeeded", external_ref=ref)

    def fail(self, scope: Scope | dict[str, Any], key: str, *, error: str) -> Operation:
        """Record that the side effect did not happen; ``begin`` may retry it."""
        scope = make_scope(scope)
        return self._finish(scope, key, "failed", error=_text(error, "error"))

    def _finish(self, scope: Scope, key: str, status: str, *, external_ref: str | None = None,
                error: str | None = None) -> Operation:
        key = _text(key, "key", 500)
        bare, params = exact_sql(scope, "")
        with self._db.transaction(scope.tenant) as tx:
            row = self._row(tx, scope, key)
            if row is None:
                raise NotFound(f"no operation {key!r} in {scope}",
                               hint="begin the operation before completing it")
            if row["status"] == "succeeded":
                if status == "succeeded" and external_ref in (None, row["external_ref"]):
                    return operation_from_row(row, resumed=True)
                raise Conflict(f"operation {key!r} already succeeded "
                               f"(external_ref={row['external_ref']!r})")
            tx.execute(f"UPDATE operations SET status = ?, external_ref = COALESCE(?, "
                       f"external_ref), error = ?, updated_at = ? "
                       f"WHERE {bare} AND key = ?",
                       (status, external_ref, error, self._clock.now(), *params, key))
            row = self._row(tx, scope, key)
        assert row is not None
        return operation_from_row(row)

    def get(self, scope: Scope | dict[str, Any], key: str) -> Operation | None:
        scope = make_scope(scope)
        with self._db.transaction(scope.tenant, write=False) as tx:
            row = self._row(tx, scope, _text(key, "key", 500))
        return operation_from_row(row) if row else None

    def list(self, scope: Scope | dict[str, Any], *, status: str | None = None,
             limit: int = 200) -> list[Operation]:
        """The scope's operations, oldest first (optionally of one status)."""
        scope = make_scope(scope)
        limit = int_arg(limit, "limit", low=0, high=100_000)
        where, params = exact_sql(scope)
        sql = f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM operations r WHERE {where}"
        if status is not None:
            status = choice_arg(status, "status", _STATUSES,
                                hint="e.g. status='pending', or leave it out for every status")
            sql += " AND r.status = ?"
            params.append(status)
        sql += " ORDER BY r.created_at LIMIT ?"
        with self._db.transaction(scope.tenant, write=False) as tx:
            rows = tx.all(sql, (*params, limit))
        return [operation_from_row(r) for r in rows]


    def forget_rows(self, tx: Tx, sel: Selector, *, dry_run: bool) -> builtins.list[str]:
        """Delete (unless ``dry_run``) the operations whose key, intent, reference or error
        contains ``sel.match`` (all of the scope's without one; none for a subject or ids)."""
        if sel.ids is not None or sel.subject is not None:
            return []
        where, params = sel.where(_TEXT_COLUMNS)
        rows = tx.all(f"SELECT r.key AS key FROM operations r WHERE {where}", params)
        if rows and not dry_run:
            tx.execute(f"DELETE FROM operations AS r WHERE {where}", params)
        return [r["key"] for r in rows]


__all__ = ["Ledger", "operation_from_row"]
