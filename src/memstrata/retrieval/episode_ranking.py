"""The episodes' part of the default ranking (:func:`memstrata.retrieval.ranking.hybrid`):
their candidates and their score.

Contract:
- :class:`EpisodeCandidates` is a request's read filter of episodes; its
  :meth:`~EpisodeCandidates.search_text` searches the words (and the subjects the query
  names) inside it before the query vector is ready.
- :func:`rank_episodes` scores the candidates of both lists (words, vectors), each with
  both measures (a candidate one list left out gets that list's measure of it all the
  same), so a hit's score is its own whatever the k: BM25 over the episode and its thread
  context (normalised by the best match) plus the cosine, boosts for a named subject and
  a named period, the adjustments of :func:`~memstrata.retrieval.scoring.adjust_raw`, and
  an evidence floor that keeps noise out. It reads rows best bound first and stops where
  no unread candidate can enter the hits asked for.
- Weights and floors are chosen on the LoCoMo dev split (benchmarks/research/README.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..clock import from_text
from ..layers.episode_records import row_hit
from ..layers.episodes import Episodes
from ..models import Hit
from ..scoping import principal_of
from ..store.base import Row
from ..store.lexical import AllCommon, terms
from ..store.sql import marks
from .scoring import (
    MIN_EVIDENCE,
    WORDS_ALONE,
    adjust_raw,
    candidate_weight,
    coverage,
    evident,
    semantic,
)
from .sources import RankRequest, RankSources
from .temporal import window

#: Weights of the episode score (chosen on the LoCoMo dev split, stable under
#: leave-one-conversation-out; see benchmarks/research/README.md).
W_LEXICAL, W_SEMANTIC, W_SUBJECT, W_PERIOD = 0.5, 0.5, 0.3, 0.2
#: Candidates each list (words, vectors) gives a ranking of up to 10 hits; 8 a hit past
#: that. The same for every k up to 10 (the default 5, ``context``'s 8, the bench's 10): a
#: smaller k's hits are the first of a larger one's. A candidate one list left out is
#: scored with that list's measure of it all the same (its cosine, :func:`rank_episodes`;
#: its words, :meth:`EpisodeScorer.fill_lex`), so a hit's score is its own whatever the
#: k: k=5 took 50 per list and k=10 80, and a word match the shorter vector list left out
#: scored 0.34 at k=8 and 0.49 at k=10. 80 per list was chosen on the LoCoMo dev split
#: (40: R@10 0.775, 80: 0.783, 300: 0.774; benchmarks/research/README.md), when a
#: candidate one list left out scored none of its measure; scored in full: R@5 0.710,
#: R@10 0.778, R@20 0.844, multi-hop R@10 0.480 (against 0.694, 0.783, 0.839, 0.494).
POOL = 80


#: Word matches a ranking reads past its candidates, to score a vector match the candidates
#: left out with its words (reading all of a query's matches costs what reading 80 does:
#: at 10k and 20k synthetic episodes 0.9-1.1 ms for 80, 1,000 or 5,000, most queries
#: matching 200-1,000); past them, those episodes' words are searched for alone.
WORD_SCORES = 1_000


def pool_size(k: int) -> int:
    """Candidates per list for a request of ``k`` hits (:data:`POOL`)."""
    return max(POOL, 8 * k)


#: Rows a batch of :meth:`EpisodeScorer.prefetch` reads (between two looks at the query
#: vector).
_PREFETCH_BATCH = 16
#: Hits :meth:`EpisodeScorer.prefetch` shapes between two looks at the query vector (the
#: excerpt, its token count and the model's validation: 0.33-0.37 ms for a recall's 20 hits,
#: measured at 10k and 20k episodes; the batch size itself was not tuned).
_SHAPE_BATCH = 4
#: A candidate below :data:`MIN_EVIDENCE` is kept only beside evidence: when a candidate of
#: the ranking has *semantic* evidence (one query word in common is not enough; without
#: vectors, :data:`WORDS_ALONE` of the query's words in its own text), and its relevance is
#: at least this share of the best such candidate's (a turn found through its thread
#: context, say, which its own words and vector do not carry). Relevance is compared before
#: the adjustments (authority, recency, scope), so who wrote the best match does not decide
#: whether its thread's other turns stand beside it: with the share at 0.4 of the adjusted
#: score, a question found through the user's answer after it was dropped (0.245 against
#: 0.626) and kept beside an agent's answer (0.438). A turn found only through its
#: neighbour's words gets half their weight (the context column) and scores about 0.4 of
#: that neighbour, so the share is 0.3. Without a candidate with semantic evidence, such
#: candidates are dropped: an unrelated query still returns nothing. On the LoCoMo dev
#: split (benchmarks/research/README.md) dropping them all loses evidence: R@10 0.769
#: against 0.783 with the share at 0.3, 0.4 or 0.5, the same as no floor at all (0.778 with
#: 0.3 and every candidate scored with both measures, as with 0.4); without vectors, 0.639
#: against 0.707 (shares 0.2 to 0.4 alike), where :data:`WORDS_SHARE` applies.
NEIGHBOUR_SHARE = 0.3
#: Without vectors, the share of the best word match a candidate's word match needs to
#: stand beside it (:meth:`EpisodeScorer.beside_evidence`): a text holding one word of a
#: question scores under it and stays out, a turn found through its thread context (a
#: third of the turn that holds the words, and more) stands.
WORDS_SHARE = 0.4
_MAX_EPISODE_REL = W_LEXICAL + W_SEMANTIC + W_SUBJECT + W_PERIOD
_NAME_RE = re.compile(r"[A-Za-z][\w\-]*")


def named_subjects(src: RankSources, tx: Any, where: str, params: Sequence[Any],
                   query: str) -> set[str]:
    """Subjects (speakers, systems) of the episodes the caller may read (``where``) that the
    query names as a word."""
    words = {w for w in _NAME_RE.findall(query.replace("\u2019", "'").replace("'s", ""))
             if len(w) > 1}
    candidates = sorted(words | {w.lower() for w in words} | {w.title() for w in words})
    return src.episodes.subjects_named(tx, where, params, candidates)


@dataclass(frozen=True)
class EpisodeCandidates:
    """The episodes' read filter for a request (and the earliest date it admits)."""

    where: str
    params: list[Any]
    lower: datetime | None

    @classmethod
    def of(cls, src: RankSources, req: RankRequest) -> EpisodeCandidates:
        cutoff = req.now - req.rule.max_episode_age if req.rule.max_episode_age else None
        lower = max(filter(None, (req.since, cutoff)), default=None)
        where, params = src.episodes.filter_sql(req.scope, req.principal, since=lower,
                                                until=req.until)
        return cls(where, list(params), lower)

    def search_text(self, src: RankSources, tx: Any, req: RankRequest, limit: int,
                    all_common: AllCommon, *, with_vectors: bool) -> EpisodeScorer:
        """Search the words and the subjects the query names (before the query vector is
        ready); returns the scorer of the matches."""
        named = named_subjects(src, tx, self.where, self.params, req.query)
        drop = sorted({w.lower() for n in named for w in n.split()})
        # words weigh among every episode the caller may read, whatever the window or the
        # expiry (text_search): a long-lived process weighs them as a fresh one does
        among = src.episodes.filter_sql(req.scope, req.principal, include_expired=True)
        # with vectors, the matches past the candidates too (as cheap, up to WORD_SCORES):
        # a vector match the candidates left out is scored with its words (fill_lex)
        read = max(limit, WORD_SCORES) if with_vectors else limit
        superseded, sup_params = src.episodes.superseded_sql(req.scope.tenant)
        found = src.db.text_search(tx, "episodes", req.query, self.where, self.params, read,
                                   drop=drop, all_common=all_common, among=among,
                                   weight=(candidate_weight(superseded), sup_params))

        def lex_of(tx: Any, ids: Sequence[str]) -> dict[str, float]:
            # the same search, of these episodes alone: the scores the list would give them
            return dict(src.db.text_search(
                tx, "episodes", req.query, f"{self.where} AND r.id IN ({marks(ids)})",
                [*self.params, *ids], len(ids), drop=drop, all_common=all_common,
                among=among))
        return EpisodeScorer(req, dict(found[:limit]), named, drop, lower=self.lower,
                              with_vectors=with_vectors,
                              vectors_judge=with_vectors and src.index.judges_meaning,
                              more=dict(found[limit:]),
                              lex_of=lex_of if len(found) >= read else None)


def rank_episodes(src: RankSources, tx: Any, req: RankRequest, scorer: EpisodeScorer,
                   limit: int, qvec: Any, near: list[tuple[str, float]] | None, keep: int,
                   raw: dict[str, float]) -> list[Hit]:
    """Hybrid episode ranking: BM25 over the episode and its thread context (normalised by
    the best match) plus cosine, a boost when the query names the episode's subject, and a
    boost inside a period the query names; an evidence floor keeps noise out (a candidate
    needs absolute evidence or a score near the best one that has it: :data:`NEIGHBOUR_SHARE`;
    a few of the query's words are no evidence where the vector calls the text unrelated:
    :data:`WORDS_ALONE`)

    Candidates are read best bound first, in batches, until no unread candidate can reach
    the ``keep`` best (:meth:`EpisodeScorer.bound`): the same hits as scoring every
    candidate, for a fraction of the rows, and the hits are built from the rows scored (no
    second read). Rows read while the query was embedded (:meth:`EpisodeScorer.prefetch`)
    are not read again; a candidate forgotten since is dropped."""
    vectors, now, scope = src.index.vectors, req.now, req.scope
    if near is None and vectors is not None and qvec is not None:
        near = vectors.search(tx, scope, principal_of(scope, req.principal), qvec, limit,
                              now=now, since=scorer.lower, until=req.until)
    if near is not None:  # else found over the first transaction's view (_QueryVector)
        scorer.vec = dict(near)
        # a full list bounds every candidate it left out: none is nearer than its last
        if len(scorer.vec) >= limit:
            scorer.vec_floor = min(scorer.vec.values())
        # a word match the vector list left out is scored with its own cosine, not none
        # (a list shorter than asked holds every vector the filter admits: nothing to
        # read); a vector match the word list left out, with its own words
        missed = [rid for rid in scorer.lex if rid not in scorer.vec]
        if missed and scorer.vec_floor is not None and vectors is not None and \
                qvec is not None:
            scorer.vec.update(vectors.record_scores(tx, scope.tenant, "episodes", missed, qvec))
        scorer.fill_lex(tx, [rid for rid in scorer.vec if rid not in scorer.lex])
    order = sorted(set(scorer.lex) | set(scorer.vec), key=lambda r: (-scorer.bound(r), r))
    # the candidates with evidence, and those without (kept beside evidence, or dropped)
    scored: list[tuple[float, float, int, str]] = []
    beside: list[tuple[float, float, int, str]] = []
    pos, batch = 0, keep + 10
    while pos < len(order):
        chunk = order[pos:pos + batch]
        pos += len(chunk)
        scorer.read(src.episodes, tx, scope.tenant, [r for r in chunk if r not in scorer.parts])
        for x in filter(None, map(scorer.score, chunk)):
            (scored if x[3] in scorer.evident else beside).append(x)
        for ranked in (scored, beside):
            ranked.sort(key=_best_first)
            del ranked[keep:]
        if len(scored) == keep and pos < len(order) and scorer.bound(order[pos]) < scored[-1][1]:
            break  # every unread candidate scores below the keep-th: none can enter
        batch = keep
    if scorer.best_evident is not None:
        scored += [x for x in beside if scorer.beside_evidence(x)]
        scored.sort(key=_best_first)
        del scored[keep:]
    early = [rid for *_, rid in scored if rid in scorer.early]
    gone = set(early) - src.episodes.present(tx, scope.tenant, early) if early else set()
    hits: list[Hit] = []
    for score, uncapped, _, rid in scored:
        if rid in gone:
            continue
        hit = scorer.hit(rid, score)
        raw[hit.ref] = uncapped
        hits.append(hit)
    return hits


def _best_first(x: tuple[float, float, int, str]) -> tuple[float, float, int, str]:
    """The order of scored candidates: shown score, uncapped score, specificity, id."""
    return (-x[0], -x[1], -x[2], x[3])


@dataclass(frozen=True)
class _Parts:
    """What an episode's score takes from its row: the boosts it earns (a named subject, a
    named period) and the adjustment factor (authority, specificity, recency, status)."""

    boost: float
    factor: float
    specificity: int


class EpisodeScorer:
    """The episode score of :func:`rank_episodes` over a row's :class:`_Parts`, and an
    upper bound of it from what is known before the row is read (the lexical and vector
    scores)."""

    def __init__(self, req: RankRequest, lex: dict[str, float], named: set[str],
                 drop: Sequence[str], *, lower: datetime | None, with_vectors: bool,
                 vectors_judge: bool = False,
                 more: dict[str, float] | None = None,
                 lex_of: Callable[[Any, Sequence[str]], dict[str, float]] | None = None
                 ) -> None:
        self.now, self.lex, self.named, self.lower = req.now, lex, named, lower
        #: The word scores of the matches past the candidates (:meth:`fill_lex`).
        self._more = more or {}
        #: The word scores of given episodes, where the matches were more than those
        #: read: an episode :attr:`_more` lacks may still hold the query's words.
        self._lex_of = lex_of
        self.with_vectors = with_vectors
        #: A low cosine may overrule a word match (the embedder's similarity is meaning's).
        self.vectors_judge = vectors_judge
        self.vec: dict[str, float] = {}
        #: The cosine no candidate missing from :attr:`vec` exceeds (None: not known).
        self.vec_floor: float | None = None
        #: The candidates scored that have absolute evidence (:data:`MIN_EVIDENCE`).
        self.evident: set[str] = set()
        #: The best relevance (before the adjustments) of a candidate with semantic
        #: evidence (None while there is none): what a candidate without evidence is kept
        #: beside.
        self.best_evident: float | None = None
        #: Each scored candidate's relevance before the adjustments, by id.
        self._relevance: dict[str, float] = {}
        self.parts: dict[str, _Parts | None] = {}
        #: The rows read (:meth:`Episodes.score_rows`), which the hits are built from.
        self.rows: dict[str, Row] = {}
        #: The ids read in the first transaction (:meth:`prefetch`).
        self.early: set[str] = set()
        #: Hits shaped but for their score (:meth:`_shape`), by id.
        self._shaped: dict[str, Hit] = {}
        self.q_terms = [t for t in terms(req.query, evidence=True) if t not in drop]
        self.top = max(lex.values(), default=0.0) or 1.0
        self.period = window(req.query, req.now)
        self.boost_subject = len(named) == 1
        # what any row may add: the boosts it could earn, at the best authority and
        # recency, never superseded, and as specific as the request (a row's scope applies
        # to it, so none is more specific); slightly above, against rounding
        self._extra = (W_SUBJECT if self.boost_subject else 0.0) + (
            W_PERIOD if self.period is not None else 0.0)
        self._most = adjust_raw(1.0, actor="user", specificity=req.scope.specificity(),
                                age_days=0.0, superseded=False) * (1 + 1e-9)

    def prefetch(self, episodes: Episodes, tx: Any, tenant: str,
                 waiting: Callable[[], bool]) -> None:
        """Read the best lexical matches' parts, a batch at a time, and then shape their hits
        (:meth:`hit`), best first, while ``waiting()`` (the query vector is not there yet):
        time the recall would otherwise spend idle."""
        order = sorted(self.lex, key=lambda r: (-self.lex[r], r))
        for pos in range(0, len(order), _PREFETCH_BATCH):
            if not waiting():
                return
            chunk = order[pos:pos + _PREFETCH_BATCH]
            self.read(episodes, tx, tenant, chunk)
            self.early.update(chunk)
        for pos in range(0, len(order), _SHAPE_BATCH):
            if not waiting():
                return
            for rid in order[pos:pos + _SHAPE_BATCH]:
                if rid in self.rows:  # not forgotten
                    self._shape(rid)

    def _shape(self, rid: str) -> Hit:
        """The hit of a candidate whose row was read, but for its score (excerpt, token
        count, metadata): built once."""
        shaped = self._shaped.get(rid)
        if shaped is None:
            row = self.rows[rid]
            shaped = self._shaped[rid] = row_hit(row, 0.0, bool(row["superseded"]),
                                                 self.q_terms)
        return shaped

    def hit(self, rid: str, score: float) -> Hit:
        """The hit of a candidate whose row was read, with its score."""
        return self._shape(rid).model_copy(update={"score": score})

    def read(self, episodes: Episodes, tx: Any, tenant: str, ids: Sequence[str]) -> None:
        """Read the parts of these candidates (a forgotten one gets None)."""
        if not ids:
            return
        rows = episodes.score_rows(tx, tenant, ids)
        self.rows.update(rows)
        for rid in ids:
            row = rows.get(rid)
            self.parts[rid] = self._parts(row) if row is not None else None

    def _parts(self, row: Row) -> _Parts:
        observed = from_text(row["observed_at"]) or self.now
        boost = W_SUBJECT if self.boost_subject and row["subject"] in self.named else 0.0
        # people report an event on the day or a few days after it happened
        period = self.period
        if period is not None and (period.contains(observed)
                                   or period.contains(observed - timedelta(days=3))):
            boost += W_PERIOD
        specificity = ((row["s_user"] is not None) + (row["s_project"] is not None)
                       + (row["s_agent"] is not None))
        factor = adjust_raw(1.0, actor=row["actor"], specificity=specificity,
                            age_days=(self.now - observed).total_seconds() / 86400,
                            superseded=bool(row["superseded"]))
        return _Parts(boost, factor, specificity)

    def fill_lex(self, tx: Any, ids: Sequence[str]) -> None:
        """Give these candidates, which the word list left out (found by their vectors),
        their word scores: from the matches read past the list, else from a search of them
        alone where there were more matches than read (else they hold none of the query's
        words). So a candidate's score is its own, not the list's length's."""
        self.lex.update((rid, self._more[rid]) for rid in ids if rid in self._more)
        unread = [rid for rid in ids if rid not in self.lex]
        if unread and self._lex_of is not None:
            self.lex.update(self._lex_of(tx, unread))

    def _base(self, rid: str, cov: float) -> float:
        """The relevance from the words and the vector (``cov``: the share of the query's
        words in the text). With vectors and no word list (every word of the query too
        common in a large index to be searched: :func:`~memstrata.store.lexical.selective`),
        the words' part is their share in the text, on the scale of a word match's (before:
        none, so a text holding every word scored under 0.2 and a recall's floor dropped
        it: 15 hits of 488 exact matches at k=100)."""
        if self.with_vectors:
            lexical = self.lex.get(rid, 0.0) / self.top if self.lex else cov
            return W_LEXICAL * lexical + W_SEMANTIC * max(self.vec.get(rid, 0.0), 0.0)
        return 0.5 * self.lex.get(rid, 0.0) / self.top + 0.5 * cov

    def bound(self, rid: str) -> float:
        """No candidate scores above this uncapped score."""
        return (self._base(rid, 1.0) + self._extra) / _MAX_EPISODE_REL * self._most

    def beside_evidence(self, scored: tuple[float, float, int, str]) -> bool:
        """Whether a candidate without evidence of its own stands beside the best one that
        has it: its relevance against that one's (:data:`NEIGHBOUR_SHARE`, before the
        adjustments), or without vectors its word match against the best word match
        (:data:`WORDS_SHARE`). There half a score is the text's own
        coverage of the query, which a turn found through its thread context alone lacks:
        it reached a third of the turn that holds the words, and a later turn never made an
        earlier one findable; a text holding one word of five keeps its weak match."""
        if self.best_evident is None:
            return False
        if self.with_vectors:
            return self._relevance[scored[3]] >= NEIGHBOUR_SHARE * self.best_evident
        return self.lex.get(scored[3], 0.0) >= WORDS_SHARE * self.top

    def score(self, rid: str) -> tuple[float, float, int, str] | None:
        """``(score, uncapped, specificity, id)`` of a candidate whose parts were read (None
        if it was forgotten); one with absolute evidence joins :attr:`evident`."""
        parts = self.parts[rid]
        if parts is None:
            return None
        cos = self.vec.get(rid)
        sem = semantic(cos) if cos is not None else 0.0
        # word coverage counts where there is no vector evidence to pass the floor by
        cov = 0.0
        if self.q_terms and (not self.with_vectors or not self.lex or sem < MIN_EVIDENCE):
            row = self.rows[rid]
            # what the word index holds of the episode itself: text, event and outcome
            cov = coverage(self.q_terms, f"{row['text']} {row['event']} {row['outcome'] or ''}")
        rel = (self._base(rid, cov) + parts.boost) / _MAX_EPISODE_REL
        uncapped = rel * parts.factor
        self._relevance[rid] = rel
        if evident(sem, cov, cos if cos is not None else self.vec_floor,
                   judge=self.vectors_judge):
            self.evident.add(rid)
        if sem >= MIN_EVIDENCE or (not self.with_vectors and cov >= WORDS_ALONE):
            self.best_evident = max(rel, self.best_evident or 0.0)
        return min(uncapped, 1.0), uncapped, parts.specificity, rid


__all__ = [
    "MIN_EVIDENCE",
    "NEIGHBOUR_SHARE",
    "POOL",
    "WORDS_ALONE",
    "WORDS_SHARE",
    "WORD_SCORES",
    "W_LEXICAL",
    "W_PERIOD",
    "W_SEMANTIC",
    "W_SUBJECT",
    "EpisodeCandidates",
    "EpisodeScorer",
    "named_subjects",
    "pool_size",
    "rank_episodes",
]
