"""The episodic log: append-only, dated, sourced events (DESIGN §2, §3).

Contract:
- ``append`` stores one event with ``observed_at`` (when it was true, may
  differ from ``created_at``), provenance, outcome, confidence, optional
  ``expires_at`` and ``supersedes``. A correction is a *new* entry naming
  what it supersedes; rows are never updated (a trigger refuses UPDATE and
  any DELETE outside forget/retention). ``append_many`` writes a batch in one
  transaction.
- ``search`` is targeted: text within the scope (and readers), optional
  ``since``/``until`` on ``observed_at``, expired entries out, superseded
  entries ranked below current ones. It returns Hits (ref, excerpt, date,
  event, source, actor, status, score); the log is never loaded whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import Field, field_validator

from .clock import from_text
from .errors import NotFound, ValidationError
from .ids import new_id
from .models import (
    MAX_NAME,
    MAX_SOURCE,
    MAX_TEXT,
    Actor,
    Episode,
    Hit,
    Provenance,
    Scope,
    _Model,
    _readers,
    _utc,
    build,
    clean_text,
    make_scope,
)
from .runtime import Runtime
from .scoping import (
    SCOPE_COLUMNS,
    applies_sql,
    dump_readers,
    load_json_list,
    principal_of,
    scope_from_row,
    scope_values,
)
from .store.base import Row, Tx

_COLUMNS = ("id, event, text, actor, source, evidence, created_at, observed_at, outcome, "
            "confidence, expires_at, supersedes, readers, flags, subject")
#: How many earlier episodes of the same thread (scope + source) are indexed as context.
CONTEXT_EPISODES = 2


class EpisodeInput(_Model):
    """One episode as given by a caller, validated."""

    scope: Scope
    text: str
    event: str = "note"
    actor: Actor
    source: str
    evidence: str | None = None
    observed_at: datetime | None = None
    outcome: str | None = None
    confidence: float = 1.0
    expires_at: datetime | None = None
    supersedes: str | None = None
    readers: list[str] | None = None
    flags: list[str] = Field(default_factory=list)
    subject: str | None = None

    @field_validator("subject", mode="before")
    @classmethod
    def _subject(cls, v: Any) -> str | None:
        return None if v is None else clean_text(v, field="subject", max_len=MAX_NAME)

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return clean_text(v, field="text", max_len=MAX_TEXT)

    @field_validator("event", mode="before")
    @classmethod
    def _event(cls, v: Any) -> str:
        return clean_text(v, field="event", max_len=MAX_NAME)

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, v: Any) -> str:
        return clean_text(v, field="source", max_len=MAX_SOURCE)

    @field_validator("evidence", "outcome", mode="before")
    @classmethod
    def _opt(cls, v: Any, info: Any) -> str | None:
        return None if v is None else clean_text(v, field=str(info.field_name), max_len=MAX_TEXT)

    @field_validator("confidence", mode="before")
    @classmethod
    def _conf(cls, v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
            raise ValueError("confidence must be a number between 0 and 1")
        return float(v)

    @field_validator("observed_at", "expires_at", mode="before")
    @classmethod
    def _dates(cls, v: Any, info: Any) -> datetime | None:
        return _utc(v, str(info.field_name))

    @field_validator("readers", mode="before")
    @classmethod
    def _rd(cls, v: Any) -> list[str] | None:
        return _readers(v)


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
    )


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


class Episodes:
    """The episodic layer; reached as ``mem.episodes``."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def append(self, scope: Scope | dict[str, Any], *, text: str, event: str = "note",
               actor: str = "agent", source: str, observed_at: datetime | str | None = None,
               evidence: str | None = None, outcome: str | None = None,
               confidence: float = 1.0, expires_at: datetime | str | None = None,
               supersedes: str | None = None,
               readers: Sequence[str] | None = None, subject: str | None = None) -> Episode:
        """Append one episode; returns it as stored. ``subject`` names who or what it is
        about (a speaker, a system); a query naming the subject ranks its episodes first."""
        item = build(EpisodeInput, scope=make_scope(scope), text=text, event=event, actor=actor,
                     source=source, observed_at=observed_at, evidence=evidence, outcome=outcome,
                     confidence=confidence, expires_at=expires_at, supersedes=supersedes,
                     readers=readers, subject=subject)
        return self.append_many([item])[0]

    def append_many(self, items: Sequence[EpisodeInput | dict[str, Any]]) -> list[Episode]:
        """Append a batch in one transaction (all or nothing)."""
        inputs = [i if isinstance(i, EpisodeInput) else build(EpisodeInput, **i) for i in items]
        if not inputs:
            return []
        tenants = {i.scope.tenant for i in inputs}
        if len(tenants) != 1:
            raise ValidationError("a batch must stay within one tenant")
        tenant = tenants.pop()
        from .safety import screen_episode

        inputs = [screen_episode(i) for i in inputs]
        contexts = self._thread_context(tenant, inputs)
        # the vector covers the previous episode of the thread too: a reply is understood
        # with what it answers
        vectors = self._rt.index.embed([
            (f"{ctx[-1]}\n" if ctx else "") + self.line(i) for i, ctx in zip(inputs, contexts,
                                                                              strict=True)])
        now = self._rt.clock.now()
        ids = [new_id() for _ in inputs]
        with self._rt.db.transaction(tenant) as tx:
            for item in inputs:
                if item.supersedes is not None:
                    self._check_supersedes(tx, item)
            rows = []
            for eid, item in zip(ids, inputs, strict=True):
                rows.append([
                    *scope_values(item.scope), eid, item.event, item.text, item.actor,
                    item.source, item.evidence, now, item.observed_at or now, item.outcome,
                    item.confidence, item.expires_at, item.supersedes,
                    dump_readers(item.readers), json.dumps(item.flags), item.subject,
                ])
            tx.executemany(f"INSERT INTO episodes ({SCOPE_COLUMNS}, {_COLUMNS}) VALUES "
                           f"({', '.join('?' * len(rows[0]))})", rows)
            for eid, item, ctx in zip(ids, inputs, contexts, strict=True):
                self._rt.db.index_text(tx, "episodes", eid, tenant, self.index_text(item),
                                       " ".join(ctx))
            if self._rt.index.vectors is not None and vectors is not None:
                self._rt.index.vectors.add(tx, "episodes", tenant, ids, vectors)
            out = self._fetch(tx, tenant, ids)
        return out

    @staticmethod
    def line(item: EpisodeInput | Row) -> str:
        """How an episode reads in a thread: ``Subject: text`` (or the event type)."""
        get = item.get if isinstance(item, dict) else lambda k: getattr(item, k)
        who = get("subject") or str(get("event")).replace("_", " ")
        outcome = get("outcome")
        return f"{who}: {get('text')}" + (f" ({outcome})" if outcome else "")

    @classmethod
    def index_text(cls, item: EpisodeInput) -> str:
        date = (item.observed_at or datetime.now().astimezone()).date().isoformat()
        return f"[{date}] {cls.line(item)}"

    def _thread_context(self, tenant: str,
                        inputs: Sequence[EpisodeInput]) -> list[list[str]]:
        """For each input, the lines of the previous episodes of its thread (same scope and
        source, by observed time), oldest first: earlier inputs of the batch, then stored ones.
        Context is what came before, so an indexed row never changes after it is written."""
        out: list[list[str]] = []
        recent: dict[tuple[str, str], list[str]] = {}
        with self._rt.db.transaction(tenant, write=False) as tx:
            for item in inputs:
                key = (item.scope.key, item.source)
                if key not in recent:
                    rows = tx.all(
                        "SELECT event, text, outcome, subject FROM episodes WHERE tenant = ? "
                        "AND scope_key = ? AND source = ? AND observed_at <= ? "
                        "ORDER BY observed_at DESC, id DESC LIMIT ?",
                        (tenant, item.scope.key, item.source,
                         item.observed_at or self._rt.clock.now(), CONTEXT_EPISODES))
                    recent[key] = [self.line(r) for r in reversed(rows)]
                out.append(recent[key][-CONTEXT_EPISODES:])
                recent[key] = [*recent[key], self.line(item)][-CONTEXT_EPISODES:]
        return out

    def _check_supersedes(self, tx: Tx, item: EpisodeInput) -> None:
        assert item.supersedes is not None
        target = item.supersedes.removeprefix("episode:")
        row = tx.one(f"SELECT {SCOPE_COLUMNS}, readers FROM episodes WHERE tenant = ? AND id = ?",
                     (item.scope.tenant, target))
        if row is None or scope_from_row(row).key != item.scope.key:
            raise ValidationError(f"supersedes {item.supersedes!r}: no such episode in this scope")
        object.__setattr__(item, "supersedes", target)
        if item.readers is None and row["readers"] is not None:
            object.__setattr__(item, "readers", load_json_list(row["readers"]))

    def _fetch(self, tx: Tx, tenant: str, ids: Sequence[str]) -> list[Episode]:
        out = []
        for eid in ids:
            row = tx.one(f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM episodes WHERE tenant = ? "
                         "AND id = ?", (tenant, eid))
            assert row is not None
            out.append(episode_from_row(row, now=self._rt.clock.now()))
        return out

    def get(self, episode_id: str, *, tenant: str | None = None) -> Episode:
        tenant = tenant or self._rt.default_tenant
        eid = episode_id.removeprefix("episode:")
        with self._rt.db.transaction(tenant, write=False) as tx:
            row = tx.one(f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM episodes WHERE tenant = ? "
                         "AND id = ?", (tenant, eid))
            if row is None:
                raise NotFound(f"no episode {eid} in tenant {tenant}")
            sup = tx.one("SELECT 1 AS x FROM episodes WHERE tenant = ? AND supersedes = ?",
                         (tenant, eid))
        return episode_from_row(row, superseded=sup is not None, now=self._rt.clock.now())

    def filter_sql(self, scope: Scope, principal: str | None, *,
                   since: datetime | None = None, until: datetime | None = None,
                   include_expired: bool = False) -> tuple[str, list[Any]]:
        """The WHERE fragment (alias ``r``) every episode read applies before ranking."""
        where, params = applies_sql(scope)
        where += f" AND {self._rt.db.readers_clause('r.readers')}"
        params.append(principal_of(scope, principal))
        if not include_expired:
            where += " AND (r.expires_at IS NULL OR r.expires_at > ?)"
            params.append(self._rt.clock.now())
        if since is not None:
            where += " AND r.observed_at >= ?"
            params.append(since)
        if until is not None:
            where += " AND r.observed_at <= ?"
            params.append(until)
        return where, params

    def search(self, scope: Scope | dict[str, Any], query: str, k: int = 5, *,
               since: datetime | str | None = None, until: datetime | str | None = None,
               principal: str | None = None, include_superseded: bool = True) -> list[Hit]:
        """Lexical search of the log within scope and dates; current entries first."""
        scope = make_scope(scope)
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query must be a non-empty string")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
            raise ValidationError(f"k must be an integer from 1 to 1000, got {k!r}")
        since_dt = _utc(since, "since") if since is not None else None
        until_dt = _utc(until, "until") if until is not None else None
        where, params = self.filter_sql(scope, principal, since=since_dt, until=until_dt)
        from .store.lexical import terms as query_terms

        with self._rt.db.transaction(scope.tenant, write=False) as tx:
            scored = self._rt.db.text_search(tx, "episodes", query, where, params, k * 4)
            rows = self._rows(tx, scope.tenant, [i for i, _ in scored])
            superseded = self.superseded_ids(tx, scope.tenant, [i for i, _ in scored])
        hits = []
        terms_ = query_terms(query)
        for rid, score in scored:
            row = rows[rid]
            is_sup = rid in superseded
            if is_sup and not include_superseded:
                continue
            hits.append(self.hit(row, score * (0.5 if is_sup else 1.0), is_sup, terms_))
        hits.sort(key=lambda h: -h.score)
        return hits[:k]

    def hit(self, row: Row, score: float, superseded: bool, terms_: Sequence[str]) -> Hit:
        from .tokens import count_tokens

        text = excerpt(row["text"], terms_)
        flags = load_json_list(row["flags"]) or []
        return Hit(ref=f"episode:{row['id']}", layer="episodes", excerpt=text, score=score,
                   date=from_text(row["observed_at"]), event=row["event"], source=row["source"],
                   actor=row["actor"], status="superseded" if superseded else "current",
                   scope=scope_from_row(row), untrusted="untrusted" in flags,
                   tokens=count_tokens(text))

    @staticmethod
    def _rows(tx: Tx, tenant: str, ids: Sequence[str]) -> dict[str, Row]:
        out: dict[str, Row] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            if not chunk:
                continue
            marks = ", ".join("?" * len(chunk))
            for row in tx.all(f"SELECT {SCOPE_COLUMNS}, {_COLUMNS} FROM episodes WHERE "
                              f"tenant = ? AND id IN ({marks})", (tenant, *chunk)):
                out[row["id"]] = row
        return out

    @staticmethod
    def superseded_ids(tx: Tx, tenant: str, ids: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            if not chunk:
                continue
            marks = ", ".join("?" * len(chunk))
            out |= {r["supersedes"] for r in tx.all(
                f"SELECT supersedes FROM episodes WHERE tenant = ? AND supersedes IN ({marks})",
                (tenant, *chunk))}
        return out


__all__ = ["EpisodeInput", "Episodes", "episode_from_row", "excerpt"]
