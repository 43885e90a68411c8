"""Small SQL helpers shared by the layers and the engines.

``IN (...)`` lists are built from :func:`chunks` of at most :data:`CHUNK` ids (under
SQLite's default limit of host parameters, and short enough for PostgreSQL's planner),
with :func:`marks` placeholders; ids are always parameters, never interpolated.

A checkpoint version has no id column (its key is scope, task and version); the id its
vector is stored under is one rule, written twice side by side: :func:`checkpoint_vector_id`
for the writer and :func:`checkpoint_vector_id_sql` for the delete triggers and the doctor.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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


def contains_sql(column: str) -> str:
    """Portable case-insensitive substring test with one parameter (see :func:`like_param`)."""
    return f"lower({column}) LIKE ? ESCAPE '\\'"


def _escaped(text: str) -> str:
    """``text`` with LIKE's wildcards (and the escape character) escaped by ``\\``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_param(match: str) -> str:
    """The LIKE pattern for :func:`contains_sql`: ``match`` with its wildcards escaped."""
    return f"%{_escaped(match.lower())}%"


def prefix_param(prefix: str) -> str:
    """The LIKE pattern (with ``ESCAPE '\\'``, case kept) of the values starting with
    ``prefix``, its wildcards escaped."""
    return f"{_escaped(prefix)}%"


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


__all__ = ["CHUNK", "VECTORS_IN_USE_SQL", "checkpoint_vector_id", "checkpoint_vector_id_sql",
           "chunks", "contains_sql", "like_param", "marks", "prefix_param", "without_vector_sql"]
