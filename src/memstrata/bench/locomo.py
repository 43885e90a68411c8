"""LoCoMo evidence-recall benchmark: loader, metrics, evaluation driver, reference retrievers.

Contract:
- :func:`load_locomo` reads the public ``locomo10.json`` layout (or a subset of it). Sessions come
  from the ``session_N`` keys (never from the date keys, which can outnumber them); each turn gets
  its session's date (``session_N_date_time``, read as UTC). Only turns, speakers, session dates
  and image captions (``blip_caption``) are kept for indexing; QA annotations are kept apart and
  observations/summaries are never read.
- Evidence ids are normalised (``"D8:6; D9:17"`` -> two ids, ``"D:11:26"`` -> ``D11:26``,
  ``"D30:05"`` -> ``D30:5``); ids that name no turn of the conversation are dropped and a question
  left with no evidence is skipped. Every such case is counted in :class:`LoadReport`.
- :func:`evaluate` builds one retriever per conversation from its turns only, asks every question
  once for ``max(ks)`` results and reports, per retriever: evidence recall@k (share of a
  question's evidence turns in the top k, averaged over questions) for categories 1-4 together,
  per category and for category 5 apart; MRR (first evidence hit within ``max(ks)``); the tokens
  the top k turns put into a prompt against the whole conversation; query latency p50/p95.
- Retrievers search one conversation only and return ``dia_id`` strings, best first. Built in:
  :class:`BM25Retriever` and :class:`VectorRetriever` (the baselines, over :func:`render_turn`
  text), :class:`RRFRetriever` (their plain fusion) and :class:`RecipeRetriever`, the
  reference recipe for the store's recall path (pure Python + numpy + in-memory FTS5).
- :func:`run` is the one call behind ``memstrata bench locomo --data PATH``: load, evaluate
  the four retrievers in one run, return JSON-ready figures (:func:`format_table` /
  :func:`table_rows` render them). Nothing is downloaded; the embedder is resolved with
  :func:`memstrata.providers.embeddings.get_embedder`.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from memstrata.errors import ValidationError
from memstrata.tokens import count_tokens

from ..store.sqlite_driver import sqlite3

if TYPE_CHECKING:
    import numpy.typing as npt

    from memstrata.providers.embeddings import Embedder

    Vectors = npt.NDArray[np.float32]

CATEGORY_NAMES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
HEADLINE_CATEGORIES: frozenset[int] = frozenset({1, 2, 3, 4})


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Turn:
    """One dialogue turn: the only material a retriever may index."""

    dia_id: str
    session: int
    date: datetime
    speaker: str
    text: str
    caption: str | None = None


@dataclass(frozen=True)
class Question:
    """One QA item; ``evidence`` holds normalised dia_ids that exist in the conversation."""

    question: str
    category: int
    evidence: tuple[str, ...]
    answer: str


@dataclass(frozen=True)
class Conversation:
    """A conversation's turns (in order) and its questions."""

    sample_id: str
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


@dataclass
class LoadReport:
    """What the loader had to repair or leave out."""

    conversations: int = 0
    turns: int = 0
    questions: int = 0
    normalised_ids: list[str] = field(default_factory=list)
    dropped_ids: list[str] = field(default_factory=list)
    skipped_questions: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "conversations": self.conversations,
            "turns": self.turns,
            "questions": self.questions,
            "normalised_ids": list(self.normalised_ids),
            "dropped_ids": list(self.dropped_ids),
            "skipped_questions": self.skipped_questions,
        }


_SESSION_KEY = re.compile(r"session_(\d+)")
_ID_PART = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")


def parse_session_date(raw: str) -> datetime:
    """Parse LoCoMo's ``"1:56 pm on 8 May, 2023"`` as a UTC datetime."""
    text = " ".join(raw.split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValidationError(f"unreadable LoCoMo session date: {raw!r}")


def normalise_evidence(raw: str) -> list[str]:
    """Split and canonicalise one raw evidence string into ``D<session>:<turn>`` ids.

    Returns an empty list for strings with no recognisable id (``"D"``).
    """
    return [f"D{int(s)}:{int(t)}" for s, t in _ID_PART.findall(raw)]


def _turns_of(sample_id: str, conv: Mapping[str, Any]) -> list[Turn]:
    sessions = sorted(
        int(m.group(1)) for key in conv if (m := _SESSION_KEY.fullmatch(key)) is not None
    )
    turns: list[Turn] = []
    for n in sessions:
        raw_date = conv.get(f"session_{n}_date_time")
        if not isinstance(raw_date, str):
            raise ValidationError(f"{sample_id}: session_{n} has no date")
        date = parse_session_date(raw_date)
        for item in conv[f"session_{n}"]:
            caption = item.get("blip_caption")
            turns.append(
                Turn(
                    dia_id=str(item["dia_id"]),
                    session=n,
                    date=date,
                    speaker=str(item["speaker"]),
                    text=str(item["text"]),
                    caption=str(caption) if caption else None,
                )
            )
    return turns


def load_locomo(path: str | Path) -> tuple[list[Conversation], LoadReport]:
    """Read a LoCoMo json file into conversations, repairing or dropping malformed evidence."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValidationError(f"cannot read LoCoMo data {path}: {exc}") from exc
    if not isinstance(data, list):
        raise ValidationError("LoCoMo data must be a list of conversations")
    report = LoadReport()
    convs: list[Conversation] = []
    for sample in data:
        sample_id = str(sample.get("sample_id", f"conv-{len(convs)}"))
        conv = sample["conversation"]
        turns = _turns_of(sample_id, conv)
        known = {t.dia_id for t in turns}
        questions: list[Question] = []
        for qa in sample.get("qa", []):
            evidence: list[str] = []
            for raw in qa.get("evidence", []) or []:
                ids = normalise_evidence(str(raw))
                if len(ids) != 1 or ids[0] != raw:
                    report.normalised_ids.append(f"{sample_id}:{raw!r}->{ids}")
                for dia_id in ids:
                    if dia_id not in known:
                        report.dropped_ids.append(f"{sample_id}:{dia_id}")
                    elif dia_id not in evidence:
                        evidence.append(dia_id)
            if not evidence:
                report.skipped_questions += 1
                continue
            answer = qa.get("answer", qa.get("adversarial_answer", ""))
            questions.append(
                Question(
                    question=str(qa["question"]),
                    category=int(qa["category"]),
                    evidence=tuple(evidence),
                    answer=str(answer),
                )
            )
        convs.append(
            Conversation(
                sample_id=sample_id,
                speakers=(str(conv.get("speaker_a", "")), str(conv.get("speaker_b", ""))),
                turns=tuple(turns),
                questions=tuple(questions),
            )
        )
        report.turns += len(turns)
        report.questions += len(questions)
    report.conversations = len(convs)
    return convs, report


def render_turn(turn: Turn) -> str:
    """The text a turn puts into a prompt: ``[8 May 2023] Caroline: text [shares caption]``."""
    date = f"{turn.date.day} {turn.date:%B %Y}"
    shared = f" [shares {turn.caption}]" if turn.caption else ""
    return f"[{date}] {turn.speaker}: {turn.text}{shared}"


# --------------------------------------------------------------------------- metrics


class Retriever(Protocol):
    """Searches the turns of one conversation."""

    def search(self, question: str, k: int) -> list[str]:
        """Up to ``k`` dia_ids, best first."""
        ...


RetrieverFactory = Callable[[Sequence[Turn]], Retriever]
Progress = Callable[[str, int, int], None]


def recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Share of ``evidence`` found in the first ``k`` of ``ranked``."""
    if not evidence:
        raise ValidationError("recall needs at least one evidence id")
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


def reciprocal_rank(ranked: Sequence[str], evidence: Sequence[str]) -> float:
    """1/rank of the first evidence turn in ``ranked`` (0 if none)."""
    wanted = set(evidence)
    for i, dia_id in enumerate(ranked, start=1):
        if dia_id in wanted:
            return 1.0 / i
    return 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class _QueryRow:
    sample_id: str
    category: int
    recalls: dict[int, float]
    rr: float
    tokens: dict[int, int]
    conv_tokens: int
    latency_ms: float


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return statistics.fmean(vals) if vals else 0.0


def _summarise(rows: Sequence[_QueryRow], ks: Sequence[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": len(rows)}
    for k in ks:
        out[f"recall@{k}"] = _mean(r.recalls[k] for r in rows)
    out["mrr"] = _mean(r.rr for r in rows)
    for k in ks:
        out[f"tokens@{k}"] = _mean(r.tokens[k] for r in rows)
        out[f"token_share@{k}"] = _mean(r.tokens[k] / r.conv_tokens for r in rows)
    return out


def _report(rows: Sequence[_QueryRow], ks: Sequence[int]) -> dict[str, Any]:
    headline = [r for r in rows if r.category in HEADLINE_CATEGORIES]
    latencies = [r.latency_ms for r in rows]
    per_cat = {
        f"{c}-{name}": _summarise([r for r in rows if r.category == c], ks)
        for c, name in CATEGORY_NAMES.items()
        if any(r.category == c for r in rows)
    }
    per_conv = {
        sid: _summarise([r for r in headline if r.sample_id == sid], ks)
        for sid in dict.fromkeys(r.sample_id for r in rows)
    }
    return {
        "categories_1_4": _summarise(headline, ks),
        "category_5": _summarise([r for r in rows if r.category == 5], ks),
        "per_category": per_cat,
        "per_conversation_1_4": per_conv,
        "latency_ms": {
            "p50": percentile(latencies, 50),
            "p95": percentile(latencies, 95),
            "mean": _mean(latencies),
        },
    }


def evaluate(
    convs: Sequence[Conversation],
    retrievers: Mapping[str, RetrieverFactory],
    ks: Sequence[int] = (5, 10, 20),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run every retriever over every conversation; return the metrics as a JSON-ready dict.

    ``progress(retriever_name, done_questions, total_questions)`` is called after each
    conversation. Build time (indexing, embedding the turns) is reported apart from query latency.
    """
    ks = sorted(set(ks))
    if not ks or ks[0] < 1:
        raise ValidationError("ks must be positive")
    depth = ks[-1]
    total = sum(len(c.questions) for c in convs)
    rendered = {c.sample_id: [render_turn(t) for t in c.turns] for c in convs}
    turn_tokens = {
        c.sample_id: {t.dia_id: count_tokens(render_turn(t)) for t in c.turns} for c in convs
    }
    conv_tokens = {sid: count_tokens("\n".join(lines)) for sid, lines in rendered.items()}
    results: dict[str, Any] = {}
    for name, factory in retrievers.items():
        rows: list[_QueryRow] = []
        build_s = 0.0
        done = 0
        for conv in convs:
            t0 = time.perf_counter()
            retriever = factory(conv.turns)
            build_s += time.perf_counter() - t0
            tok = turn_tokens[conv.sample_id]
            exact = bool(getattr(retriever, "exact_k", False))
            for q in conv.questions:
                t0 = time.perf_counter()
                ranked = retriever.search(q.question, depth)
                latency = (time.perf_counter() - t0) * 1000
                # a retriever that answers a k=10 call differently from the top 10 of a k=20
                # one is scored on what each call returns
                per_k = {k: retriever.search(q.question, k) if exact and k != depth
                         else ranked for k in ks}
                rows.append(
                    _QueryRow(
                        sample_id=conv.sample_id,
                        category=q.category,
                        recalls={k: recall_at(per_k[k], q.evidence, k) for k in ks},
                        rr=reciprocal_rank(ranked[:depth], q.evidence),
                        # +1 a turn for the newline that separates turns in a prompt
                        tokens={k: sum(tok.get(d, 0) + 1 for d in per_k[k][:k]) for k in ks},
                        conv_tokens=conv_tokens[conv.sample_id],
                        latency_ms=latency,
                    )
                )
            done += len(conv.questions)
            if progress is not None:
                progress(name, done, total)
        summary = _report(rows, ks)
        summary["build_s"] = build_s
        results[name] = summary
    return {
        "ks": list(ks),
        "conversations": [c.sample_id for c in convs],
        "conversation_tokens": conv_tokens,
        "retrievers": results,
    }


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


# --------------------------------------------------------------------------- running


class _DocumentCache:
    """Memoises document embeddings across retrievers of one run (queries are not cached,
    so every retriever's latency includes embedding its query)."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._cache: dict[str, Vectors] = {}
        self.model_name = inner.model_name
        self.dims = inner.dims

    def embed(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            for text, vec in zip(missing, self._inner.embed(missing), strict=True):
                self._cache[text] = vec
        return np.stack([self._cache[t] for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> Vectors:
        return self._inner.embed_query(text)


RETRIEVER_NAMES: tuple[str, ...] = ("memstrata", "memstrata-history", "memstrata-turns",
                                     "memstrata-turns-history", "bm25", "vector", "rrf",
                                     "recipe")


def _embedding_factory(name: str, embedder: Embedder, url: str | None = None
                       ) -> RetrieverFactory:
    def build(turns: Sequence[Turn]) -> Retriever:
        if name.startswith("memstrata"):
            from .locomo_store import StoreRetriever

            return StoreRetriever(turns, embedder,
                                  path="search_history" if name.endswith("-history")
                                  else "recall",
                                  storage="per-turn" if "-turns" in name else "session",
                                  url=url)
        if name == "vector":
            return VectorRetriever(turns, embedder)
        if name == "rrf":
            return RRFRetriever(turns, embedder)
        return RecipeRetriever(turns, embedder)

    return build


def default_retrievers(
    embedder: Embedder | None, names: Sequence[str] = RETRIEVER_NAMES, *,
    url: str | None = None,
) -> dict[str, RetrieverFactory]:
    """Factories for the named retrievers; the embedding ones need ``embedder``. ``url``:
    the store retrievers keep their conversations in that database (see
    :class:`~memstrata.bench.locomo_store.StoreRetriever`), else in a temporary SQLite file
    each."""
    factories: dict[str, RetrieverFactory] = {}
    for name in names:
        if name == "bm25":
            factories[name] = BM25Retriever
        elif name not in RETRIEVER_NAMES:
            known = ", ".join(RETRIEVER_NAMES)
            raise ValidationError(f"unknown retriever {name!r}; known: {known}")
        elif embedder is None:
            raise ValidationError(f"retriever {name!r} needs an embedder")
        else:
            factories[name] = _embedding_factory(name, embedder, url)
    return factories


def run(
    data: str | Path,
    *,
    embedder: str | Embedder | None = "minilm",
    names: Sequence[str] = RETRIEVER_NAMES,
    ks: Sequence[int] = (5, 10, 20),
    progress: Progress | None = None,
    url: str | None = None,
) -> dict[str, Any]:
    """Load ``data``, evaluate the named retrievers, return the JSON-ready result
    (``url``: where the store retrievers keep the conversations; see
    :func:`default_retrievers`)."""
    convs, report = load_locomo(data)
    emb: Embedder | None
    if isinstance(embedder, str):
        from memstrata.providers.embeddings import get_embedder

        emb = get_embedder(embedder)
    else:
        emb = embedder
    needs_embedder = any(n != "bm25" for n in names)
    cached = _DocumentCache(emb) if emb is not None and needs_embedder else None
    result = evaluate(convs, default_retrievers(cached, names, url=url), ks=ks,
                      progress=progress)
    result["data"] = str(data)
    # the engine only: a URL may hold a password
    result["store"] = url.split(":", 1)[0] if url is not None else "sqlite (a file each)"
    result["load"] = report.as_dict()
    result["embedder"] = emb.model_name if emb is not None else None
    result["recipe"] = RecipeConfig().__dict__ if "recipe" in names else None
    return result


TABLE_HEADERS: tuple[str, ...] = (
    "retriever", "R@5", "R@10", "R@20", "multi-hop R@10", "cat-5 R@10", "MRR",
    "tokens@10", "share@10", "p50 ms", "p95 ms",
)


def table_rows(result: Mapping[str, Any]) -> list[list[str]]:
    """One row per retriever (categories 1-4 unless named otherwise), for ``TABLE_HEADERS``."""
    rows = []
    for name, r in result["retrievers"].items():
        head = r["categories_1_4"]
        multi = r["per_category"].get("1-multi-hop", {})
        cat5 = r["category_5"]
        rows.append([
            name,
            *(f"{head.get(f'recall@{k}', 0.0):.3f}" for k in (5, 10, 20)),
            f"{multi.get('recall@10', 0.0):.3f}",
            f"{cat5.get('recall@10', 0.0):.3f}",
            f"{head['mrr']:.3f}",
            f"{head.get('tokens@10', 0.0):.0f}",
            f"{100 * head.get('token_share@10', 0.0):.2f}%",
            f"{r['latency_ms']['p50']:.1f}",
            f"{r['latency_ms']['p95']:.1f}",
        ])
    return rows


def format_table(result: Mapping[str, Any]) -> str:
    """A plain-text table of :func:`table_rows`."""
    rows = [list(TABLE_HEADERS), *table_rows(result)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_HEADERS))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """``python -m memstrata.bench.locomo --data PATH [--out FILE] [--json]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", required=True)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--retrievers", default=",".join(RETRIEVER_NAMES))
    parser.add_argument("--out", default="bench-results/locomo.json")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--url", default=None)
    args = parser.parse_args(argv)
    result = run(args.data, embedder=args.embedder, names=args.retrievers.split(","),
                 url=args.url)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return result


if __name__ == "__main__":
    main()
