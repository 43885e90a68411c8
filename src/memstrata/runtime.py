"""What every layer shares: the database, the clock, the policy and the indexer.

The :class:`Indexer` keeps a record's lexical entry (and, when an embedder is
configured, its vector) in the same transaction as the record itself, so a
record and its index entries commit or roll back together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .clock import Clock, SystemClock
from .policy import WritePolicy
from .store.base import Database, Tx

if TYPE_CHECKING:
    from .vectors import VectorIndex


@dataclass
class Indexer:
    """Maintains lexical (and optionally vector) entries for facts and episodes."""

    db: Database
    vectors: VectorIndex | None = None

    def add(self, tx: Tx, table: str, tenant: str, items: Sequence[tuple[str, str]],
            vectors: Any = None) -> None:
        """Index ``(record_id, text)`` pairs of ``table``; ``vectors`` are precomputed rows."""
        for record_id, text in items:
            self.db.index_text(tx, table, record_id, tenant, text)
        if self.vectors is not None and vectors is not None:
            self.vectors.add(tx, table, tenant, [rid for rid, _ in items], vectors)

    def embed(self, texts: Sequence[str]) -> Any:
        """Vectors for texts, computed before the transaction opens (None without embedder)."""
        if self.vectors is None or not texts:
            return None
        return self.vectors.embed(texts)


@dataclass
class Runtime:
    """The shared services handed to each layer."""

    db: Database
    clock: Clock = field(default_factory=SystemClock)
    policy: WritePolicy = field(default_factory=WritePolicy)
    indexer: Indexer | None = None
    default_tenant: str = "default"

    def __post_init__(self) -> None:
        if self.indexer is None:
            self.indexer = Indexer(self.db)

    @property
    def index(self) -> Indexer:
        assert self.indexer is not None
        return self.indexer


__all__ = ["Indexer", "Runtime"]
