"""An episode as a caller gives it, as a stored row reads, and as a hit shows it.

Contract: :class:`EpisodeInput` validates one episode a caller gives;
:func:`episode_from_row` reads a stored row into an :class:`~memstrata.models.Episode`
(status ``superseded``/``expired``/``current``); :func:`episode_hit` and :func:`row_hit`
build the search result a person or model judges before opening it (excerpt around the
first query word, date, event, source, actor, scope, status, outcome, thread, token
count); :func:`mentions` says whether a row is about a subject (a forget's selector);
:func:`run_thread` names a run's thread. No database access: the rows come from
:mod:`memstrata.layers.episodes`, which owns the table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from pydantic import Field

from ..clock import from_text
from ..models import (
    Actor,
    Confidence,
    Episode,
    Hit,
    LongText,
    NameText,
    OptionalLongText,
    OptionalNameText,
    OptionalSourceText,
    Provenance,
    Readers,
    Scope,
    SourceText,
    UTCDateTime,
    _Model,
)
from ..scoping import load_json_list, scope_from_row
from ..store.base import Row
from ..tokens import count_tokens


class EpisodeInput(_Model):
    """One episode as given by a caller, validated."""

    scope: Scope
    text: LongText
    event: NameText = "note"
    actor: Actor
    source: SourceText
    evidence: OptionalLongText = None
    observed_at: UTCDateTime = None
    outcome: OptionalLongText = None
    confidence: Confidence = 1.0
    expires_at: UTCDateTime = None
    supersedes: OptionalNameText = None
    readers: Readers = None
    flags: list[str] = Field(default_factory=list)
    subject: OptionalNameText = None
    thread: OptionalSourceText = None


def run_thread(run_id: str) -> str:
    """The thread of the episodes a run logs unless they name another: ``run:RUN_ID``."""
    return f"run:{run_id}"


def episode_from_row(row: Row, superseded: bool = False, now: datetime | None = None) -> Episode:
    expires = from_text(row["expires_at"])
    status = "superseded" if superseded else "current"
    if expires is not None and now is not None and expires <= now:
        status = "expired"
    return Episode.model_construct(
        id=row["id"], scope=scope_from_row(row), event=row["event"], text=row["text"],
        provenance=Provenance.model_construct(actor=row["actor"], source=row["source"],
                                              evidence=row["evidence"]),
        created_at=from_text(row["created_at"]), observed_at=from_text(row["observed_at"]),
        outcome=row["outcome"], confidence=float(row["confidence"]), expires_at=expires,
        supersedes=row["supersedes"], readers=load_json_list(row["readers"]), status=status,
        flags=load_json_list(row["flags"]) or [], subject=row["subject"],
        thread=row["thread"],
    )


def mentions(row: Row, subject: str) -> bool:
    """Whether an episode is about ``subject`` (lower-case, as a forget's selector holds
    it): its subject field is it, or its text names it as a whole word or phrase ("Al" is
    in "Al reviewed the PR", not in "no malice intended")."""
    if " ".join(str(row["subject"] or "").lower().split()) == subject:
        return True
    words = r"\s+".join(re.escape(w) for w in subject.split())
    return re.search(rf"(?<!\w){words}(?!\w)", str(row["text"]), re.IGNORECASE) is not None


def excerpt(text: str, query_terms: Sequence[str] = (), width: int = 240) -> str:
    """A short window of ``text`` around the first query term (whole text if short)."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    low = text.lower()
    pos = min((p for p in (low.find(t) for t in query_terms) if p >= 0), default=0)
    start = max(0, min(pos - width // 3, len(text) - width))
    out = text[start:start + width]
    return ("…" if start else "") + out + ("…" if start + width < len(text) else "")


def episode_hit(ep: Episode, score: float, superseded: bool, terms_: Sequence[str]) -> Hit:
    """The search result for an episode: reference, excerpt and metadata."""
    return _hit(ep.id, ep.text, score, superseded, terms_, date=ep.observed_at, event=ep.event,
                source=ep.provenance.source, actor=ep.provenance.actor, scope=ep.scope,
                flags=ep.flags, outcome=ep.outcome, thread=ep.thread)


def row_hit(row: Row, score: float, superseded: bool, terms_: Sequence[str]) -> Hit:
    """:func:`episode_hit` straight from a stored row (the ranker builds no :class:`Episode`
    for the candidates it keeps)."""
    return _hit(row["id"], row["text"], score, superseded, terms_,
                date=from_text(row["observed_at"]), event=row["event"], source=row["source"],
                actor=row["actor"], scope=scope_from_row(row),
                flags=load_json_list(row["flags"]) or [], outcome=row["outcome"],
                thread=row["thread"])


def _hit(eid: str, text: str, score: float, superseded: bool, terms_: Sequence[str], *,
         date: datetime | None, event: str, source: str, actor: str, scope: Scope,
         flags: Sequence[str], outcome: str | None, thread: str | None) -> Hit:
    shown = excerpt(text, terms_)
    return Hit(ref=f"episode:{eid}", layer="episodes", excerpt=shown, score=score, date=date,
               event=event, source=source, actor=actor,
               status="superseded" if superseded else "current", scope=scope,
               untrusted="untrusted" in flags, outcome=outcome, thread=thread,
               tokens=count_tokens(shown))


__all__ = ["EpisodeInput", "episode_from_row", "episode_hit", "excerpt", "mentions",
           "row_hit", "run_thread"]
