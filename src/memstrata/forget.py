"""Forgetting for real (DESIGN §8): content leaves every place it lives.

Contract:
- ``forget(scope, match=... | subject=... | record_ids=...)`` deletes, within
  the records *owned* by the scope (see :mod:`memstrata.scoping`), matching
  facts (every status, so history rows too), episodes, checkpoint versions,
  ledger operations, procedures, scratch entries and feedback rows; the
  full-text entries and vectors go with their rows (schema triggers).
  Without a selector it forgets everything the scope owns.
- Refused (AccessDenied) when the scope names neither user nor project,
  unless ``force=True``.
- One maintenance transaction: all or nothing. References left pointing at a
  forgotten record are cleared, so no orphan history remains.
- Afterwards the backend compacts (FTS optimize, WAL truncate, secure
  delete), so the forgotten text is not in the database file's bytes.
- Returns a ForgetReport with counts per layer; ``dry_run`` counts only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import AccessDenied, ValidationError
from .models import ForgetReport, Scope, clean_text
from .scoping import contains_sql, like_param, owned_sql
from .store.base import Tx

if TYPE_CHECKING:
    from .runtime import Runtime
    from .scratch import ScratchStore

_TEXT_COLUMNS = {
    "facts": ("claim", "subject", "attribute", "evidence", "source", "reason"),
    "episodes": ("text", "event", "evidence", "outcome", "source"),
    "checkpoints": ("data", "task"),
    "operations": ("key", "intent", "external_ref", "error"),
    "procedures": ("data", "name"),
}


def forget(rt: Runtime, scratch: ScratchStore, scope: Scope, *, match: str | None = None,
           subject: str | None = None, record_ids: Sequence[str] | None = None,
           force: bool = False, dry_run: bool = False) -> ForgetReport:
    if scope.is_unscoped and not force:
        raise AccessDenied(
            f"refusing to forget across the whole tenant {scope.tenant!r}",
            hint="name a user or project, or pass force=True (--force) deliberately",
        )
    if match is not None:
        try:
            match = clean_text(match, field="match", max_len=1000)
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc
    if subject is not None:
        subject = " ".join(str(subject).lower().split())
        if not subject:
            raise ValidationError("subject must not be empty")
    ids = None
    if record_ids is not None:
        if isinstance(record_ids, str):
            raise ValidationError("record_ids must be a list of ids")
        ids = [str(r).split(":", 1)[-1] for r in record_ids]
        if not ids:
            raise ValidationError("record_ids is empty")

    counts: dict[str, int] = {}
    removed: list[str] = []
    with rt.db.transaction(scope.tenant, maintenance=True) as tx:
        for table in ("facts", "episodes", "checkpoints", "operations", "procedures"):
            where, params = _selector(table, scope, match, subject, ids)
            if where is None:
                counts[table] = 0
                continue
            key = {"facts": "id", "episodes": "id", "checkpoints": "task",
                   "operations": "key", "procedures": "name"}[table]
            rows = tx.all(f"SELECT r.{key} AS k FROM {table} r WHERE {where}", params)
            counts[table] = len(rows)
            if table in ("facts", "episodes"):
                removed += [f"{table[:-1]}:{r['k']}" for r in rows]
            if not dry_run and rows:
                tx.execute(f"DELETE FROM {table} WHERE rowid IN (SELECT r.rowid FROM {table} r "
                           f"WHERE {where})" if rt.db.dialect == "sqlite" else
                           f"DELETE FROM {table} r WHERE {where}", params)
        if not dry_run and removed:
            _clear_dangling(tx, scope.tenant, [r.split(":", 1)[1] for r in removed])
            tx.execute("DELETE FROM feedback WHERE tenant = ? AND ref IN (" +
                       ", ".join("?" * len(removed)) + ")", (scope.tenant, *removed))
    if ids is None and subject is None:
        counts["scratch"] = 0 if dry_run else scratch.forget(scope, match)
    else:
        counts["scratch"] = 0
    if not dry_run and any(counts.values()):
        rt.db.compact()
    counts["vectors"] = 0 if dry_run else counts.get("facts", 0) + counts.get("episodes", 0)
    return ForgetReport(scope=scope, counts=counts, ids=removed, dry_run=dry_run)


def _selector(table: str, scope: Scope, match: str | None, subject: str | None,
              ids: list[str] | None) -> tuple[str | None, list[object]]:
    where, params = owned_sql(scope)
    if ids is not None:
        if table not in ("facts", "episodes"):
            return None, []
        where += f" AND r.id IN ({', '.join('?' * len(ids))})"
        params += ids
    if subject is not None:
        if table == "facts":
            where += " AND r.subject = ?"
            params.append(subject)
        elif table == "episodes":
            where += f" AND {contains_sql('r.text')}"
            params.append(like_param(subject))
        else:
            return None, []
    if match is not None:
        cols = _TEXT_COLUMNS[table]
        where += " AND (" + " OR ".join(contains_sql(f"r.{c}") for c in cols) + ")"
        params += [like_param(match)] * len(cols)
    return where, params


def _clear_dangling(tx: Tx, tenant: str, ids: list[str]) -> None:
    for start in range(0, len(ids), 400):
        chunk = ids[start:start + 400]
        marks = ", ".join("?" * len(chunk))
        tx.execute(f"UPDATE facts SET supersedes = NULL WHERE tenant = ? AND supersedes IN "
                   f"({marks})", (tenant, *chunk))
        tx.execute(f"UPDATE facts SET superseded_by = NULL WHERE tenant = ? AND superseded_by "
                   f"IN ({marks})", (tenant, *chunk))
        tx.execute(f"UPDATE episodes SET supersedes = NULL WHERE tenant = ? AND supersedes IN "
                   f"({marks})", (tenant, *chunk))


__all__ = ["forget"]
