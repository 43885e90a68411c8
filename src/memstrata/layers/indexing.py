"""Index entries of records: the lexical entry and the vector, beside the row.

:class:`RecordIndex` is the one path from a layer to the engine's indexes. The layer
decides *what* a record is indexed and embedded with (``Facts.embed_text``,
``Episodes.embed_text``); this module embeds those texts before the write transaction opens
(:meth:`RecordIndex.embed`) and writes the entries inside it (:meth:`RecordIndex.write`), so a
record and its index entries commit or roll back together. Without an embedder there are
no vectors and every search is lexical.

:func:`reindex` re-embeds every record of the layers it is given (facts, episodes, checkpoint
versions) in every tenant with the current embedder: driven from here, over the texts each
layer defines, while the engine's
:class:`~memstrata.store.base.VectorIndex` only clears and stores vectors. It clears each
tenant, *then* lists the records to embed, and stores the new vectors in batches (embedding
never holds the write lock), or, with ``missing=True``, embeds only the records that have
no vector. Under concurrent writers: a record committed before a tenant's clear is in the
list; one committed after it was written with its own vector (or without an embedder, as
its writer said), so no record a reindex overlaps ends without a vector because of it. Each
batch's transaction first holds its records against a forget or a sweep
(:meth:`Embeddable.hold_stored`) and writes the vectors of those still stored only, so no
vector outlives its record. Nor is a vector written from a text that is no longer the
record's: where the layer says what each record's text is now (a fact's claim, which a
reviewer's edit rewrites in place), a record whose text changed since it was listed is
embedded again from its new text (up to :data:`REEMBED_ATTEMPTS` times, then left as its
last writer left it); where it does not (episodes, whose text changes only when their
writer re-embeds them; checkpoint versions, never), a record that has a vector by then got
it from a writer after the listing (every vector of a full reindex's tenant was cleared
before it), and keeps it. A failure after the first clear raises a BackendError saying
what was done (``details["done"]``: the tenants cleared, the records re-embedded so far);
running the reindex again starts over and completes it, and ``missing=True`` goes on where
it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import BackendError, MemstrataError
from ..notices import said, say_once
from ..store.base import Database, Tx, VectorIndex
from ..store.sql import VECTORS_IN_USE_SQL, chunks, marks, without_vector_sql

if TYPE_CHECKING:
    import numpy as np

    from ..providers.embeddings import Embedder


@dataclass(frozen=True)
class IndexEntry:
    """One row's lexical entry: its own text and its thread context (weighted lower)."""

    record_id: str
    text: str
    context: str = ""


class RecordIndex:
    """The lexical entries (always) and vectors (with an embedder) of facts and episodes,
    and the vectors of checkpoint versions."""

    def __init__(self, db: Database, embedder: Embedder | None = None) -> None:
        self.db = db
        self.embedder = embedder
        self._vectors: VectorIndex | None = None
        #: Tenants asked whether they have vectors, without an embedder (:meth:`unembedded`).
        self._asked: set[str] = set()

    @property
    def semantic(self) -> bool:
        """Whether records get vectors (an embedder is configured)."""
        return self.embedder is not None

    @property
    def judges_meaning(self) -> bool:
        """Whether the vectors' similarity speaks for meaning, so that a low cosine may
        overrule a few words in common (an embedder says it does not with
        ``knows_meaning = False``, as the hashing one does)."""
        return self.embedder is not None and bool(getattr(self.embedder, "knows_meaning", True))

    @property
    def vectors(self) -> VectorIndex | None:
        """The engine's vector index for this embedder (made on first use: an embedder
        that learns its dimension from a server asks only when vectors are needed)."""
        if self.embedder is None:
            return None
        if self._vectors is None:
            self._vectors = self.db.vector_index(self.embedder.model_name, self.embedder.dims)
        return self._vectors

    @property
    def made_vectors(self) -> VectorIndex | None:
        """The vector index if this process already made it (never asks the embedder)."""
        return self._vectors

    def embed(self, texts: Sequence[str], *, tenant: str | None = None) -> np.ndarray | None:
        """Vectors for texts, computed before the transaction opens (None without embedder).
        Without an embedder, for a write into ``tenant``: said once per process if the
        tenant has vectors (the records written will lack one: :meth:`unembedded`)."""
        if self.embedder is None:
            if tenant is not None and texts:
                self.unembedded(tenant)
            return None
        if not texts:
            return None
        import numpy as np

        return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray | None:
        """The query vector (None without embedder)."""
        if self.embedder is None:
            return None
        import numpy as np

        return np.asarray(self.embedder.embed_query(text), dtype=np.float32)

    def write(self, tx: Tx, table: str, tenant: str, entries: Sequence[IndexEntry],
              vectors: Any = None) -> None:
        """Write the lexical entries and (when given) the vectors of ``entries``."""
        for e in entries:
            self.db.index_text(tx, table, e.record_id, tenant, e.text, e.context)
        self.write_vectors(tx, table, tenant, [e.record_id for e in entries], vectors)

    def write_vectors(self, tx: Tx, table: str, tenant: str, ids: Sequence[str],
                      vectors: Any) -> None:
        """Write only vectors (a layer matched in words without a lexical index: checkpoint
        versions); nothing without an embedder."""
        index = self.vectors
        if index is not None and vectors is not None:
            index.add(tx, table, tenant, ids, vectors)

    def drop_vectors(self, tx: Tx, tenant: str, ids: Sequence[str]) -> None:
        """Delete the vectors of these records, whatever model made them: for a record whose
        vector was made from text that is gone (a forgotten or expired neighbour's line)
        when there is no embedder to make it again. It is found by its words until a
        ``reindex`` gives it a vector (``doctor`` counts it)."""
        self.db.delete_vectors(tx, tenant, ids)

    def unembedded(self, tenant: str) -> None:
        """A record is about to be written without an embedder into ``tenant``: if the tenant
        searches by vectors, say once per process that it gets none, so semantic search
        misses it, and what mends it. Read in a transaction of its own before the write's
        (a read of the vectors inside a write transaction would take the tenant's lock
        after the thread's on PostgreSQL); asked once per tenant."""
        if said("unembedded") or tenant in self._asked:
            return
        self._asked.add(tenant)
        with self.db.transaction(tenant, write=False) as tx:
            has = tx.one(VECTORS_IN_USE_SQL, (tenant,))
        if has is not None:
            say_once("unembedded", "memstrata: this store has vectors, but it was opened "
                     "without an embedder: records written now get no vector and semantic "
                     "search misses them; open it with its embedder, or run `memstrata "
                     "reindex --missing` afterwards (`memstrata doctor` counts them)")


class Embeddable(Protocol):
    """A layer whose records carry vectors."""

    table: str

    def embed_items(self, tx: Tx, tenant: str) -> list[tuple[str, str]]:
        """(record id, the text its vector is made from) for every record of the tenant."""
        ...

    def hold_stored(self, tx: Tx, tenant: str,
                    ids: Sequence[str]) -> Collection[str] | Mapping[str, str]:
        """Inside a write transaction: which of these records (by the id their vector is
        stored under) are still stored, held until the transaction ends against a forget
        or a sweep that would delete them (so a vector written for one never outlives it).
        A layer whose records' text may be rewritten in place returns a mapping of them
        to the text their vector is made from now (see :func:`reindex`)."""
        ...


#: How many times a reindex embeds again a record whose text changed while it was embedded.
REEMBED_ATTEMPTS = 3


def _with_vector(tx: Tx, tenant: str, ids: Sequence[str]) -> set[str]:
    """Which of these records have a vector (of any model), read in the batch's write
    transaction."""
    found: set[str] = set()
    for chunk in chunks(list(ids)):
        found.update(r["id"] for r in tx.all(
            f"SELECT record_id AS id FROM vectors WHERE tenant = ? AND record_id IN "
            f"({marks(chunk)})", (tenant, *chunk)))
    return found


def reindex(index: RecordIndex, layers: Sequence[Embeddable], *,
            progress: Callable[[int, int], None] | None = None, batch: int = 256,
            missing: bool = False) -> int:
    """Re-embed every record of ``layers`` in every tenant; returns how many were embedded.
    With ``missing``, embed only the records that have no vector
    (:func:`~memstrata.store.sql.without_vector_sql`) and keep the others: the vectors
    there must be this embedder's (the engine refuses another model's, ConfigError)."""
    vectors = index.vectors
    if vectors is None:
        from ..errors import ConfigError

        raise ConfigError("reindex needs an embedder",
                          hint="open the store with an embedder, e.g. --embedder minilm")
    db = index.db
    by_table = {layer.table: layer for layer in layers}
    tenants = db.tenants()
    total = done = 0
    cleared: list[str] = []
    try:
        # every tenant is cleared before the first new vector: an engine that records one
        # model per file (SQLite) must not see old vectors beside new ones. The records are
        # listed after the clear: one listed before it and written by another process
        # between the two would lose the vector its writer gave it, and not be re-embedded
        for tenant in tenants if not missing else ():
            with db.transaction(tenant) as tx:
                vectors.clear(tx, tenant)
            cleared.append(tenant)
        work: list[tuple[str, str, str, str]] = []
        for tenant in tenants:
            # with missing: a write transaction, as the model is recorded on first use
            with db.transaction(tenant, write=missing) as tx:
                if missing:
                    vectors.check_model(tx)  # another model's vectors: a full reindex
                for layer in layers:
                    lacking = {r["id"] for r in tx.all(without_vector_sql(layer.table),
                                                       (tenant,))} if missing else None
                    work += [(layer.table, tenant, rid, text)
                             for rid, text in layer.embed_items(tx, tenant)
                             if lacking is None or rid in lacking]
        total = len(work)
        attempts: dict[tuple[str, str, str], int] = {}
        start = 0
        while start < len(work):
            chunk = work[start:start + batch]
            vecs = index.embed([c[3] for c in chunk])
            by_target: dict[tuple[str, str], list[int]] = {}
            for i, (table, tenant, _, _) in enumerate(chunk):
                by_target.setdefault((tenant, table), []).append(i)
            for (tenant, table), rows in by_target.items():
                with db.transaction(tenant) as tx:
                    # a record forgotten (or swept) since it was listed gets no vector
                    ids = [chunk[i][2] for i in rows]
                    stored = by_table[table].hold_stored(tx, tenant, ids)
                    if isinstance(stored, Mapping):
                        # its text now: a record rewritten since it was listed (a reviewer's
                        # edit, with the vector of its new text) is embedded again from it
                        for i in rows:
                            now = stored.get(chunk[i][2])
                            key = (table, tenant, chunk[i][2])
                            if now is not None and now != chunk[i][3] and \
                                    attempts.get(key, 0) < REEMBED_ATTEMPTS:
                                attempts[key] = attempts.get(key, 0) + 1
                                work.append((table, tenant, chunk[i][2], now))
                        rows = [i for i in rows if stored.get(chunk[i][2]) == chunk[i][3]]
                    else:
                        # a vector written since the listing is its writer's, from the
                        # record's text then: kept
                        had = _with_vector(tx, tenant, ids)
                        rows = [i for i in rows if chunk[i][2] in stored
                                and chunk[i][2] not in had]
                    if rows:
                        vectors.add(tx, table, tenant, [chunk[i][2] for i in rows],
                                    vecs[rows] if vecs is not None else None)
                done += len(rows)
            start += len(chunk)
            total = len(work)
            if progress:
                progress(start, total)
    except MemstrataError as exc:
        if not cleared and not done:
            raise
        raise BackendError(f"the reindex stopped after re-embedding {done} of {total} "
                           f"records: {exc}", hint="run the reindex again (it starts over; "
                           "with missing=True it goes on where it stopped)",
                           done={"cleared": cleared, "embedded": done, "total": total}) from exc
    finally:
        vectors.invalidate()  # whatever happened, what this process cached may be gone
    return done


__all__ = ["REEMBED_ATTEMPTS", "Embeddable", "IndexEntry", "RecordIndex", "reindex"]
