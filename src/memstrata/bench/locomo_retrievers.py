"""The reference retrievers of the LoCoMo benchmark (:mod:`memstrata.bench.locomo`): the
baselines and the standalone recipe the store's recall path was designed from.

Contract: each retriever searches the turns of one conversation and returns ``dia_id``
strings, best first. :class:`BM25Retriever` and :class:`VectorRetriever` are the baselines
(over :func:`~memstrata.bench.locomo_data.render_turn` text, FTS5 in an in-memory database
of their own), :class:`RRFRetriever` their plain fusion, :class:`RecipeRetriever` the
reference recipe (:class:`RecipeConfig`). The query's words (:func:`query_terms`), the
speakers it names and the period it names (:func:`question_date_window`) are read here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from memstrata.errors import ValidationError

from ..store.sqlite_driver import sqlite3
from .locomo_data import Turn, render_turn

if TYPE_CHECKING:
    import numpy.typing as npt

    from memstrata.providers.embeddings import Embedder

    Vectors = npt.NDArray[np.float32]


# --------------------------------------------------------------------------- query text

#: English stopwords plus the question words; removed from lexical queries.
STOPWORDS: frozenset[str] = frozenset(
    (
        "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any",
        "are", "at", "be", "been", "before", "being", "below", "between", "both", "but", "by",
        "can", "cannot", "could", "did", "do", "does", "doing", "don", "down", "during",
        "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her",
        "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into",
        "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no",
        "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "ought", "our",
        "ours", "ourselves", "out", "over", "own", "s", "same", "she", "should", "so", "some",
        "such", "t", "than", "that", "the", "their", "theirs", "them", "themselves", "then",
        "there", "these", "they", "this", "those", "through", "to", "too", "under", "up",
        "very", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why",
        "will", "with", "would", "you", "your", "yours", "yourself", "yourselves",
    )
)
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def query_terms(text: str, drop: Iterable[str] = ()) -> list[str]:
    """Distinct lowercased content words of ``text`` in order of appearance.

    Stopwords and question words go, a possessive or contraction keeps its stem
    (``Caroline's`` -> ``caroline``), and words in ``drop`` (lowercase) go too.
    """
    dropped = STOPWORDS | set(drop)
    out: dict[str, None] = {}
    for word in _WORD.findall(text.lower().replace("\u2019", "'")):
        stem = word.split("'", 1)[0]
        if stem and stem not in dropped:
            out[stem] = None
    return list(out)


def fts_query(terms: Sequence[str], prefix: bool = False) -> str:
    """An FTS5 OR-query of quoted terms (terms are word characters only, so quoting is safe)."""
    star = "*" if prefix else ""
    return " OR ".join(f'"{t}"{star}' for t in terms)


def named_speakers(question: str, speakers: Iterable[str]) -> set[str]:
    """The speakers whose name occurs in ``question`` as a word (case-insensitive)."""
    return {
        s for s in speakers if s and re.search(rf"\b{re.escape(s)}\b", question, re.IGNORECASE)
    }


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_MON = "|".join(_MONTHS)
_DMY = re.compile(rf"\b(\d{{1,2}})\s+({_MON}),?\s+(\d{{4}})\b", re.IGNORECASE)
_MDY = re.compile(rf"\b({_MON})\s+(\d{{1,2}}),?\s+(\d{{4}})\b", re.IGNORECASE)
_MY = re.compile(rf"\b({_MON}),?\s+(\d{{4}})\b", re.IGNORECASE)
# A bare month needs a preposition so that the modal "may" is not read as a month.
_M = re.compile(rf"\b(?:in|during|of|early|late|mid-?)\s+({_MON})\b", re.IGNORECASE)
_Y = re.compile(r"\b(?:in|during|of)\s+((?:19|20)\d\d)\b", re.IGNORECASE)


@dataclass(frozen=True)
class DateWindow:
    """A time span named by a question: ``[start, end]``, or a month of any year."""

    start: datetime | None = None
    end: datetime | None = None
    month: int | None = None

    def contains(self, when: datetime, slack: timedelta = timedelta(0)) -> bool:
        """Whether ``when`` falls in the window, allowing it to be up to ``slack`` late.

        The slack is one-sided because a conversation reports an event on or after
        the day it happened, never before.
        """
        if self.month is not None:
            return when.month == self.month or (when - slack).month == self.month
        if self.start is None or self.end is None:
            return False
        return self.start <= when <= self.end + slack


def _month_window(year: int, month: int) -> DateWindow:
    start = datetime(year, month, 1, tzinfo=UTC)
    nxt = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return DateWindow(start, nxt - timedelta(microseconds=1))


def question_date_window(question: str) -> DateWindow | None:
    """The most specific date, month or year the question names, if any."""
    try:
        if m := _DMY.search(question):
            day = datetime(int(m[3]), _MONTHS.index(m[2].lower()) + 1, int(m[1]), tzinfo=UTC)
            return DateWindow(day, day + timedelta(days=1))
        if m := _MDY.search(question):
            day = datetime(int(m[3]), _MONTHS.index(m[1].lower()) + 1, int(m[2]), tzinfo=UTC)
            return DateWindow(day, day + timedelta(days=1))
    except ValueError:  # "31 February": fall through to the month
        pass
    if m := _MY.search(question):
        return _month_window(int(m[2]), _MONTHS.index(m[1].lower()) + 1)
    if m := _M.search(question):
        return DateWindow(month=_MONTHS.index(m[1].lower()) + 1)
    if m := _Y.search(question):
        year = int(m[1])
        return DateWindow(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))
    return None


# --------------------------------------------------------------------------- retrievers


def turn_line(turn: Turn) -> str:
    """``Speaker: text [shares caption]`` (no date), the unit of context windows."""
    shared = f" [shares {turn.caption}]" if turn.caption else ""
    return f"{turn.speaker}: {turn.text}{shared}"


def _neighbours(
    turns: Sequence[Turn], i: int, before: int, after: int
) -> tuple[list[int], list[int]]:
    """Indexes of up to ``before``/``after`` adjacent turns of the same session."""
    session = turns[i].session
    prev = [j for j in range(max(0, i - before), i) if turns[j].session == session]
    nxt = [j for j in range(i + 1, min(len(turns), i + 1 + after)) if turns[j].session == session]
    return prev, nxt


_TOKENIZER = re.compile(r"[a-z0-9_ ]+")


class _Fts:
    """An in-memory FTS5 table, one row per turn (rowid = turn index)."""

    def __init__(self, rows: Sequence[Sequence[str]], tokenizer: str) -> None:
        if not rows:
            raise ValidationError("cannot index an empty conversation")
        if not _TOKENIZER.fullmatch(tokenizer):
            # it is spliced into the DDL, where parameters are not allowed
            raise ValidationError(f"unusable FTS5 tokenizer spec {tokenizer!r}")
        ncol = len(rows[0])
        cols = ", ".join(f"c{i}" for i in range(ncol))
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(f"CREATE VIRTUAL TABLE t USING fts5({cols}, tokenize='{tokenizer}')")
        marks = ", ".join("?" * ncol)
        self._db.executemany(
            f"INSERT INTO t(rowid, {cols}) VALUES (?, {marks})",
            [(i, *row) for i, row in enumerate(rows)],
        )
        self.size = len(rows)

    def scores(self, terms: Sequence[str], weights: Sequence[float]) -> Vectors:
        """Positive BM25 per row (FTS5 ``bm25()`` negated); 0 where no term matches."""
        out = np.zeros(self.size, dtype=np.float32)
        if not terms:
            return out
        w = ", ".join(repr(float(x)) for x in weights)
        for rowid, score in self._db.execute(
            f"SELECT rowid, bm25(t, {w}) FROM t WHERE t MATCH ?", (fts_query(terms),)
        ):
            out[rowid] = -score
        return out


def _top(scores: Vectors, ids: Sequence[str], k: int, positive_only: bool = False) -> list[str]:
    # stable: ties keep conversation order, so runs are reproducible
    order = np.argsort(-scores, kind="stable")[:k]
    return [ids[i] for i in order if not positive_only or scores[i] > 0]


class BM25Retriever:
    """Baseline: FTS5 BM25 over ``render_turn`` text, OR-query of the non-stopwords."""

    def __init__(self, turns: Sequence[Turn], tokenizer: str = "unicode61") -> None:
        self._ids = [t.dia_id for t in turns]
        self._fts = _Fts([(render_turn(t),) for t in turns], tokenizer)

    def scores(self, question: str) -> Vectors:
        """BM25 of every turn (0 = no match)."""
        return self._fts.scores(query_terms(question), (1.0,))

    def search(self, question: str, k: int) -> list[str]:
        """Matching turns by BM25 (non-matching turns are never returned)."""
        return _top(self.scores(question), self._ids, k, positive_only=True)


class VectorRetriever:
    """Baseline: cosine between the question and each ``render_turn`` text."""

    def __init__(self, turns: Sequence[Turn], embedder: Embedder) -> None:
        self._ids = [t.dia_id for t in turns]
        self._embedder = embedder
        self._vectors = embedder.embed([render_turn(t) for t in turns])

    def scores(self, question: str) -> Vectors:
        """Cosine of every turn."""
        sims: Vectors = self._vectors @ self._embedder.embed_query(question)
        return sims

    def search(self, question: str, k: int) -> list[str]:
        """Turns by cosine."""
        return _top(self.scores(question), self._ids, k)


class RRFRetriever:
    """Baseline: reciprocal rank fusion (``1/(c + rank)``) of the two baselines' full lists."""

    def __init__(self, turns: Sequence[Turn], embedder: Embedder, c: int = 60) -> None:
        self._ids = [t.dia_id for t in turns]
        self._bm25 = BM25Retriever(turns)
        self._vector = VectorRetriever(turns, embedder)
        self._c = c

    def search(self, question: str, k: int) -> list[str]:
        """Turns by fused reciprocal rank; BM25 contributes only for matching turns."""
        fused = np.zeros(len(self._ids), dtype=np.float32)
        lex = self._bm25.scores(question)
        for rank, i in enumerate(np.argsort(-lex, kind="stable")):
            if lex[i] <= 0:
                break
            fused[i] += 1.0 / (self._c + rank + 1)
        for rank, i in enumerate(np.argsort(-self._vector.scores(question), kind="stable")):
            fused[i] += 1.0 / (self._c + rank + 1)
        return _top(fused, self._ids, k)


@dataclass(frozen=True)
class RecipeConfig:
    """Knobs of :class:`RecipeRetriever`; the defaults are the measured recipe.

    ``lexical_after``/``dense_after`` > 0 need the turns that follow a turn, which a
    store only has after they are appended (re-index the previous rows then);
    set both to 0 for an append-only ("causal") index.
    """

    tokenizer: str = "porter unicode61"
    lexical_before: int = 2
    lexical_after: int = 2
    column_weights: tuple[float, float, float] = (1.0, 0.5, 0.2)
    dense_before: int = 1
    dense_after: int = 1
    lexical_weight: float = 0.5
    dense_weight: float = 0.5
    speaker_boost: float = 0.3
    date_boost: float = 0.2
    date_slack_days: int = 3


class RecipeRetriever:
    """Contextual hybrid retrieval over one conversation: the reference recipe to port.

    Index (per turn):
      - lexical: FTS5 (``porter unicode61``) row with three columns: the turn as
        ``[date] Speaker: text [shares caption]``, up to ``lexical_before`` previous and
        ``lexical_after`` following turns of the same session (``Speaker: text ...``);
        ``bm25()`` column weights ``column_weights``.
      - dense: MiniLM vector of the window of ``dense_before`` previous turn(s), the turn
        and ``dense_after`` following turn(s) of the same session, one ``turn_line`` a line.
    Query:
      - lexical: OR of the question's content words without stopwords, question words
        and the conversation's speaker names; BM25 divided by the query's best BM25 (0..1).
      - dense: the raw question embedded; cosine.
    Score: ``lexical_weight * bm25/max + dense_weight * cosine
    + speaker_boost * [turn's speaker is named in the question]
    + date_boost * [session date in the date window the question names]``.
    """

    def __init__(
        self, turns: Sequence[Turn], embedder: Embedder, config: RecipeConfig | None = None
    ) -> None:
        cfg = config or RecipeConfig()
        self.config = cfg
        self._turns = list(turns)
        self._ids = [t.dia_id for t in turns]
        self._speakers = sorted({t.speaker for t in turns})
        self._drop = {w for s in self._speakers for w in query_terms(s)}
        self._speaker_of = np.array([t.speaker for t in turns], dtype=object)
        rows = []
        windows = []
        for i, turn in enumerate(turns):
            prev, nxt = _neighbours(turns, i, cfg.lexical_before, cfg.lexical_after)
            rows.append((
                render_turn(turn),
                " ".join(turn_line(turns[j]) for j in prev),
                " ".join(turn_line(turns[j]) for j in nxt),
            ))
            prev, nxt = _neighbours(turns, i, cfg.dense_before, cfg.dense_after)
            windows.append("\n".join(turn_line(turns[j]) for j in [*prev, i, *nxt]))
        self._fts = _Fts(rows, cfg.tokenizer)
        self._embedder = embedder
        self._vectors = embedder.embed(windows) if cfg.dense_weight else None

    def scores(self, question: str) -> Vectors:
        """The fused score of every turn (higher is better)."""
        cfg = self.config
        score = np.zeros(len(self._ids), dtype=np.float32)
        if cfg.lexical_weight:
            lex = self._fts.scores(query_terms(question, self._drop), cfg.column_weights)
            top = float(lex.max())
            if top > 0:
                score += cfg.lexical_weight * lex / top
        if self._vectors is not None:
            score += cfg.dense_weight * (self._vectors @ self._embedder.embed_query(question))
        named = named_speakers(question, self._speakers)
        if cfg.speaker_boost and named and len(named) < len(self._speakers):
            score += cfg.speaker_boost * np.isin(self._speaker_of, sorted(named))
        window = question_date_window(question) if cfg.date_boost else None
        if window is not None:
            slack = timedelta(days=cfg.date_slack_days)
            score += cfg.date_boost * np.array(
                [window.contains(t.date, slack) for t in self._turns], dtype=np.float32
            )
        return score

    def search(self, question: str, k: int) -> list[str]:
        """The ``k`` best turns."""
        return _top(self.scores(question), self._ids, k)


__all__ = ["STOPWORDS", "BM25Retriever", "DateWindow", "RRFRetriever", "RecipeConfig",
           "RecipeRetriever", "VectorRetriever", "fts_query", "named_speakers", "query_terms",
           "question_date_window", "turn_line"]
