"""The scoring rules every layer's ranking shares: how much of the query a text holds, how
a relevance is adjusted (authority, scope specificity, recency, status), a cosine on the
0..1 scale, the fusion of word and vector evidence, and the deterministic order of hits.
Defined once here; :mod:`memstrata.retrieval.ranking` (facts, episodes) and
:mod:`memstrata.retrieval.handoffs` use them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..models import Hit
from ..store.lexical import fold, has_cjk, terms

AUTHORITY = {"user": 1.0, "reviewer": 1.0, "tool": 0.9, "system": 0.9, "import": 0.8,
             "agent": 0.7}


def held(query_terms: Sequence[str], text: str) -> list[str]:
    """The query's content words (stemmed by prefix, accents aside as the index matches
    them: :func:`~memstrata.store.lexical.fold`) present in ``text``."""
    if not query_terms:
        return []
    folded = fold(text.lower())  # lower first: "ΟΔΟΣ" ends in a final sigma, which fold maps
    words = terms(folded)
    # the parts of "deploy-preview", "foo_bar" or "l'équipe" too: the index holds them as
    # words
    words += [part for w in words if "-" in w or "_" in w or "'" in w
              for part in w.replace("_", "-").replace("'", "-").split("-") if part]
    present = set(words)
    # " w1 w2 ...": a word starts with ``stem`` exactly when " " + stem occurs in it
    # (content words hold no spaces); one substring search instead of a loop over words
    joined = " " + " ".join(words)
    out = []
    for q in query_terms:
        bare = fold(q)
        if bare in present or (" " + (bare[:5] if len(bare) > 5 else bare)) in joined or (
                has_cjk(bare) and bare in folded):  # CJK: no spaces between words
            out.append(q)
    return out


def coverage(query_terms: Sequence[str], text: str) -> float:
    """Share of the query's content words (stemmed by prefix) present in ``text``."""
    return len(held(query_terms, text)) / len(query_terms) if query_terms else 0.0


#: What each scope level a record names (user, project, agent) adds to its score.
SPECIFICITY_STEP = 0.05
#: The factor of a record something newer replaced.
SUPERSEDED_FACTOR = 0.4


def adjust_raw(base: float, *, actor: str | None, specificity: int, age_days: float,
               superseded: bool) -> float:
    """Status, authority, specificity and recency applied to a relevance (uncapped)."""
    score = base * AUTHORITY.get(actor or "", 0.8)
    score *= 1.0 + SPECIFICITY_STEP * specificity
    score *= 0.95 + 0.05 * math.exp(-max(age_days, 0.0) / 180.0)
    if superseded:
        score *= SUPERSEDED_FACTOR
    return score


def candidate_weight(superseded: str) -> str:
    """The adjustments of :func:`adjust_raw` that decide which matches a candidate list
    keeps, as SQL over the record (alias ``r``; ``superseded``: SQL true for a replaced
    record): its scope's specificity and its status. The words' list is cut at a limit
    before the rows are read; ordered by its score alone, 100 superseded versions of a
    fact, or 100 user-wide copies of a line, filled it and left out the current fact and
    the project's own line that outrank them. Authority and recency (0.7-1.0, 0.95-1.0)
    stay with the ranking, which reads the row."""
    levels = " + ".join(f"CASE WHEN r.{c} IS NULL THEN 0 ELSE 1 END"
                        for c in ("s_user", "s_project", "s_agent"))
    return (f"((1.0 + {SPECIFICITY_STEP} * ({levels})) * "
            f"CASE WHEN {superseded} THEN {SUPERSEDED_FACTOR} ELSE 1.0 END)")


def rank_order(hits: list[Hit], raw: dict[str, float]) -> None:
    """Sort best first, deterministically: the shown score, then the uncapped one (two
    items capped at 1.0 keep their true order), then the more specific scope, the newer
    date and the reference."""
    hits.sort(key=lambda h: (-h.score, -raw.get(h.ref, h.score),
                             -(h.scope.specificity() if h.scope is not None else 0),
                             -(h.date.timestamp() if h.date is not None else 0.0), h.ref))


def semantic(cos: float) -> float:
    """MiniLM cosine to a 0..1 relevance: unrelated text sits near 0.1, paraphrases above 0.6."""
    return min(1.0, max(0.0, (cos - 0.15) / 0.45))


#: Absolute evidence (semantic similarity or the share of the query's words in the text)
#: a candidate needs to stand on its own.
MIN_EVIDENCE = 0.25
#: The share of the query's words that is evidence even where the vector calls the text
#: unrelated (:func:`semantic` 0: "Oh wow, good for you." for "a good recipe for banana
#: bread", one word in four). Below it, a word match counts only where the vector does
#: not say so; a lexical-only ranking (no embedder), or one whose embedder knows nothing of
#: meaning (``knows_meaning = False``: the hashing one), keeps :data:`MIN_EVIDENCE`.
WORDS_ALONE = 0.5


def evident(sem: float, cov: float, near: float | None, *, judge: bool) -> bool:
    """Whether a candidate has evidence of its own, for every layer: its meaning is close
    (``sem``: :func:`semantic` of its cosine, :data:`MIN_EVIDENCE`), or it holds enough of
    the query's words (``cov``) and, below :data:`WORDS_ALONE` of them, its vector does
    not call it unrelated (``near``: its cosine, or the bound of one a vector list left
    out; ``judge``: the embedder's cosine is meaning's)."""
    if sem >= MIN_EVIDENCE:
        return True
    if cov < MIN_EVIDENCE:
        return False
    return cov >= WORDS_ALONE or not (judge and near is not None and semantic(near) <= 0.0)


def fuse(lex: dict[str, float], vec: dict[str, float], cov: dict[str, float]) -> dict[str, float]:
    """Hybrid relevance on 0..1: normalised BM25, query coverage, semantic similarity, and
    reciprocal-rank fusion of the two lists (k=60). A record with no evidence at all (no
    word of the query, a cosine where :func:`semantic` gives 0) is left out: its place in
    the vector list alone is no relevance."""
    top = max(lex.values(), default=0.0) or 1.0
    lex_rank = {rid: i for i, rid in enumerate(sorted(lex, key=lambda r: -lex[r]))}
    vec_rank = {rid: i for i, rid in enumerate(sorted(vec, key=lambda r: -vec[r]))}
    out: dict[str, float] = {}
    for rid in set(lex) | set(vec) | set(cov):
        lexical = 0.5 * cov.get(rid, 0.0) + 0.5 * lex.get(rid, 0.0) / top
        sem = semantic(vec.get(rid, 0.0))
        if lexical <= 0.0 and sem <= 0.0:
            continue
        if not vec:
            out[rid] = lexical
            continue
        rrf = sum(1.0 / (60 + ranks[rid]) for ranks in (lex_rank, vec_rank) if rid in ranks)
        out[rid] = 0.45 * sem + 0.35 * lexical + 0.2 * rrf / (2.0 / 60)
    return out


__all__ = [
    "AUTHORITY",
    "MIN_EVIDENCE",
    "SPECIFICITY_STEP",
    "SUPERSEDED_FACTOR",
    "WORDS_ALONE",
    "adjust_raw",
    "candidate_weight",
    "coverage",
    "evident",
    "fuse",
    "held",
    "rank_order",
    "semantic",
]
