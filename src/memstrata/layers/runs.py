"""Runs: when an agent's run began and ended, and its task; the only writer of ``runs``.

Contract:
- ``start(scope, run_id, task)`` records a run once (idempotent for the same id; starting
  an ended run again reopens it: the run is working again); ``end(scope, run_id)``
  records its end. A run is *open* from its start to its end; it has *ended* when the
  table records an end (:func:`run_ended`, the one rule the ledger and the scratchpad ask).
  A run that was never recorded has not ended. A run id names a run of one scope: another
  scope's run of the same id is another run, with its own scratchpad. A run's scratchpad
  is discarded by :class:`memstrata.memory.Run` when it ends; its checkpoint and ledger
  entries stay.
- The task name is screened like every identifier: one holding a secret is refused.
- ``forget_rows`` deletes the runs of a scope (all of them, or those whose task contains a
  ``match``), so a forgotten task name does not survive in the run log.
"""

from __future__ import annotations

from typing import Any

from ..calls import checked_calls
from ..clock import Clock
from ..governance.safety import identifier_arg
from ..inputs import MAX_NAME
from ..models import Scope
from ..scoping import SCOPE_COLUMNS, scope_values
from ..store.base import Database, Tx
from .checkpoints import task_arg
from .selector import Selector


def run_id_arg(run_id: Any) -> str:
    """The one rule for a run id (runs, the ledger, ``mem.run``): a name of at most
    ``MAX_NAME`` characters that holds no secret."""
    return identifier_arg(run_id, "run_id", max_len=MAX_NAME)


def run_ended(tx: Tx, scope: Scope, run_id: str | None) -> bool:
    """Inside the caller's transaction: whether the runs table records the end of run
    ``run_id`` of ``scope`` (False for a run still open, and for one never recorded)."""
    if run_id is None:
        return False
    row = tx.one("SELECT ended_at FROM runs WHERE tenant = ? AND scope_key = ? AND run_id = ?",
                 (scope.tenant, scope.key, run_id))
    return row is not None and row["ended_at"] is not None


@checked_calls
class Runs:
    """The run log."""

    table = "runs"

    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def start(self, scope: Scope, run_id: str, task: str | None) -> None:
        """Record that run ``run_id`` of ``scope`` began (working on ``task``)."""
        run_id = run_id_arg(run_id)
        if task is not None:
            task = task_arg(task)
        with self._db.transaction(scope.tenant) as tx:
            # a run entered again (a service's run named by its key, a resumed run id) is
            # working again: its end is cleared, so its scratchpad takes writes
            tx.execute(f"INSERT INTO runs ({SCOPE_COLUMNS}, run_id, task, started_at) VALUES "
                       "(?, ?, ?, ?, ?, ?, ?, ?) "
                       "ON CONFLICT (tenant, scope_key, run_id) DO UPDATE SET ended_at = NULL",
                       (*scope_values(scope), run_id, task, self._clock.now()))

    def end(self, scope: Scope, run_id: str) -> None:
        """Record the end of the run."""
        with self._db.transaction(scope.tenant) as tx:
            tx.execute("UPDATE runs SET ended_at = ? WHERE tenant = ? AND scope_key = ? AND "
                       "run_id = ?", (self._clock.now(), scope.tenant, scope.key, run_id))

    def ended(self, scope: Scope, run_id: str) -> bool:
        """Whether the run has ended (:func:`run_ended`)."""
        run_id = run_id_arg(run_id)
        with self._db.transaction(scope.tenant, write=False) as tx:
            return run_ended(tx, scope, run_id)

    def forget_rows(self, tx: Tx, sel: Selector, *, dry_run: bool) -> list[str]:
        """Delete (unless ``dry_run``) the scope's runs whose task contains ``sel.match``
        (every run of the scope without a match; none for a subject or ids)."""
        if sel.ids is not None or sel.subject is not None:
            return []
        where, params = sel.where(("task",))
        rows = tx.all(f"SELECT r.run_id AS run_id FROM runs r WHERE {where}", params)
        if rows and not dry_run:
            tx.execute(f"DELETE FROM runs AS r WHERE {where}", params)
        return [r["run_id"] for r in rows]


__all__ = [
    "Runs",
    "run_ended",
    "run_id_arg",
]
