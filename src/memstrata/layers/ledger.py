"""The operation ledger: idempotency keys for side effects (DESIGN §2, §3).

Contract:
- ``begin(scope, key, intent=...)`` is idempotent across threads, processes
  and restarts: the first call records a *pending* intent; every later call
  returns the existing operation with its status (``resumed=True``), never a
  new intent. The key is unique per (tenant, scope) by primary key.
- A key names one side effect, and a restart never invents a new intent: beginning an
  existing key with other words for the intent returns the stored operation (its intent
  kept) with the words given in ``requested_intent``, so the caller sees the mismatch (a
  reworded restart resumes; another side effect needs a new key). Intents are compared as
  stored (secrets redacted) with runs of whitespace and the ends ignored; case counts.
- Who holds a pending operation is the run that began it (its ``run_id``; calls without
  a run are one holder). Beginning it again:
  - from the run that holds it returns it as ``pending`` and renews its lease;
  - from another run while the holder is *live* (its run has not ended in the runs
    table, :func:`memstrata.layers.runs.run_ended`, and the operation is younger than the
    lease, :data:`PENDING_LEASE`, counted from its begin or its holder's last begin)
    reports ``in_progress``: the holder is at work, do not repeat it; nothing is stored;
  - otherwise (the holder's run ended, or it went quiet for a lease: a process that died
    never ends its run) the operation becomes ``unknown``: the side effect may or may
    not have happened. ``unknown`` stays until someone settles it: ``complete`` if the
    external system shows it happened, else ``fail`` — after which ``begin`` retries it.
- ``complete`` records success and the external reference (idempotent for
  the same ref; a different ref for an already-succeeded key is a Conflict);
  ``fail`` records the error; beginning a failed key again retries it (pending, held
  by the run that begins it).
- ``in_progress`` is a reported status, never stored: ``get`` and ``list`` show the
  stored ``pending``.
- A secret in an intent, external reference or error is redacted; a key holding one is
  refused (:func:`memstrata.governance.safety.refuse_secret`).
"""

from __future__ import annotations

import builtins
from datetime import datetime, timedelta
from typing import Any

from ..calls import checked_calls
from ..clock import Clock, from_text
from ..errors import Conflict, NotFound
from ..governance.safety import redact_secrets, refuse_secret
from ..inputs import MAX_TEXT, choice_arg, int_arg, text_arg
from ..models import Operation, Scope, make_scope
from ..scoping import SCOPE_COLUMNS, exact_sql, scope_from_row, scope_values
from ..store.base import Database, Row, Tx
from .runs import run_ended, run_id_arg
from .selector import Selector

_COLUMNS = "key, intent, status, external_ref, error, attempts, run_id, created_at, updated_at"


_TEXT_COLUMNS = ("key", "intent", "external_ref", "error")
_STATUSES = ("pending", "succeeded", "failed", "unknown")
#: How long a pending operation of a run that has not ended counts as in progress, from
#: its begin (or its holder's latest begin): a run that died never records its end.
PENDING_LEASE = timedelta(minutes=15)


def _text(value: Any, field: str, max_len: int = MAX_TEXT) -> str:
    text = text_arg(value, field, max_len=max_len)
    # a ledger row outlives the run: a secret in an intent or error is redacted, never
    # stored; one in a key (an identifier) is refused
    return refuse_secret(text, field) if field == "key" else redact_secrets(text)[0]


def _words(text: str) -> list[str]:
    """An intent as compared with another: its words (whitespace runs and ends ignored)."""
    return text.split()


def operation_from_row(row: Row, resumed: bool = False, status: str | None = None,
                       requested: str | None = None) -> Operation:
    """The operation a row stores (``status``: the one to report instead, ``in_progress``;
    ``requested``: the other words a begin gave for its intent)."""
    return Operation.model_construct(
        key=row["key"], scope=scope_from_row(row), intent=row["intent"],
        status=row["status"] if status is None else status,
        external_ref=row["external_ref"], error=row["error"], attempts=int(row["attempts"]),
        run_id=row["run_id"], created_at=from_text(row["created_at"]),
        updated_at=from_text(row["updated_at"]), resumed=resumed, requested_intent=requested,
    )


@checked_calls
class Ledger:
    """The ledger layer; reached as ``mem.ledger`` and ``run.ledger``."""

    table = "operations"

    def __init__(self, db: Database, clock: Clock, *,
                 lease: timedelta = PENDING_LEASE) -> None:
        self._db = db
        self._clock = clock
        self.lease = lease

    def _row(self, tx: Tx, scope: Scope, key: str) -> Row | None:
        where, params = exact_sql(scope)
        return tx.one(f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM operations r WHERE {where} "
                      "AND r.key = ?", (*params, key))

    def begin(self, scope: Scope | dict[str, Any], key: str, *, intent: str,
              run_id: str | None = None) -> Operation:
        """Record the intent for ``key`` once; later calls return the existing operation
        (``in_progress`` while another live run holds it; see the module docstring)."""
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
            differs = intent if _words(row["intent"]) != _words(intent) else None
            status = row["status"]
            if status == "pending" and row["run_id"] == run_id:
                # the holder begins it again: still at work; its lease runs from now
                tx.execute(f"UPDATE operations SET updated_at = ? WHERE {bare} AND key = ?",
                           (now, *params, key))
            elif status == "pending":
                if self._live(tx, scope, row, now):
                    return operation_from_row(row, resumed=True, status="in_progress",
                                              requested=differs)
                tx.execute(f"UPDATE operations SET status = 'unknown', attempts = attempts + 1, "
                           f"updated_at = ? WHERE {bare} AND key = ?",
                           (now, *params, key))
            elif status == "failed":
                tx.execute(f"UPDATE operations SET status = 'pending', attempts = attempts + 1, "
                           f"run_id = ?, error = NULL, updated_at = ? "
                           f"WHERE {bare} AND key = ?",
                           (run_id, now, *params, key))
            row = self._row(tx, scope, key)
        assert row is not None
        return operation_from_row(row, resumed=True, requested=differs)

    def _live(self, tx: Tx, scope: Scope, row: Row, now: datetime) -> bool:
        """Whether the run holding pending ``row`` is still at work: its run has not ended
        and its lease (from its latest begin) has not run out."""
        last = from_text(row["updated_at"])
        assert last is not None
        return now - last < self.lease and not run_ended(tx, scope, row["run_id"])

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


__all__ = ["PENDING_LEASE", "Ledger", "operation_from_row"]
