"""LoCoMo's data for the benchmark (:mod:`memstrata.bench.locomo`): conversations, turns,
questions, and how a turn reads in a prompt.

Contract: :func:`load_locomo` reads the public ``locomo10.json`` layout (or a subset of
it); sessions come from the ``session_N`` keys, each turn gets its session's date (UTC);
evidence ids are normalised (:func:`normalise_evidence`) and what was dropped is counted in
:class:`LoadReport`. :func:`render_turn` is the text a turn puts into a prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstrata.errors import ValidationError

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


__all__ = ["Conversation", "LoadReport", "Question", "Turn", "load_locomo", "normalise_evidence",
           "parse_session_date", "render_turn"]
