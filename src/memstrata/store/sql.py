"""Small SQL helpers shared by the layers and the engines.

``IN (...)`` lists are built from :func:`chunks` of at most :data:`CHUNK` ids (under
SQLite's default limit of host parameters, and short enough for PostgreSQL's planner),
with :func:`marks` placeholders; ids are always parameters, never interpolated.

The "contains" rule of a forget's match is defined here once: a text column contains the
match when its case-folded text holds the case-folded match (:func:`contains_sql` with
:func:`like_param`: the engine's SQL ``lower()`` folds both, so they fold alike). On SQLite
that is :func:`case_fold`, Python's ``str.lower``, which the engine installs as its
``lower()`` (SQLite's own folds ASCII only); PostgreSQL's folds by its database's locale
(beyond ASCII under a UTF-8 one; a few letters, Greek's final sigma and the dotted
capital I, fold otherwise than Python's). A JSON column (:func:`json_text`) contains it
when one of its string values does (metadata such as a date included; not a key):
:func:`json_contains_sql` with :func:`json_like_params` selects the candidates in SQL, for
the text written now and for the ``\\uXXXX``-escaped text written before (no UPDATE
rewrites immutable rows), and :func:`json_contains` decides each row.

A checkpoint version has no id column (its key is scope, task and version); the id its
vector is stored under is one rule, written twice side by side: :func:`checkpoint_vector_id`
for the writer and :func:`checkpoint_vector_id_sql` for the delete triggers and the doctor.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

CHUNK = 500


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """Consecutive slices of ``items`` of at most ``size`` (none for an empty sequence)."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def marks(items: Sequence[Any]) -> str:
    """``?, ?, ?`` for ``items``."""
    return ", ".join("?" * len(items))


def case_fold(text: str) -> str:
    """The case folding of the contains rule (Unicode: ``ÖZTÜRK`` and ``öztürk`` are one;
    Greek's final sigma is a sigma, as :func:`contains_sql` folds it on every engine)."""
    return text.lower().replace("ς", "σ")


def sql_lower(value: object) -> str | None:
    """:func:`case_fold` as the SQL function ``lower(x)``: what the SQLite engine registers in
    place of SQLite's own, which folds ASCII letters only (NULL stays NULL)."""
    if isinstance(value, str):
        return case_fold(value)
    if value is None:
        return None
    if isinstance(value, bytes):
        return case_fold(value.decode("utf-8", "replace"))
    return case_fold(str(value))


def contains_sql(column: str) -> str:
    """Portable case-insensitive substring test with one parameter (see :func:`like_param`):
    the engine folds the column and the pattern with the same ``lower()``."""
    # Greek's final sigma is one sigma: PostgreSQL lowers a capital one to a plain one
    return f"replace(lower({column}), 'ς', 'σ') LIKE replace(lower(?), 'ς', 'σ') ESCAPE '\\'"


def _escaped(text: str) -> str:
    """``text`` with LIKE's wildcards (and the escape character) escaped by ``\\``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_param(match: str) -> str:
    """The LIKE pattern for :func:`contains_sql`: ``match`` with its wildcards escaped
    (folded by the engine)."""
    return f"%{_escaped(match)}%"


def text_contains(text: str | None, match: str) -> bool:
    """:func:`contains_sql` in Python: whether ``text`` contains ``match``, case folded."""
    return text is not None and case_fold(match) in case_fold(text)


def _folded_in(text: str | None, folded_match: str) -> bool:
    """:func:`text_contains` with the match folded already (one fold for many texts)."""
    return text is not None and folded_match in case_fold(text)


def json_text(value: Any, *, sort_keys: bool = False) -> str:
    """The JSON text stored in a column the contains rule reads: characters beyond ASCII
    as they are (only quotes, backslashes and control characters are escaped)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys)


def json_contains_sql(column: str) -> str:
    """The rows whose JSON text ``column`` may contain the match: a superset, with the two
    parameters of :func:`json_like_params`; :func:`json_contains` decides each row."""
    return f"({contains_sql(column)} OR {contains_sql(column)})"


def json_like_params(match: str) -> list[str]:
    """The LIKE patterns of :func:`json_contains_sql`: the folded match as
    :func:`json_text` escapes it, and as the JSON text written before it escaped it
    (``ensure_ascii``): each character beyond ASCII a ``\\uXXXX`` of any code point (in
    that form a capital and its small letter differ; :func:`json_contains` tells)."""
    folded = case_fold(match)
    old = "".join(_escaped(json.dumps(ch)[1:-1]) if ord(ch) < 128
                  else "\\\\u____" * (2 if ord(ch) > 0xFFFF else 1) for ch in folded)
    return [f"%{_escaped(json.dumps(folded, ensure_ascii=False)[1:-1])}%", f"%{old}%"]


def json_contains(text: Any, match: str) -> bool:
    """Whether a string of the JSON ``text`` (a value at any depth, not a key) contains
    ``match``, case folded, however the text was escaped; text that is not JSON is read
    as plain text (a value a driver decoded already, as it is)."""
    value, folded = text, case_fold(match)
    if isinstance(text, str):
        try:
            value = json.loads(text)
        except ValueError:
            return _folded_in(text, folded)
    return any(_folded_in(s, folded) for s in json_strings(value))


def json_strings(value: Any, *, keys: bool = False) -> Iterator[str]:
    """The strings of a decoded JSON value at any depth: its values, and with ``keys`` its
    mappings' keys too (what a secret scan reads: a key is stored as well)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if keys:
                yield str(key)
            yield from json_strings(item, keys=keys)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from json_strings(item, keys=keys)


def prefix_param(prefix: str) -> str:
    """The LIKE pattern (with ``ESCAPE '\\'``, case kept) of the values starting with
    ``prefix``, its wildcards escaped."""
    return f"{_escaped(prefix)}%"


def observed_between(alias: str, since: Any, until: Any) -> tuple[str, list[Any]]:
    """The episode date window (``observed_at`` within ``since`` and ``until``, both
    inclusive, either None for open) as a WHERE fragment starting with `` AND`` (or
    empty) and its parameters, over the table alias ``alias``."""
    where, params = "", []
    if since is not None:
        where += f" AND {alias}.observed_at >= ?"
        params.append(since)
    if until is not None:
        where += f" AND {alias}.observed_at <= ?"
        params.append(until)
    return where, params


def checkpoint_vector_id(scope_key: str, task: str, version: int) -> str:
    """The record id a checkpoint version's vector is stored under: unambiguous for any
    task name and scope (the task's length is spelled out before it)."""
    return f"checkpoint:{version}:{len(task)}:{task}:{scope_key}"


def checkpoint_vector_id_sql(alias: str) -> str:
    """:func:`checkpoint_vector_id` of the checkpoints row ``alias`` (``old``, ``c``), in
    SQL both engines read alike."""
    a = alias
    return (f"('checkpoint:' || {a}.version || ':' || length({a}.task) || ':' || {a}.task "
            f"|| ':' || {a}.scope_key)")


#: Whether a tenant searches by vectors (one parameter, the tenant): it holds vectors, or an
#: embedding model is recorded (its only vector may have been dropped). A record of such a
#: tenant without a vector is missed by that search.
VECTORS_IN_USE_SQL = ("SELECT 1 AS x WHERE EXISTS (SELECT 1 FROM vectors WHERE tenant = ?) "
                      "OR EXISTS (SELECT 1 FROM meta WHERE key = 'embedding_model')")


def without_vector_sql(table: str) -> str:
    """A query of the vector ids (``id``) of the records of ``table`` (``facts``,
    ``episodes``, ``checkpoints``) of one tenant (the one parameter) that have no vector of
    any model: written while the store was opened without an embedder, or left without one
    when a forgotten neighbour's line took it (:meth:`RecordIndex.drop_vectors`)."""
    ident = checkpoint_vector_id_sql("r") if table == "checkpoints" else "r.id"
    return (f"SELECT {ident} AS id FROM {table} r WHERE r.tenant = ? AND NOT EXISTS "
            f"(SELECT 1 FROM vectors v WHERE v.tenant = r.tenant AND v.record_id = {ident})")


__all__ = [
    "CHUNK",
    "VECTORS_IN_USE_SQL",
    "case_fold",
    "checkpoint_vector_id",
    "checkpoint_vector_id_sql",
    "chunks",
    "contains_sql",
    "json_contains",
    "json_contains_sql",
    "json_like_params",
    "json_strings",
    "json_text",
    "like_param",
    "marks",
    "observed_between",
    "prefix_param",
    "sql_lower",
    "text_contains",
    "without_vector_sql",
]
