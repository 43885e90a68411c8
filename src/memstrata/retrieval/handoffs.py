"""Ranking of handoffs: earlier checkpoint versions and closed tasks (the ``handoffs``
layer, read only when a request asks for it).

A scope holds few of them, so they are read whole (:meth:`Checkpoints.handoffs_in`) and
scored like facts (:func:`~memstrata.retrieval.scoring.fuse`): the query's words each
version holds, weighted by how rare they are among the handoffs searched, and their share;
with an embedder, the cosine of the vector each version got when it was saved. Hits carry
task, version, status (``closed`` with the outcome, or ``superseded``) and date.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..layers.checkpoints import Checkpoints
from ..layers.episode_records import excerpt
from ..models import Checkpoint, Hit, Scope
from ..store.lexical import bm25_idf
from ..store.sql import checkpoint_vector_id
from ..tokens import count_tokens
from .scoring import adjust_raw, fuse, held


def rank_handoffs(checkpoints: Checkpoints, tx: Any, scope: Scope, q_terms: Sequence[str],
                  raw: dict[str, float], vectors: Any, qvec: Any, *, now: datetime,
                  since: datetime | None, until: datetime | None,
                  beside: bool = False) -> list[Hit]:
    """Earlier checkpoint versions and closed tasks of ``scope`` within the dates, ranked
    like facts (:func:`fuse`): their words (the query's words each version holds, weighted
    by how rare they are among the handoffs searched, and their share) and, with an
    embedder, their vectors' cosines; a version with no evidence is left out. Asked for
    alone, a version a later one replaced is not marked down as a superseded record is (to
    0.4, under most floors on meaning alone): every handoff is past state, and these
    versions are what the layer is asked for; its status says so. Asked for ``beside``
    current records (facts or episodes), it is: a replaced plan never outranks the
    decision that replaced it. Hits carry who saved the version as actor and source (a
    version saved without a name: ``system``, as it is ranked, and the version itself as its
    source, so no hit reads as unsourced). Each hit's uncapped score goes to ``raw``
    (:func:`~memstrata.retrieval.scoring.rank_order`)."""
    found: dict[str, tuple[Checkpoint, str, datetime, str]] = {}
    for cp, status in checkpoints.handoffs_in(tx, scope):
        when = cp.updated_at or now
        if (since is not None and when < since) or (until is not None and when > until):
            continue
        found[cp.ref] = (cp, status, when, Checkpoints.text_of(cp))
    if not found:
        return []
    words = {ref: held(q_terms, text) for ref, (*_, text) in found.items()}
    n = len(found)
    df = {q: sum(q in w for w in words.values()) for q in q_terms}
    lex = {ref: sum(bm25_idf(n, df[q]) for q in w) for ref, w in words.items() if w}
    cov = {ref: len(w) / len(q_terms) for ref, w in words.items() if q_terms}
    vec: dict[str, float] = {}
    if vectors is not None and qvec is not None:
        by_id = {checkpoint_vector_id(cp.scope.key, cp.task, cp.version): ref
                 for ref, (cp, *_) in found.items()}
        vec = {by_id[vid]: cos for vid, cos in vectors.record_scores(
            tx, scope.tenant, checkpoints.table, list(by_id), qvec).items()}
    out: list[Hit] = []
    for ref, rel in fuse(lex, vec, cov).items():
        cp, status, when, text = found[ref]
        age = (now - when).total_seconds() / 86400
        score = adjust_raw(rel, actor="system", specificity=cp.scope.specificity(),
                           age_days=age, superseded=beside and status == "superseded")
        shown = excerpt(text, q_terms)
        hit = Hit(ref=cp.ref, layer="handoffs", excerpt=shown, score=min(score, 1.0),
                  date=when, kind="checkpoint", source=cp.updated_by or cp.ref,
                  actor=cp.updated_by or "system", status=status,
                  scope=cp.scope, outcome=cp.outcome, task=cp.task, version=cp.version,
                  tokens=count_tokens(shown))
        raw[hit.ref] = score
        out.append(hit)
    return out


__all__ = ["rank_handoffs"]
