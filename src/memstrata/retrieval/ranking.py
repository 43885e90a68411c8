"""Ranking of candidates that already passed the gate's filters.

A ranker is a function ``ranker(sources, request) -> (hits, considered)`` over
:class:`RankSources` (the facts and episodes layers and their index) and a
:class:`RankRequest` (scope, query, decision rule, layers, k, principal, dates, now). The
default, :func:`hybrid`, takes candidates from the engine's lexical search (and, with an
embedder, vector search) run *inside* each layer's read filter (``filter_sql``), fuses the
scores, adjusts them by status (current over superseded), actor authority, scope
specificity and recency, and returns them on a 0..1 scale so the gate can apply an
absolute relevance floor. Handoffs (earlier checkpoint versions, closed tasks; few per
scope) are read whole and fused like facts: the words each holds and its vector's cosine.
The evaluation harness swaps rankers through the same seam. The request and its sources
are :mod:`~memstrata.retrieval.sources`; the episodes' candidates and score,
:mod:`~memstrata.retrieval.episode_ranking`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any

from ..layers.episode_records import excerpt
from ..models import Fact, Hit
from ..scoping import principal_of
from ..store.base import Nearest
from ..store.lexical import AllCommon, terms
from ..store.sql import marks
from ..tokens import count_tokens
from .episode_ranking import EpisodeCandidates, EpisodeScorer, pool_size, rank_episodes
from .handoffs import rank_handoffs
from .scoring import (
    AUTHORITY,
    adjust_raw,
    candidate_weight,
    coverage,
    evident,
    fuse,
    rank_order,
    semantic,
)
from .sources import Ranker, RankRequest, RankSources


class _EmbedWorkers:
    """The threads that embed a recall's query while its lexical searches run.

    onnxruntime and SQLite both release the GIL, so the full-text searches (the largest
    share of a recall past a few thousand episodes) cost no wall time beside the
    embedding, and a small store answers in about the embedding's time. A worker holds no
    transaction: :func:`hybrid` waits for it between its two read transactions.

    The threads are started on demand and reused (at most :data:`EMBED_WORKERS`: concurrent
    recalls each get one, as long as there are no more of them): starting a thread for
    each query cost 0.2-0.5 ms of a 1k-episode recall's 7-8 ms on a busy 2-core machine. A
    process forked from one that had workers starts its own (the parent's threads do not
    exist in the child); once the interpreter is shutting down, a query is embedded in the
    caller's thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def forget(self) -> None:
        """In a forked child: the parent's threads (and its lock's holder) are not here."""
        self._lock = threading.Lock()
        self._pool = None

    def submit(self, fn: Callable[[str], Any], query: str) -> Future[Any]:
        """``fn(query)`` on a worker; the future's ``result()`` raises what ``fn`` raised."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(EMBED_WORKERS,
                                                thread_name_prefix="memstrata-query-embedding")
            pool = self._pool
        try:
            return pool.submit(fn, query)
        except RuntimeError:  # the interpreter is shutting down: no new threads
            done: Future[Any] = Future()
            try:
                done.set_result(fn(query))
            except Exception as exc:  # raised to the caller by result(), as from a worker
                done.set_exception(exc)
            return done


#: Query embeddings that may run at once (one per concurrent recall, up to this many).
EMBED_WORKERS = 16
_WORKERS = _EmbedWorkers()
os.register_at_fork(after_in_child=_WORKERS.forget)


class _QueryVector:
    """A recall's query vector, made on a worker (:class:`_EmbedWorkers`), and, when the
    first transaction handed its episode vector search over in time
    (:meth:`VectorIndex.prepare_search`), the nearest episodes, found on the same worker as
    soon as the vector is there, beside the lexical searches (the search is 0.5-0.6 ms of a
    20k-episode recall's 4.7 ms; on 2 cores, where it competes with them for the CPU,
    recall measured about 3% faster)."""

    def __init__(self, embed: Callable[[str], Any], query: str) -> None:
        self._embed = embed
        self._lock = threading.Lock()
        self._search: Nearest | None = None
        self._started = False
        self.future = _WORKERS.submit(self._run, query)

    def _run(self, query: str) -> tuple[Any, list[tuple[str, float]] | None]:
        qvec = self._embed(query)
        with self._lock:
            self._started = True
            search = self._search
        return qvec, (search(qvec) if search is not None and qvec is not None else None)

    def hand_over(self, search: Nearest) -> None:
        """Let the worker run ``search`` once the vector is made (if it is not yet)."""
        with self._lock:
            if not self._started:
                self._search = search

    def waiting(self) -> bool:
        """Whether the worker is still at it."""
        return not self.future.done()

    def result(self, search: Nearest | None) -> tuple[Any, list[tuple[str, float]] | None]:
        """The vector and the nearest episodes (found here with ``search`` when the worker
        did not run it); raises what the embedding raised."""
        qvec, near = self.future.result()
        if near is None and search is not None and qvec is not None:
            near = search(qvec)
        return qvec, near


def hybrid(src: RankSources, req: RankRequest) -> tuple[list[Hit], int]:
    """The default ranker (see the module docstring).

    Two read transactions: the lexical searches first, while the query is embedded
    (:class:`_EmbedWorkers`), and as long as the embedding takes, the rows of the best
    lexical matches and then their hits but for the score; the episode vector search is
    chosen over the first transaction's view and runs on the embedding's worker where the
    engine allows (:class:`_QueryVector`); then the other vector searches, the other rows
    and the scores. A candidate forgotten between them is dropped (its row is gone), never
    shown.
    """
    q_terms = terms(req.query, evidence=True)
    hits: list[Hit] = []
    raw: dict[str, float] = {}
    limit = pool_size(req.k)
    vectors = src.index.vectors
    pending = _QueryVector(src.index.embed_query, req.query) if vectors is not None else None
    # with vectors, a query of only very common words ranks by them alone (see text_search)
    all_common: AllCommon = "keep" if vectors is None else "drop"
    fact_filter = _fact_filter(src, req) if "facts" in req.layers else None
    episodes = EpisodeCandidates.of(src, req) if "episodes" in req.layers else None
    scorer: EpisodeScorer | None = None
    fact_lex: dict[str, float] = {}
    near_search: Nearest | None = None
    with src.db.transaction(req.scope.tenant, write=False) as tx:
        if episodes is not None and vectors is not None and pending is not None:
            near_search = vectors.prepare_search(
                tx, req.scope, principal_of(req.scope, req.principal), limit, now=req.now,
                since=episodes.lower, until=req.until)
            if near_search is not None:
                pending.hand_over(near_search)
        if fact_filter is not None:
            where, params = fact_filter
            fact_lex = dict(src.db.text_search(
                tx, "facts", req.query, where, params, limit, all_common=all_common,
                among=src.facts.filter_sql(req.scope, req.principal, statuses=None,
                                           include_expired=True),
                weight=(candidate_weight(SUPERSEDED_FACT), ())))
        if episodes is not None:
            scorer = episodes.search_text(src, tx, req, limit, all_common,
                                          with_vectors=vectors is not None)
            if pending is not None:
                scorer.prefetch(src.episodes, tx, req.scope.tenant, pending.waiting)
    qvec, near = pending.result(near_search) if pending is not None else (None, None)
    with src.db.transaction(req.scope.tenant, write=False) as tx:
        if fact_filter is not None:
            where, params = fact_filter
            vec: dict[str, float] = {}
            if vectors is not None and qvec is not None:
                vec = dict(vectors.fact_scores(tx, where, params, qvec, limit,
                                               weight=candidate_weight(SUPERSEDED_FACT)))
            found = src.facts.read_many(tx, req.scope.tenant, list(set(fact_lex) | set(vec)))
            cov = {rid: coverage(q_terms, f"{f.claim} {f.subject} {f.attribute}")
                   for rid, f in found.items()}
            # a fact needs evidence of its own, as an episode does (a common word of the
            # query is none where the vector calls the claim unrelated); a caller ranking
            # the facts it chose (fact_ids: the LangGraph store's search) gets them all
            judge = vectors is not None and qvec is not None and src.index.judges_meaning
            floor = min(vec.values()) if len(vec) >= limit else None
            for rid, rel in fuse(fact_lex, vec, cov).items():
                cos = vec.get(rid)
                if req.fact_ids is None and not evident(
                        semantic(cos) if cos is not None else 0.0, cov.get(rid, 0.0),
                        cos if cos is not None else floor, judge=judge):
                    continue
                if rid in found:
                    uncapped = _fact_raw(found[rid], rel, req.now)
                    raw[f"fact:{rid}"] = uncapped
                    hits.append(fact_hit(found[rid], rel, req.now, uncapped=uncapped))
        if scorer is not None:
            hits += rank_episodes(src, tx, req, scorer, limit, qvec, near,
                                   keep=req.k + KEEP_SPARE, raw=raw)
        if "handoffs" in req.layers and src.checkpoints is not None:
            hits += rank_handoffs(src.checkpoints, tx, req.scope, q_terms, raw, vectors,
                                  qvec, now=req.now, since=req.since, until=req.until,
                                  beside=len(req.layers) > 1)
    rank_order(hits, raw)
    return hits, len(hits)


#: SQL true for a fact (alias ``r``) something newer replaced.
SUPERSEDED_FACT = "r.status = 'superseded'"


def _fact_filter(src: RankSources, req: RankRequest) -> tuple[str, list[Any]]:
    """The facts' read filter for this request (active and superseded, the listed ids,
    dated within ``since``/``until`` by the date a fact's hit shows: when it holds from,
    else when it was stated)."""
    where, params = src.facts.filter_sql(req.scope, req.principal,
                                         statuses=("active", "superseded"))
    if req.since is not None:
        where += " AND COALESCE(r.valid_from, r.created_at) >= ?"
        params = [*params, req.since]
    if req.until is not None:
        where += " AND COALESCE(r.valid_from, r.created_at) <= ?"
        params = [*params, req.until]
    if req.fact_ids is not None:
        ids = sorted(req.fact_ids) or [""]
        where += f" AND r.id IN ({marks(ids)})"
        params = [*params, *ids]
    return where, list(params)


#: Episode hits a ranking builds beyond the k asked for: spares for the gate, which skips a
#: hit that would overflow the token budget and takes the next.
KEEP_SPARE = 10

def _fact_raw(f: Fact, base: float, now: datetime) -> float:
    created = f.created_at or now
    return adjust_raw(base * (1.1 if f.tier == "identity" else 1.0), actor=f.provenance.actor,
                      specificity=f.scope.specificity(),
                      age_days=(now - created).total_seconds() / 86400,
                      superseded=f.status == "superseded")


def fact_hit(f: Fact, base: float, now: datetime, *, uncapped: float | None = None) -> Hit:
    """The recall result for a fact: reference, excerpt, metadata and adjusted score
    (``uncapped``: the adjusted score before the cap, when the caller has it already)."""
    created = f.created_at or now
    superseded = f.status == "superseded"
    status = "superseded" if superseded else ("stale" if f.is_stale(now) else "current")
    score = min(_fact_raw(f, base, now) if uncapped is None else uncapped, 1.0)
    text = excerpt(f.claim)
    return Hit(ref=f.ref, layer="facts", excerpt=text, score=score,
               date=f.valid_from or created, kind=f.kind, source=f.provenance.source,
               actor=f.provenance.actor, status=status, scope=f.scope,
               untrusted="untrusted" in f.flags, tokens=count_tokens(text))


__all__ = ["AUTHORITY", "RankRequest", "RankSources", "Ranker", "adjust_raw",
           "coverage", "fact_hit", "fuse", "hybrid", "rank_order", "semantic"]
