"""The retrieval gate (DESIGN §6): recall is a decision, not a similarity dump.

Contract:
1. ``decision`` (planning | lookup | side_effect | recovery) sets which layers
   may answer and how strict freshness is.
2. Filter first: tenant/scope/readers, then status (current before
   superseded; expired and retired out) and freshness — in the SQL that
   selects candidates, so a foreign record can never be ranked or counted.
3. Rank the survivors (:mod:`memstrata.ranking`), then adjust by status,
   actor authority, scope specificity and recency.
4. Cut at a relevance floor and a token budget: an empty result is valid and
   says why.
5. Return references with short excerpts and metadata; ``Memory.get(ref)``
   opens one.
6. Flag ``needs_verification`` on stale, inferred or untrusted items and on
   everything used for a ``side_effect`` decision, naming the source to check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import Field

from .errors import ValidationError
from .models import Hit, Scope, _Model, make_scope

if TYPE_CHECKING:
    from .memory import Memory

DECISIONS = ("planning", "lookup", "side_effect", "recovery")
LAYERS = ("facts", "episodes")


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


class Recall(_Model):
    """What the gate let through, best first; may be empty, with the reason."""

    query: str
    decision: str
    items: list[Hit] = Field(default_factory=list)
    tokens: int = 0
    considered: int = 0
    empty_reason: str | None = None

    def __iter__(self) -> Any:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def refs(self) -> list[str]:
        return [h.ref for h in self.items]


def validate_request(scope: Scope | dict[str, Any], need: str, decision: str,
                     layers: Sequence[str] | None, k: int,
                     budget_tokens: int) -> tuple[Scope, str, DecisionRule, tuple[str, ...]]:
    scope = make_scope(scope)
    if not isinstance(need, str) or not need.strip():
        raise ValidationError("need must be a non-empty string describing what is needed")
    if len(need) > 4000:
        raise ValidationError("need is longer than 4000 characters")
    if decision not in DECISION_RULES:
        raise ValidationError(f"decision must be one of {', '.join(DECISIONS)}; got {decision!r}")
    rule = DECISION_RULES[decision]
    if layers is None:
        chosen = rule.layers
    else:
        if isinstance(layers, str):
            layers = [layers]
        bad = [x for x in layers if x not in LAYERS]
        if bad:
            raise ValidationError(f"unknown layers {bad}; choose from {', '.join(LAYERS)}")
        chosen = tuple(x for x in layers)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
        raise ValidationError(f"k must be an integer from 1 to 100, got {k!r}")
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 1:
        raise ValidationError(f"budget_tokens must be a positive integer, got {budget_tokens!r}")
    return scope, need.strip(), rule, chosen


def recall(mem: Memory, scope: Scope | dict[str, Any], need: str, *, decision: str = "lookup",
           layers: Sequence[str] | None = None, k: int = 5, budget_tokens: int = 800,
           principal: str | None = None, since: datetime | None = None,
           until: datetime | None = None) -> Recall:
    """Run the gate; see the module docstring for the contract."""
    from .ranking import rank_candidates

    scope, need, rule, chosen = validate_request(scope, need, decision, layers, k, budget_tokens)
    rank = mem.ranker or rank_candidates
    ranked, considered = rank(mem, scope, need, rule, chosen, k=k, principal=principal,
                              since=since, until=until)
    now = mem.clock.now()
    items: list[Hit] = []
    used = 0
    for hit in ranked:
        if hit.score < rule.floor:
            continue
        if used + hit.tokens > budget_tokens and items:
            continue
        _flag(hit, rule, now)
        items.append(hit)
        used += hit.tokens
        if len(items) >= k:
            break
    reason = None
    if not items:
        reason = ("nothing in scope passed the filters" if considered == 0 else
                  f"{considered} candidates, none above the relevance floor {rule.floor}")
    return Recall(query=need, decision=decision, items=items, tokens=used,
                  considered=considered, empty_reason=reason)


def _flag(hit: Hit, rule: DecisionRule, now: datetime) -> None:
    reasons = []
    if rule.verify_all:
        reasons.append("used for a side effect")
    if hit.untrusted:
        reasons.append("untrusted content")
    if hit.actor in ("agent", "tool") and hit.layer == "facts":
        reasons.append(f"inferred by {hit.actor}")
    if hit.status == "stale":
        reasons.append("past its recheck date")
    if hit.status == "superseded":
        reasons.append("superseded")
    if reasons:
        hit.needs_verification = True
        hit.verify_reason = "; ".join(reasons) + (f": check {hit.source}" if hit.source else "")


__all__ = ["DECISIONS", "DECISION_RULES", "DecisionRule", "Recall", "recall"]
