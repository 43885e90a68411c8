"""What a ranker reads and what it is asked (the seam between the gate and a ranker).

Contract: :class:`RankSources` holds the layers a ranking reads (their filters and rows)
and their index; :class:`RankRequest` is one request, its layers and decision rule chosen
by the gate; a :data:`Ranker` maps both to ``(hits, considered)``
(:func:`memstrata.retrieval.ranking.hybrid` is the default).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ..layers.checkpoints import Checkpoints
from ..layers.episodes import Episodes
from ..layers.facts import Facts
from ..layers.indexing import RecordIndex
from ..models import Hit, Scope
from ..store.base import Database
from .decisions import DecisionRule


@dataclass(frozen=True)
class RankSources:
    """What a ranker may read: the layers' filters and rows, and their index."""

    db: Database
    facts: Facts
    episodes: Episodes
    index: RecordIndex
    #: Earlier checkpoint versions and closed tasks (the ``handoffs`` layer), when given.
    checkpoints: Checkpoints | None = None


@dataclass(frozen=True)
class RankRequest:
    """One ranking request; ``layers`` and ``rule`` come from the gate."""

    scope: Scope
    query: str
    rule: DecisionRule
    layers: tuple[str, ...]
    k: int
    principal: str | None
    since: datetime | None
    until: datetime | None
    now: datetime
    #: Only these facts may be ranked (None: every fact the filters let through). Used by
    #: callers that select records themselves first, e.g. one namespace of the LangGraph
    #: store; the filters still apply.
    fact_ids: frozenset[str] | None = None


Ranker = Callable[[RankSources, RankRequest], tuple[list[Hit], int]]


__all__ = ["RankRequest", "RankSources", "Ranker"]
