"""Task checkpoints: the handoff state a fresh worker resumes from (DESIGN §2, §3).

Contract:
- One current value per field: ``save`` overwrites the fields it is given and
  carries the others forward from the previous version; each save is a new,
  immutable version row (a trigger refuses UPDATE), so history is kept.
- A version's fields are stored as JSON text (:func:`~memstrata.store.sql.json_text`); a
  forget's match is looked for in the task name and the fields' strings.
- ``current(scope, task)`` returns the latest version in full, or None; it is
  read straight from the store, so a brand-new process can resume from it.
- List fields must be lists of strings; text is screened for secrets (redacted); a task
  name holding a secret is refused (an identifier, see ``refuse_secret``).
- ``close(scope, task, outcome=...)`` ends a task with a last ``closed`` version: it leaves
  ``tasks()``, working context and session context, its history stays; saving again
  reopens it; an outcome is also logged as an episode (by the facade's callback, in the
  same transaction: both or neither). Closing a closed task again returns its closing
  version when it names no outcome or the same one (compared with whitespace runs and
  ends ignored); another outcome is a :class:`~memstrata.errors.Conflict` naming both,
  and nothing changes (to record another ending, save, which reopens it, then close).
- Handoffs: the earlier versions of every task and all versions of a closed one are
  searchable (:meth:`Checkpoints.handoffs_in`, read by the ranker when recall is asked for
  the ``handoffs`` layer); what a version is matched by is :meth:`Checkpoints.text_of`,
  in words and, with an embedder, by its vector: each version is embedded when it is
  saved (before the write transaction; again inside it only if another save came
  between), stored through the record index under
  :func:`~memstrata.store.sql.checkpoint_vector_id`, re-made by ``reindex`` and deleted
  with the version. They never enter working or session context.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..calls import checked_calls
from ..clock import Clock, from_text
from ..errors import Conflict, NotFound, ValidationError
from ..governance.safety import identifier_arg, redact_secrets, screened_arg
from ..inputs import MAX_NAME, MAX_TEXT, clean_text, date_arg, text_arg
from ..models import CHECKPOINT_FIELDS, Checkpoint, Scope, make_scope
from ..scoping import SCOPE_COLUMNS, exact_sql, scope_from_row, scope_values
from ..store.base import Database, Row, Tx
from ..store.sql import checkpoint_vector_id, json_text
from .indexing import RecordIndex
from .selector import Selector, Versions, kept_versions, versions_where

_LIST_FIELDS = ("constraints", "plan", "completed", "evidence", "source_refs",
                "pending_identity_changes")
MAX_ITEMS = 200


def task_arg(task: Any) -> str:
    """The one rule for a task name (checkpoints, runs): a non-empty name of at most
    ``MAX_NAME`` characters that holds no secret."""
    return identifier_arg(task, "task", max_len=MAX_NAME,
                          hint="name the task, e.g. release-v17")


def clean_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Checkpoint fields as a save stores them (names, types, sizes checked; secrets
    redacted): a ValidationError before anything is written, for every caller that saves."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if name not in CHECKPOINT_FIELDS:
            raise ValidationError(f"unknown checkpoint field {name!r}",
                                  hint="fields: " + ", ".join(CHECKPOINT_FIELDS))
        try:
            if name in _LIST_FIELDS:
                if isinstance(value, str) or not isinstance(value, list | tuple):
                    raise ValueError(f"{name} must be a list of strings")
                if len(value) > MAX_ITEMS:
                    raise ValueError(f"{name} has {len(value)} items; the limit is {MAX_ITEMS}")
                out[name] = [redact_secrets(clean_text(v, field=name, max_len=MAX_TEXT))[0]
                             for v in value]
            elif value is None:
                out[name] = None
            else:
                out[name] = redact_secrets(clean_text(value, field=name, max_len=MAX_TEXT))[0]
        except ValueError as exc:
            hint = (f"give {name} as a list of strings, e.g. {name}=['first step']"
                    if name in _LIST_FIELDS else
                    f"give {name} as text of at most {MAX_TEXT} characters, without NUL "
                    "or control characters")
            raise ValidationError(str(exc), hint=hint) from exc
    return out


def checkpoint_from_row(row: Row) -> Checkpoint:
    data = json.loads(row["data"])
    closed = data.get("closed") or {}
    return Checkpoint.model_construct(
        scope=scope_from_row(row), task=row["task"], version=int(row["version"]),
        updated_at=from_text(row["updated_at"]), updated_by=row["updated_by"],
        status="closed" if closed else "open", closed_at=from_text(closed.get("at")),
        outcome=closed.get("outcome"),
        **{f: data.get(f, [] if f in _LIST_FIELDS else None) for f in CHECKPOINT_FIELDS},
    )


_SELECT = f"SELECT {SCOPE_COLUMNS}, task, version, data, updated_at, updated_by FROM checkpoints r"
#: True for the row that is its task's latest version (alias ``r``).
_IS_LATEST = ("r.version = (SELECT max(v.version) FROM checkpoints v WHERE v.tenant = r.tenant "
              "AND v.scope_key = r.scope_key AND v.task = r.task)")


@checked_calls
class Checkpoints:
    """The checkpoint layer; reached as ``mem.checkpoints`` and ``run.checkpoint``."""

    table = "checkpoints"

    def __init__(self, db: Database, clock: Clock, *, index: RecordIndex | None = None,
                 on_close: Callable[[Checkpoint], None] | None = None) -> None:
        self._db = db
        self._clock = clock
        #: Where a version's vector goes (none without an embedder).
        self._index = index
        #: Called with the closing version when a task closes with an outcome (the facade
        #: logs it as an episode: this layer writes only its own table).
        self._on_close = on_close

    def save(self, scope: Scope | dict[str, Any], task: str, *, by: str | None = None,
             updated_by: str | None = None, as_of: datetime | str | None = None,
             **fields: Any) -> Checkpoint:
        """Overwrite the given fields of the task's checkpoint; returns the new version.

        ``by`` names who saved it (``updated_by=`` is the older spelling). ``as_of`` dates
        the state when it is older than the save (an import of dated files); default now,
        never in the future."""
        scope = make_scope(scope)
        now = self._clock.now()
        when = date_arg(as_of, "as_of") if as_of is not None else now
        assert when is not None
        if when > now:
            raise ValidationError("as_of is in the future", hint="omit it to date the save now")
        task = task_arg(task)
        if by is not None and updated_by is not None and by != updated_by:
            raise ValidationError("by= and updated_by= name different savers", hint="pass one")
        who = by if by is not None else updated_by
        if who is not None:
            who = text_arg(who, "by", max_len=MAX_NAME)
        if not fields:
            raise ValidationError("save needs at least one field",
                                  hint="fields: " + ", ".join(CHECKPOINT_FIELDS))
        clean = clean_fields(fields)

        def build(prev: Row | None) -> dict[str, Any]:
            data = json.loads(prev["data"]) if prev else {}
            data.pop("closed", None)  # saving again reopens a closed task
            data.update(clean)
            return data

        return checkpoint_from_row(self._write(scope, task, build, when, who))

    def _write(self, scope: Scope, task: str,
               build: Callable[[Row | None], dict[str, Any] | None], when: datetime,
               who: str | None, then: Callable[[Row], None] | None = None) -> Row:
        """Append the version ``build(latest)`` makes (or return the latest one, when it
        makes None) with its vector, then call ``then`` with the new row, in one
        transaction. The vector is made before the transaction from the version read
        then; if another save came between, it is made again inside."""
        index = self._index if self._index is not None and self._index.semantic else None
        vec: Any = None
        basis = -1
        if index is None and self._index is not None:
            self._index.unembedded(scope.tenant)  # a version without a vector: said once
        if index is not None:
            with self._db.transaction(scope.tenant, write=False) as tx:
                prev = self._latest(tx, scope, task)
            data = build(prev)
            if data is not None:
                vec = index.embed([self._text(task, data)])
                basis = int(prev["version"]) if prev else 0
        with self._db.transaction(scope.tenant) as tx:
            prev = self._latest(tx, scope, task)
            data = build(prev)
            if data is None:
                assert prev is not None
                return prev
            row = self._append(tx, scope, task, prev, data, when, who)
            if index is not None:
                if basis != int(row["version"]) - 1:
                    vec = index.embed([self._text(task, data)])
                index.write_vectors(tx, self.table, scope.tenant, [
                    checkpoint_vector_id(scope.key, task, int(row["version"]))], vec)
            if then is not None:
                then(row)
            return row

    @staticmethod
    def _latest(tx: Tx, scope: Scope, task: str) -> Row | None:
        where, params = exact_sql(scope)
        return tx.one(f"{_SELECT} WHERE {where} AND r.task = ? ORDER BY r.version DESC LIMIT 1",
                      (*params, task))

    @staticmethod
    def _append(tx: Tx, scope: Scope, task: str, prev: Row | None, data: dict[str, Any],
                when: datetime, who: str | None) -> Row:
        """Insert the version after ``prev`` with ``data``; returns the stored row."""
        version = (int(prev["version"]) if prev else 0) + 1
        tx.execute(f"INSERT INTO checkpoints ({SCOPE_COLUMNS}, task, version, data, updated_at, "
                   "updated_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (*scope_values(scope), task, version, json_text(data, sort_keys=True),
                    when, who))
        where, params = exact_sql(scope)
        row = tx.one(f"{_SELECT} WHERE {where} AND r.task = ? AND r.version = ?",
                     (*params, task, version))
        assert row is not None
        return row

    def close(self, scope: Scope | dict[str, Any], task: str, *, outcome: str | None = None,
              by: str | None = None) -> Checkpoint:
        """End a task: a last version marked ``closed`` (with the outcome, if any). The task
        leaves working context and session context; its versions stay, and saving again
        reopens it. An outcome is also logged as an episode. A closed task closed again
        with another outcome is a Conflict (see the module docstring)."""
        scope = make_scope(scope)
        task = task_arg(task)
        if outcome is not None:
            outcome = screened_arg(outcome, "outcome", max_len=MAX_TEXT)
        who = None if by is None else text_arg(by, "by", max_len=MAX_NAME)
        now = self._clock.now()

        def build(prev: Row | None) -> dict[str, Any] | None:
            if prev is None:
                raise NotFound(f"no checkpoint for task {task!r} in {scope}",
                               hint="save a checkpoint before closing the task")
            data: dict[str, Any] = json.loads(prev["data"])
            closed = data.get("closed")
            if closed:
                kept = closed.get("outcome")
                if outcome is None or (kept or "").split() == outcome.split():
                    return None  # closed already, as asked: the closing version is the answer
                raise Conflict(
                    f"task {task!r} is already closed (at {closed.get('at')}) with outcome "
                    f"{kept!r}; this close gives {outcome!r}",
                    hint="a closed task keeps its outcome: to record another ending, save a "
                         "checkpoint (it reopens the task), then close it again")
            data["closed"] = {"at": now.isoformat(), "outcome": outcome}
            data["closed"] = {"at": now.isoformat(), "outcome": outcome}
            return data

        def logged(row: Row) -> None:
            if outcome is not None and self._on_close is not None:
                # inside this transaction (a savepoint): the task closes with its outcome
                # logged, or not at all
                self._on_close(checkpoint_from_row(row))

        return checkpoint_from_row(self._write(scope, task, build, now, who, logged))

    def current(self, scope: Scope | dict[str, Any], task: str) -> Checkpoint | None:
        """The latest version of the task's checkpoint, or None."""
        scope = make_scope(scope)
        task = task_arg(task)
        where, params = exact_sql(scope)
        with self._db.transaction(scope.tenant, write=False) as tx:
            row = tx.one(f"{_SELECT} WHERE {where} AND r.task = ? "
                         "ORDER BY r.version DESC LIMIT 1", (*params, task))
        return checkpoint_from_row(row) if row else None

    @staticmethod
    def text_of(cp: Checkpoint) -> str:
        """What a checkpoint version is searched by: its task and every field, in words
        (and what its vector is made from)."""
        parts = [cp.task.replace("-", " ").replace("_", " ")]
        for label, value in (("objective", cp.objective), ("next", cp.next_action),
                             ("notes", cp.notes), ("outcome", cp.outcome)):
            if value:
                parts.append(f"{label}: {value}")
        for label, items in (("plan", cp.plan), ("completed", cp.completed),
                             ("constraints", cp.constraints), ("evidence", cp.evidence)):
            if items:
                parts.append(f"{label}: " + "; ".join(items))
        return ". ".join(parts)

    @classmethod
    def _text(cls, task: str, data: dict[str, Any]) -> str:
        """:meth:`text_of` the version ``data`` (as stored) makes."""
        closed = data.get("closed") or {}
        return cls.text_of(Checkpoint.model_construct(
            task=task, outcome=closed.get("outcome"),
            **{f: data.get(f, [] if f in _LIST_FIELDS else None) for f in CHECKPOINT_FIELDS}))

    def embed_items(self, tx: Tx, tenant: str) -> list[tuple[str, str]]:
        """(vector id, the text its vector is made from) of every version of the tenant
        (for ``reindex``)."""
        return [(checkpoint_vector_id(r["scope_key"], r["task"], int(r["version"])),
                 self._text(r["task"], json.loads(r["data"])))
                for r in tx.all("SELECT scope_key, task, version, data FROM checkpoints "
                                "WHERE tenant = ? ORDER BY scope_key, task, version",
                                (tenant,))]

    def hold_stored(self, tx: Tx, tenant: str, ids: Sequence[str]) -> set[str]:
        """Of these vector ids, those whose checkpoint version is still stored, for a
        reindex's batch (read in its write transaction: on PostgreSQL the read takes the
        tenant lock a forget holds)."""
        wanted = set(ids)
        return {vid for r in tx.all("SELECT scope_key, task, version FROM checkpoints "
                                    "WHERE tenant = ?", (tenant,))
                if (vid := checkpoint_vector_id(r["scope_key"], r["task"], int(r["version"])))
                in wanted}

    def handoffs_in(self, tx: Tx, scope: Scope,
                    limit: int = 2000) -> list[tuple[Checkpoint, str]]:
        """Inside the caller's transaction: the searchable handoffs of exactly ``scope``,
        newest first, each with its status — ``closed`` (the version that closed its task,
        with the outcome) or ``superseded`` (a later version of the task exists, the
        closing one included). The current version of an open task is not a handoff: it is
        the task's state."""
        where, params = exact_sql(scope)
        rows = tx.all(f"{_SELECT} WHERE {where} ORDER BY r.updated_at DESC, r.version DESC "
                      "LIMIT ?", (*params, limit))
        # each task's latest version: its number, and whether it closed the task
        latest = {r["task"]: (int(r["version"]), bool(json.loads(r["data"]).get("closed")))
                  for r in tx.all(
                      f"{_SELECT} WHERE {where} AND {_IS_LATEST}", params)}
        out: list[tuple[Checkpoint, str]] = []
        for r in rows:
            last, closed = latest[r["task"]]
            if int(r["version"]) < last:
                out.append((checkpoint_from_row(r), "superseded"))
            elif closed:
                out.append((checkpoint_from_row(r), "closed"))
        return out

    def versions(self, scope: Scope | dict[str, Any], task: str) -> list[Checkpoint]:
        """Every saved version, oldest first."""
        scope = make_scope(scope)
        task = task_arg(task)
        where, params = exact_sql(scope)
        with self._db.transaction(scope.tenant, write=False) as tx:
            rows = tx.all(f"{_SELECT} WHERE {where} AND r.task = ? ORDER BY r.version",
                          (*params, task))
        return [checkpoint_from_row(r) for r in rows]

    def tasks(self, scope: Scope | dict[str, Any], *,
              include_closed: bool = False) -> list[str]:
        """The tasks of exactly this scope that have a checkpoint, by name (open ones only,
        unless ``include_closed``)."""
        scope = make_scope(scope)
        where, params = exact_sql(scope)
        with self._db.transaction(scope.tenant, write=False) as tx:
            rows = tx.all(f"{_SELECT} WHERE {where} AND {_IS_LATEST} ORDER BY r.task", params)
        return [r["task"] for r in rows
                if include_closed or not json.loads(r["data"]).get("closed")]

    def forget_rows(self, tx: Tx, sel: Selector, *, dry_run: bool,
                    chosen: Versions | None = None) -> list[str]:
        """Delete (unless ``dry_run``) every checkpoint version whose task or data contains
        ``sel.match`` (a string of the data, not a field's name, however the JSON escaped
        it: :mod:`memstrata.store.sql`; all of the scope's without a match), or the versions
        named by ids (``checkpoint:TASK@N``, the reference a handoff hit carries; none for a
        subject): ``chosen``, when the forget selected them already (:meth:`selected`).
        Returns the reference of each version deleted (``checkpoint:TASK@N``)."""
        chosen = self.selected(tx, sel) if chosen is None else chosen
        if chosen is not None and chosen.rows and not dry_run:
            where, runs = chosen.deletion(sel.scope.tenant)
            tx.executemany(f"DELETE FROM checkpoints AS r WHERE {where}", runs)
        rows = chosen.rows if chosen is not None else []
        return [f"checkpoint:{r['task']}@{int(r['version'])}" for r in rows]

    def selected(self, tx: Tx, sel: Selector) -> Versions | None:
        """The versions ``sel`` selects (None: none can be, a subject's forget say)."""
        found = self._where(sel)
        if found is None:
            return None
        return kept_versions(tx, sel, "checkpoints", "task", *found,
                             order="ORDER BY r.task, r.version")


    @staticmethod
    def _where(sel: Selector) -> tuple[str, list[Any]] | None:
        """The filter (alias ``r``) of the versions ``sel`` selects; None for none."""
        if sel.subject is not None:
            return None
        where, params = versions_where(sel, "task")
        ids = sel.ids_for("checkpoint")
        if ids is not None:
            # an id is a reference without its layer ("TASK@N"); others name other layers
            named = [(task, int(v)) for task, at, v in (i.rpartition("@") for i in ids)
                     if task and at and v.isdigit()]
            if not named:
                return None
            where += " AND (" + " OR ".join(["(r.task = ? AND r.version = ?)"] * len(named)) + ")"
            params += [x for pair in named for x in pair]
        return where, params


def vector_ids(chosen: Versions | None) -> list[str]:
    """The vector ids of the checkpoint versions a forget selected
    (:meth:`Checkpoints.selected`; they go with them: a schema trigger)."""
    return [checkpoint_vector_id(r["scope_key"], r["task"], int(r["version"]))
            for r in (chosen.rows if chosen is not None else [])]


__all__ = ["Checkpoints", "checkpoint_from_row", "clean_fields", "task_arg", "vector_ids"]
