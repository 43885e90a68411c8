"""Ranking of candidates that already passed the gate's filters.

Candidates come from the backend's lexical search (and, when an embedder is
configured, vector search) run *inside* the scope/readers/status filter.
Scores are fused, then adjusted by status (current over superseded), actor
authority, scope specificity and recency, and returned on a 0..1 scale so the
gate can apply an absolute relevance floor.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
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
    score *= 0.95 + 0.05 * math.exp(-max(age_days, 0.0) / 180.0)
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
            hits += _rank_episodes(mem, tx, scope, need, rule, principal, since, until, now,
                                   limit, qvec, keep=max(3 * k, 20))
    hits.sort(key=lambda h: -h.score)
    return hits, len(hits)


#: Weights of the episode score (chosen on the LoCoMo dev split, stable under
#: leave-one-conversation-out; see benchmarks/research/README.md).
W_LEXICAL, W_SEMANTIC, W_SUBJECT, W_PERIOD = 0.5, 0.5, 0.3, 0.2
#: Below this absolute evidence (semantic or word coverage) a candidate is noise.
MIN_EVIDENCE = 0.25
_MAX_EPISODE_REL = W_LEXICAL + W_SEMANTIC + W_SUBJECT + W_PERIOD
_NAME_RE = re.compile(r"[A-Za-z][\w\-]*")


def named_subjects(tx: Any, tenant: str, need: str) -> set[str]:
    """Episode subjects (speakers, systems) the query names as a word."""
    words = {w for w in _NAME_RE.findall(need.replace("\u2019", "'").replace("'s", ""))
             if len(w) > 1}
    candidates = sorted(words | {w.lower() for w in words} | {w.title() for w in words})
    if not candidates:
        return set()
    marks = ", ".join("?" * len(candidates))
    rows = tx.all(f"SELECT DISTINCT subject FROM episodes WHERE tenant = ? AND subject IN "
                  f"({marks})", (tenant, *candidates))
    return {r["subject"] for r in rows}


def _rank_episodes(mem: Memory, tx: Any, scope: Scope, need: str, rule: DecisionRule,
                   principal: str | None, since: datetime | None, until: datetime | None,
                   now: datetime, limit: int, qvec: Any, keep: int) -> list[Hit]:
    """Hybrid episode ranking: BM25 over the episode and its thread context (normalised by
    the best match) plus cosine, a boost when the query names the episode's subject, and a
    boost inside a period the query names; an absolute evidence floor keeps noise out."""
    db, vectors = mem.db, mem.rt.index.vectors
    cutoff = now - rule.max_episode_age if rule.max_episode_age else None
    lower = max(filter(None, (since, cutoff)), default=None)
    where, params = mem.episodes.filter_sql(scope, principal, since=lower, until=until)
    named = named_subjects(tx, scope.tenant, need)
    drop = sorted({w.lower() for n in named for w in n.split()})
    lex = dict(db.text_search(tx, "episodes", need, where, params, limit, drop=drop))
    vec: dict[str, float] = {}
    if vectors is not None and qvec is not None:
        vec = dict(vectors.search(tx, "episodes", scope, principal_of(scope, principal), need,
                                  limit, now=now, since=lower, until=until, qvec=qvec))
    from .episodes import _COLUMNS as EP_COLUMNS

    ids = list(set(lex) | set(vec))
    rows = _rows(tx, "episodes", EP_COLUMNS, scope.tenant, ids)
    sup = mem.episodes.superseded_ids(tx, scope.tenant, ids)
    q_terms = [t for t in terms(need) if t not in drop]
    top = max(lex.values(), default=0.0) or 1.0
    period = window(need, now)
    boost_subject = len(named) == 1
    scored: list[tuple[float, str, datetime]] = []
    for rid in ids:
        row = rows.get(rid)
        if row is None:
            continue
        cos = vec.get(rid)
        sem = semantic(cos) if cos is not None else 0.0
        cov = 0.0
        if q_terms and (sem < MIN_EVIDENCE or vectors is None):
            cov = coverage(q_terms, f"{row['text']} {row['event']}")
        if max(cov, sem) < MIN_EVIDENCE:
            continue
        lexical = lex.get(rid, 0.0) / top
        if vectors is not None:
            rel = W_LEXICAL * lexical + W_SEMANTIC * max(cos or 0.0, 0.0)
        else:
            rel = 0.5 * lexical + 0.5 * cov
        observed = from_text(row["observed_at"]) or now
        if boost_subject and row["subject"] in named:
            rel += W_SUBJECT
        # people report an event on the day or a few days after it happened
        if period is not None and (period.contains(observed)
                                   or period.contains(observed - timedelta(days=3))):
            rel += W_PERIOD
        specificity = sum(row[c] is not None for c in ("s_user", "s_project", "s_agent"))
        score = adjust(rel / _MAX_EPISODE_REL, actor=row["actor"], specificity=specificity,
                       age_days=(now - observed).total_seconds() / 86400,
                       superseded=rid in sup)
        scored.append((score, rid, observed))
    # build result objects (excerpt, token count) only for what can make the cut
    scored.sort(key=lambda x: -x[0])
    hits: list[Hit] = []
    for score, rid, _ in scored[:keep]:
        hit = mem.episodes.hit(rows[rid], 0.0, rid in sup, q_terms)
        hit.score = score
        hits.append(hit)
    return hits


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
