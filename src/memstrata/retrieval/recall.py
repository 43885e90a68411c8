"""The retrieval gate (DESIGN §6): recall is a decision, not a similarity dump.

Contract:
1. ``decision`` (planning | lookup | side_effect | recovery) sets which layers
   may answer and how strict freshness is.
2. Filter first: tenant/scope/readers, then status (current before
   superseded; expired and retired out) and freshness — in the SQL that
   selects candidates, so a foreign record can never be ranked or counted.
3. Rank the survivors with the gate's ranker (:mod:`memstrata.retrieval.ranking`), which
   adjusts by status, actor authority, scope specificity and recency.
4. Cut at a relevance floor and a token budget: an empty result is valid and
   says why.
5. Return references with short excerpts and metadata; ``Memory.get(ref)``
   opens one.
6. Flag ``needs_verification`` on stale, inferred (a fact from an untrusted actor of the
   write policy) or untrusted items and on everything used for a ``side_effect``
   decision, naming the source to check.

The gate takes the ranker and what it ranks (:class:`~.ranking.RankSources`), the write
policy (whose actors are untrusted) and the clock; never the facade.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import Field

from ..clock import Clock
from ..errors import ValidationError
from ..governance.policy import WritePolicy
from ..inputs import MAX_K, dates_arg, int_arg, text_arg
from ..models import Hit, Scope, _Model, make_scope
from ..store.lexical import terms
from ..tokens import warm as warm_tokens
from .decisions import DECISION_RULES, DECISIONS, LAYERS, DecisionRule
from .ranking import Ranker, RankRequest, RankSources, hybrid


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


def validate_request(scope: Scope | dict[str, Any], query: Any, decision: Any,
                     layers: Sequence[str] | str | None, k: Any,
                     budget_tokens: Any) -> tuple[Scope, str, DecisionRule, tuple[str, ...]]:
    """The checked request (ValidationError with a hint for any bad argument)."""
    scope = make_scope(scope)
    query = text_arg(query, "query", max_len=4000,
                     hint="describe in a sentence what is needed")
    if not isinstance(decision, str) or decision not in DECISION_RULES:
        raise ValidationError(f"decision must be one of {', '.join(DECISIONS)}; got {decision!r}",
                              hint="e.g. decision='lookup'; 'side_effect' before acting on it")
    rule = DECISION_RULES[decision]
    if layers is None:
        chosen = rule.layers
    else:
        if isinstance(layers, str):
            layers = [layers]
        if not isinstance(layers, Sequence | set | frozenset):
            raise ValidationError(f"layers must be a list of layer names, got "
                                  f"{type(layers).__name__}", hint="e.g. ['facts', 'episodes']")
        bad = [x for x in layers if x not in LAYERS]
        if bad:
            raise ValidationError(f"unknown layers {bad}; choose from {', '.join(LAYERS)}",
                                  hint="e.g. layers=['episodes'], or leave layers out")
        if not layers:
            raise ValidationError("layers is empty: nothing would be searched",
                                  hint=f"name some of {', '.join(LAYERS)}, or leave layers out")
        chosen = (tuple(layers) if isinstance(layers, Sequence)
                  else tuple(x for x in LAYERS if x in layers))
    int_arg(k, "k", low=1, high=MAX_K)
    int_arg(budget_tokens, "budget_tokens", low=1)
    return scope, query, rule, chosen


def _no_candidates(query: str) -> str:
    """Why a ranking kept no candidate at all: a query without a word to search by (only
    common words like 'the', or none), or nothing the caller may read that is relevant to
    it (no match, or matches too weak to stand on their own)."""
    if not terms(query):
        return ("the query has no word to search by (only common words like 'the', or "
                "none): name what to find")
    return ("nothing in scope that the caller may read is relevant to the query (no match, "
            "or only matches too weak to stand on their own)")


class Gate:
    """The retrieval gate over the layers a ranker reads."""

    def __init__(self, sources: RankSources, policy: WritePolicy, clock: Clock, *,
                 ranker: Ranker | None = None) -> None:
        self.sources = sources
        self._policy = policy
        self._clock = clock
        #: The ranking function (:func:`memstrata.retrieval.ranking.hybrid` by default).
        self.ranker: Ranker = ranker or hybrid

    def recall(self, scope: Scope | dict[str, Any], query: str, *, decision: str = "lookup",
               layers: Sequence[str] | None = None, k: int = 5, budget_tokens: int = 800,
               principal: str | None = None, since: datetime | str | None = None,
               until: datetime | str | None = None) -> Recall:
        """Run the gate; see the module docstring for the contract."""
        scope, query, rule, chosen = validate_request(scope, query, decision, layers, k,
                                                      budget_tokens)
        warm_tokens()  # the first search of a process loads the encoder while it ranks
        now = self._clock.now()
        start, end = dates_arg(since, until)
        req = RankRequest(scope=scope, query=query, rule=rule, layers=chosen, k=k,
                          principal=principal, since=start, until=end, now=now)
        ranked, considered = self.ranker(self.sources, req)
        items: list[Hit] = []
        used = 0
        for hit in ranked:
            if hit.score < rule.floor:
                continue
            if used + hit.tokens > budget_tokens and items:
                continue
            self._flag(hit, rule)
            items.append(hit)
            used += hit.tokens
            if len(items) >= k:
                break
        reason = None
        if not items:
            reason = (_no_candidates(query) if considered == 0 else
                      f"{considered} candidates, none above the relevance floor {rule.floor}")
        return Recall(query=query, decision=decision, items=items, tokens=used,
                      considered=considered, empty_reason=reason)

    def rank(self, scope: Scope | dict[str, Any], query: str, *, fact_ids: Sequence[str],
             k: int = 10, principal: str | None = None) -> list[Hit]:
        """The ranker's order over the listed facts, for callers that select and page
        records themselves (the LangGraph store): the same ranking as :meth:`recall`, the
        same filters (scope, readers, status, expiry), without the relevance floor or the
        token budget. Scores are on the same 0..1 scale."""
        k = int_arg(k, "k", low=1, high=10_000)
        scope, query, rule, chosen = validate_request(scope, query, "lookup", ["facts"],
                                                      min(k, MAX_K), 800)
        ids = frozenset(str(i).removeprefix("fact:") for i in fact_ids)
        req = RankRequest(scope=scope, query=query, rule=rule, layers=chosen, k=k,
                          principal=principal, since=None, until=None,
                          now=self._clock.now(), fact_ids=ids)
        ranked, _ = self.ranker(self.sources, req)
        # a ranker that ignores ``fact_ids`` (a custom one) still returns only those facts
        ranked = [h for h in ranked if h.layer == "facts" and h.ref.removeprefix("fact:") in ids]
        for hit in ranked:
            self._flag(hit, rule)
        return ranked[:k]

    def _flag(self, hit: Hit, rule: DecisionRule) -> None:
        reasons = []
        if rule.verify_all:
            reasons.append("used for a side effect")
        if hit.untrusted:
            reasons.append("untrusted content")
        if self._policy.is_untrusted(hit.actor) and hit.layer == "facts":
            reasons.append(f"inferred by {hit.actor}")
        if hit.status == "stale":
            reasons.append("past its recheck date")
        if hit.status == "superseded":
            reasons.append("superseded")
        if reasons:
            hit.needs_verification = True
            hit.verify_reason = "; ".join(reasons) + (f": check {hit.source}" if hit.source
                                                       else "")


__all__ = ["DECISIONS", "DECISION_RULES", "DecisionRule", "Gate", "Recall", "validate_request"]

