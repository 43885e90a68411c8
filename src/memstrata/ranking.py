"""Ranking of candidates that already passed the gate's filters.

Candidates come from the backend's lexical search (and, when an embedder is
configured, vector search) run *inside* the scope/readers/status filter.
Scores are fused, then adjusted by status (current over superseded), actor
authority, scope specificity and recency, and returned on a 0..1 scale so the
gate can apply an absolute relevance floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .clock import from_text
from .episodes import excerpt
from .facts import _COLUMNS as FACT_COLUMNS
from .models import Hit, Scope
from .scoping import SCOPE_COLUMNS, applies_sql, load_json_list, principal_of, scope_from_row
from .store.base import Row
from .store.lexical import terms
from .tokens import count_tokens

if TYPE_CHECKING:
    from .memory import Memory
    from .recall import DecisionRule

AUTHORITY = {"user": 1.0, "reviewer": 1.0, "tool": 0.9, "system": 0.9, "import": 0.8,
             "agent": 0.7}


def coverage(query_terms: Sequence[str], text: str) -> float:
    """Share of the query's content words (stemmed by prefix) present in ``text``."""
    if not query_terms:
        return 0.0
    words = set(terms(text))
    hit = 0
    for q in query_terms:
        stem = q[:5] if len(q) > 5 else q
        if q in words or any(w.startswith(stem) for w in words):
            hit += 1
    return hit / len(query_terms)


def adjust(base: float, *, actor: str | None, specificity: int, age_days: float,
           superseded: bool) -> float:
    """Status, authority, specificity and recency applied to a 0..1 relevance."""
    score = base * AUTHORITY.get(actor or "", 0.8)
    score *= 1.0 + 0.05 * specificity
    score *= 0.85 + 0.15 * math.exp(-max(age_days, 0.0) / 180.0)
    if superseded:
        score *= 0.4
    return min(score, 1.0)


def rank_candidates(mem: Memory, scope: Scope, need: str, rule: DecisionRule,
                    layers: Sequence[str], *, k: int, principal: str | None,
                    since: datetime | None, until: datetime | None) -> tuple[list[Hit], int]:
    q_terms = terms(need)
    now = mem.clock.now()
    hits: list[Hit] = []
    considered = 0
    limit = max(k * 5, 25)
    db = mem.db
    with db.transaction(scope.tenant, write=False) as tx:
        if "facts" in layers:
            where, params = applies_sql(scope)
            where += (f" AND {db.readers_clause('r.readers')} AND r.status IN "
                      "('active', 'superseded') AND (r.expires_at IS NULL OR r.expires_at > ?)")
            params += [principal_of(scope, principal), now]
            found = db.text_search(tx, "facts", need, where, params, limit)
            considered += len(found)
            rows = _rows(tx, "facts", FACT_COLUMNS, scope.tenant, [i for i, _ in found])
            top = max((s for _, s in found), default=1.0) or 1.0
            for rid, s in found:
                hits.append(_fact_hit(rows[rid], s / top, q_terms, now))
        if "episodes" in layers:
            cutoff = now - rule.max_episode_age if rule.max_episode_age else None
            lower = max(filter(None, (since, cutoff)), default=None)
            where, params = mem.episodes.filter_sql(scope, principal, since=lower, until=until)
            found = db.text_search(tx, "episodes", need, where, params, limit)
            considered += len(found)
            from .episodes import _COLUMNS as EP_COLUMNS

            rows = _rows(tx, "episodes", EP_COLUMNS, scope.tenant, [i for i, _ in found])
            sup = mem.episodes.superseded_ids(tx, scope.tenant, [i for i, _ in found])
            top = max((s for _, s in found), default=1.0) or 1.0
            for rid, s in found:
                row = rows[rid]
                base = 0.5 * coverage(q_terms, row["text"] + " " + row["event"]) + 0.5 * s / top
                observed = from_text(row["observed_at"]) or now
                hit = mem.episodes.hit(row, 0.0, rid in sup, q_terms)
                hit.score = adjust(base, actor=row["actor"],
                                   specificity=hit.scope.specificity() if hit.scope else 0,
                                   age_days=(now - observed).total_seconds() / 86400,
                                   superseded=rid in sup)
                hits.append(hit)
    hits.sort(key=lambda h: -h.score)
    return hits, considered


def _fact_hit(row: Row, rel: float, q_terms: Sequence[str], now: datetime) -> Hit:
    scope = scope_from_row(row)
    base = 0.5 * coverage(q_terms, f"{row['claim']} {row['subject']} {row['attribute']}")
    base += 0.5 * rel
    created = from_text(row["created_at"]) or now
    superseded = row["status"] == "superseded"
    recheck = from_text(row["recheck_after"])
    status = "superseded" if superseded else ("stale" if recheck and recheck < now else "current")
    score = adjust(base * (1.1 if row["tier"] == "identity" else 1.0), actor=row["actor"],
                   specificity=scope.specificity(),
                   age_days=(now - created).total_seconds() / 86400, superseded=superseded)
    flags = load_json_list(row["flags"]) or []
    text = excerpt(row["claim"], q_terms)
    return Hit(ref=f"fact:{row['id']}", layer="facts", excerpt=text, score=score,
               date=from_text(row["valid_from"]) or created, kind=row["kind"],
               source=row["source"], actor=row["actor"], status=status, scope=scope,
               untrusted="untrusted" in flags, tokens=count_tokens(text))


def _rows(tx: Any, table: str, columns: str, tenant: str, ids: Sequence[str]) -> dict[str, Row]:
    out: dict[str, Row] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        if chunk:
            marks = ", ".join("?" * len(chunk))
            for row in tx.all(f"SELECT {SCOPE_COLUMNS}, {columns} FROM {table} WHERE tenant = ? "
                              f"AND id IN ({marks})", (tenant, *chunk)):
                out[row["id"]] = row
    return out


__all__ = ["AUTHORITY", "adjust", "coverage", "rank_candidates"]
