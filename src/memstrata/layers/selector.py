"""What a forget selects: the scope it owns, and a match, a subject or record ids.

A :class:`Selector` is validated once (:func:`selector`) and handed to every layer's
``forget_rows``, so each layer applies the same selection to its own table. A match is
the contains rule of :mod:`memstrata.store.sql`: on a text column exact in SQL, on a JSON
column a superset in SQL that :meth:`Selector.keeps` decides row by row.

Whose rows: an operator's forget reaches every record its scope *owns*
(:func:`~memstrata.scoping.owned_sql`: ``project=p`` owns every user's records in ``p``).
A reader's forget (an agent's tool, the service) reaches only what its caller may read:
the records of exactly its scope (it reads none of the narrower ones it owns), and of the
restricted ones only those its principal is a reader of (none without a principal).
:meth:`Selector.owned` and :meth:`Selector.readers` are that rule, for every layer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ..inputs import ids_arg, name_arg, text_arg
from ..models import Scope, make_scope
from ..scoping import exact_sql, owned_sql
from ..store.base import Row, Tx
from ..store.sql import (
    contains_sql,
    json_contains,
    json_contains_sql,
    json_like_params,
    like_param,
    marks,
    text_contains,
)


@dataclass(frozen=True)
class Selector:
    """Records owned by ``scope`` whose text contains ``match``, about ``subject``, or with
    these ``ids`` (any combination narrows; none: everything the scope owns)."""

    scope: Scope
    match: str | None = None
    subject: str | None = None
    #: The references given (layer, id), in order; a bare id has no layer (any layer).
    #: Empty: the selection names no ids (a forget never takes an empty list).
    refs: tuple[tuple[str | None, str], ...] = ()
    #: Whom the forget is made for: facts and episodes restricted to readers are selected
    #: only when this principal is one of them (None: the operator's forget, every record
    #: the scope owns).
    principal: str | None = None
    #: A reader's forget (see the module docstring): exactly the scope's records, and of
    #: the restricted ones only those :attr:`principal` reads.
    reader: bool = False
    #: A program's forget (an agent's tool): identity facts stay (only a person changes who
    #: someone is), and are reported.
    keep_identity: bool = False

    def owned(self) -> tuple[str, list[Any]]:
        """The WHERE fragment (alias ``r``) of the rows this forget may reach by scope: the
        scope's own rows for a reader, every row the scope owns for an operator."""
        return exact_sql(self.scope) if self.reader else owned_sql(self.scope)

    def readers(self, clause: Callable[[str], str]) -> tuple[str, list[Any]]:
        """The fragment (`` AND ...``, alias ``r``) a layer with a ``readers`` column adds:
        a principal's forget reaches the restricted rows it reads (``clause``: the engine's
        readers test, one parameter), a reader without one none, an operator every one."""
        if self.principal is not None:
            return f" AND {clause('r.readers')}", [self.principal]
        if self.reader:
            return " AND r.readers IS NULL", []
        return "", []

    @property
    def ids(self) -> list[str] | None:
        """The ids named, whatever their layer (None: the selection names none)."""
        return [i for _, i in self.refs] if self.refs else None

    def ids_for(self, layer: str) -> list[str] | None:
        """The ids this selection names in ``layer`` (``fact``, ``episode``, ``checkpoint``):
        its references to that layer and its bare ids; None when it names no ids at all."""
        if not self.refs:
            return None
        return [i for kind, i in self.refs if kind in (None, layer)]

    @property
    def everything(self) -> bool:
        return self.match is None and self.subject is None and self.ids is None

    def where(self, text_columns: Sequence[str],
              among: tuple[str, list[Any]] | None = None,
              json_columns: Sequence[str] = ()) -> tuple[str, list[Any]]:
        """The WHERE fragment (alias ``r``) of the rows the scope owns (or those ``among``
        selects) and, with a match, whose ``text_columns`` contain it (case-insensitive)
        or whose ``json_columns`` may (a superset: :meth:`keeps` decides each row); the
        layer adds ids/subject."""
        where, params = self.owned() if among is None else (among[0], list(among[1]))
        if self.match is not None:
            tests = [*(contains_sql(f"r.{c}") for c in text_columns),
                     *(json_contains_sql(f"r.{c}") for c in json_columns)]
            where += " AND (" + " OR ".join(tests) + ")"
            params += [like_param(self.match)] * len(text_columns)
            params += json_like_params(self.match) * len(json_columns)
        return where, params

    def keeps(self, row: dict[str, Any], text_columns: Sequence[str],
              json_columns: Sequence[str] = ()) -> bool:
        """Whether a row :meth:`where` selected with these columns (``row`` holds them) is
        in the selection: one of its text columns or a string in one of its JSON columns
        contains the match (every row without a match or without JSON columns)."""
        if self.match is None or not json_columns:
            return True
        return (any(text_contains(row[c], self.match) for c in text_columns)
                or any(json_contains(row[c], self.match) for c in json_columns))


def versions_where(sel: Selector, name: str) -> tuple[str, list[Any]]:
    """The filter (alias ``r``) of the versions of a versioned table (checkpoints,
    procedures: a ``name`` column, a ``version``, JSON ``data``) that ``sel`` may select:
    a superset with a match (:func:`kept_versions` decides each row)."""
    return sel.where((name,), json_columns=("data",))


@dataclass(frozen=True)
class Versions:
    """The versions of a versioned table a forget selects (:func:`kept_versions`): their
    rows (scope key, name, version, data) and how its owner deletes them."""

    rows: list[Row]
    #: The filter (alias ``r``) that selected them, and its parameters.
    where: str
    params: list[Any]
    #: The name column (``task``, ``name``).
    name: str
    #: Whether the filter selects these versions alone.
    exact: bool

    def deletion(self, tenant: str) -> tuple[str, list[Sequence[Any]]]:
        """The WHERE (alias ``r``) of the owner's ``DELETE FROM <table> AS r`` and the
        parameters of each run of it: the filter once when it selects these versions
        alone, else the versions' keys, one run each."""
        if self.exact:
            return self.where, [self.params]
        return (f"r.tenant = ? AND r.scope_key = ? AND r.{self.name} = ? AND r.version = ?",
                [(tenant, r["scope_key"], r[self.name], r["version"]) for r in self.rows])


def kept_versions(tx: Tx, sel: Selector, table: str, name: str, where: str,
                  params: Sequence[Any], order: str = "") -> Versions:
    """The versions (scope key, ``name``, version, data) of ``table`` that ``where`` (from
    :func:`versions_where`) selects and ``sel`` keeps (their name or a string of their data
    holds the match: :meth:`Selector.keeps`)."""
    found = tx.all(f"SELECT r.scope_key AS scope_key, r.{name} AS {name}, r.version AS "
                   f"version, r.data AS data FROM {table} r WHERE {where} {order}", params)
    rows = [r for r in found if sel.keeps(r, (name,), ("data",))]
    return Versions(rows, where, list(params), name, len(rows) == len(found))


def narrowed(sel: Selector, layer: str,
             base: tuple[str, list[Any]]) -> tuple[str, list[Any]] | None:
    """``base`` narrowed to the ids the selection names in ``layer`` (:meth:`Selector.ids_for`;
    unchanged when it names none at all); None when it names ids, none of them there."""
    ids = sel.ids_for(layer)
    if ids is None:
        return base
    if not ids:
        return None
    return f"{base[0]} AND r.id IN ({marks(ids)})", [*base[1], *ids]


def read_not_owned(sel: Selector, read: tuple[str, list[Any]]) -> tuple[str, list[Any]]:
    """The rows a layer's read filter ``read`` admits for the selection's scope that its
    forget does not reach (:meth:`Selector.owned`; alias ``r``): records of a broader scope
    it sees (a user-wide one seen from a project)."""
    owned, params = sel.owned()
    # a NULL scope column makes the owned test NULL, not false: COALESCE reads it as no
    return f"{read[0]} AND NOT COALESCE(({owned}), FALSE)", [*read[1], *params]


def selector(scope: Scope | dict[str, Any], *, match: Any = None, subject: Any = None,
             record_ids: Sequence[str] | None = None,
             principal: str | None = None, reader: bool = False,
             keep_identity: bool = False) -> Selector:
    """A validated :class:`Selector` (ValidationError for bad input); ``reader``: a
    reader's forget (see the module docstring); ``keep_identity``: a program's."""
    sc = make_scope(scope)
    if principal is not None:
        principal = name_arg(principal, "principal")
    if match is not None:
        match = text_arg(match, "match", max_len=1000)
    if subject is not None:
        subject = " ".join(text_arg(subject, "subject", max_len=200).lower().split())
        if not subject:
            raise ValidationError("subject must not be empty")
    ids = None if record_ids is None else ids_arg(record_ids, "record_ids")
    refs: tuple[tuple[str | None, str], ...] = ()
    if ids is not None:  # each id with the layer its reference names (ids_arg checked)
        refs = tuple((str(r).partition(":")[0] if ":" in str(r) else None, i)
                     for r, i in zip(record_ids or (), ids, strict=True))
    return Selector(sc, match, subject, refs, principal, reader, keep_identity)


__all__ = ["Selector", "Versions", "kept_versions", "narrowed", "read_not_owned", "selector",
           "versions_where"]
