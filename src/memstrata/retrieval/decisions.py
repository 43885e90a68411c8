"""The decisions recall serves, and how each one reads memory (DESIGN §6.1).

``planning`` and ``lookup`` read facts and episodes of any age; ``side_effect`` reads
episodes of the last 90 days and flags every item for verification before acting;
``recovery`` reads the last 30 days, episodes first. Each has its relevance floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

DECISIONS = ("planning", "lookup", "side_effect", "recovery")
#: What recall may read. ``handoffs`` (earlier checkpoint versions and closed tasks) is
#: never among a decision's default layers: it is searched only when asked for.
LAYERS = ("facts", "episodes", "handoffs")


@dataclass(frozen=True)
class DecisionRule:
    """How one kind of decision reads memory."""

    layers: tuple[str, ...]
    max_episode_age: timedelta | None
    verify_all: bool
    floor: float


DECISION_RULES: dict[str, DecisionRule] = {
    "planning": DecisionRule(("facts", "episodes"), None, False, 0.15),
    "lookup": DecisionRule(("facts", "episodes"), None, False, 0.15),
    "side_effect": DecisionRule(("facts", "episodes"), timedelta(days=90), True, 0.2),
    "recovery": DecisionRule(("episodes", "facts"), timedelta(days=30), False, 0.1),
}


__all__ = ["DECISIONS", "DECISION_RULES", "LAYERS", "DecisionRule"]
