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
from .temporal import window
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


def semantic(cos: float) -> float:
    """MiniLM cosine to a 0..1 relevance: unrelated text sits near 0.1, paraphrases above 0.6."""
    return min(1.0, max(0.0, (cos - 0.15) / 0.45))


def fuse(lex: dict[str, float], vec: dict[str, float], cov: dict[str, float]) -> dict[str, float]:
    """Hybrid relevance on 0..1: normalised BM25, query coverage, semantic similarity, and
    reciprocal-rank fusion of the two lists (k=60)."""
    top = max(lex.values(), default=0.0) or 1.0
    lex_rank = {rid: i for i, rid in enumerate(sorted(lex, key=lambda r: -lex[r]))}
    vec_rank = {rid: i for i, rid in enumerate(sorted(vec, key=lambda r: -vec[r]))}
    out: dict[str, float] = {}
    for rid in set(lex) | set(vec) | set(cov):
        lexical = 0.5 * cov.get(rid, 0.0) + 0.5 * lex.get(rid, 0.0) / top
        if not vec:
            out[rid] = lexical
            continue
        rrf = sum(1.0 / (60 + ranks[rid]) for ranks in (lex_rank, vec_rank) if rid in ranks)
        out[rid] = (0.45 * semantic(vec.get(rid, 0.0)) + 0.35 * lexical
                    + 0.2 * rrf / (2.0 / 60))
    return out


def rank_candidates(mem: Memory, scope: Scope, need: str, rule: DecisionRule,
                    layers: Sequence[str], *, k: int, principal: str | None,
                    since: datetime | None, until: datetime | None) -> tuple[list[Hit], int]:
    q_terms = terms(need)
    now = mem.clock.now()
    hits: list[Hit] = []
    seen: set[str] = set()
    limit = max(k * 8, 50)
    db = mem.db
    vectors = mem.rt.index.vectors
    qvec = vectors.embedder.embed_query(need) if vectors is not None else None
    with db.transaction(scope.tenant, write=False) as tx:
        if "facts" in layers:
            where, params = applies_sql(scope)
            where += (f" AND {db.readers_clause('r.readers')} AND r.status IN "
                      "('active', 'superseded') AND (r.expires_at IS NULL OR r.expires_at > ?)")
            params += [principal_of(scope, principal), now]
            lex = dict(db.text_search(tx, "facts", need, where, params, limit))
            vec: dict[str, float] = {}
            if vectors is not None and qvec is not None:
                vec = dict(vectors.fact_scores(tx, where, params, qvec, limit))
            rows = _rows(tx, "facts", FACT_COLUMNS, scope.tenant, list(set(lex) | set(vec)))
            cov = {rid: coverage(q_terms, f"{r['claim']} {r['subject']} {r['attribute']}")
                   for rid, r in rows.items()}
            for rid, rel in fuse(lex, vec, cov).items():
                if rid in rows:
                    hits.append(_fact_hit(rows[rid], rel, now))
                    seen.add(rid)
        if "episodes" in layers:
            cutoff = now - rule.max_episode_age if rule.max_episode_age else None
            lower = max(filter(None, (since, cutoff)), default=None)
            where, params = mem.episodes.filter_sql(scope, principal, since=lower, until=until)
            lex = dict(db.text_search(tx, "episodes", need, where, params, limit))
            vec = {}
            if vectors is not None and qvec is not None:
                vec = dict(vectors.search(tx, "episodes", scope, principal_of(scope, principal),
                                          need, limit, now=now, since=lower, until=until,
                                          qvec=qvec))
            from .episodes import _COLUMNS as EP_COLUMNS

            ids = list(set(lex) | set(vec))
            rows = _rows(tx, "episodes", EP_COLUMNS, scope.tenant, ids)
            sup = mem.episodes.superseded_ids(tx, scope.tenant, ids)
            cov = {rid: coverage(q_terms, r["text"] + " " + r["event"]) for rid, r in rows.items()}
            for rid, rel in fuse(lex, vec, cov).items():
                row = rows.get(rid)
                if row is None:
                    continue
                observed = from_text(row["observed_at"]) or now
                hit = mem.episodes.hit(row, 0.0, rid in sup, q_terms)
                hit.score = adjust(rel, actor=row["actor"],
                                   specificity=hit.scope.specificity() if hit.scope else 0,
                                   age_days=(now - observed).total_seconds() / 86400,
                                   superseded=rid in sup)
                hits.append(hit)
    period = window(need, now)
    if period is not None:
        # a date-anchored question: records observed inside the named period come first
        for h in hits:
            if h.layer == "episodes" and h.date is not None:
                h.score = min(1.0, h.score * 1.5) if period.contains(h.date) else h.score * 0.6
    hits.sort(key=lambda h: -h.score)
    return hits, len(hits)


def _fact_hit(row: Row, base: float, now: datetime) -> Hit:
    scope = scope_from_row(row)
    created = from_text(row["created_at"]) or now
    superseded = row["status"] == "superseded"
    recheck = from_text(row["recheck_after"])
    status = "superseded" if superseded else ("stale" if recheck and recheck < now else "current")
    score = adjust(base * (1.1 if row["tier"] == "identity" else 1.0), actor=row["actor"],
                   specificity=scope.specificity(),
                   age_days=(now - created).total_seconds() / 86400, superseded=superseded)
    flags = load_json_list(row["flags"]) or []
    text = excerpt(row["claim"])
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
