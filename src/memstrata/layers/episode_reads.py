"""Reads of the ``episodes`` table, mixed into :class:`memstrata.layers.episodes.Episodes`
(which owns the table and writes it).

Contract: :meth:`EpisodeReads.filter_sql` is the read filter every episode read applies
before ranking (the scope applies, the principal may read, unexpired, within the dates);
``get`` (one episode by id, scope and readers applied), ``log`` (the episodes of exactly a
scope, oldest first: what the episodic file shows) and ``search`` (the store's ranker,
bound by :class:`~memstrata.Memory`: one ranking for every path that searches the log);
the rows a ranker reads inside its own transaction (``rows``, ``score_rows``,
``present``, ``read_many``), which episodes a later one supersedes (``superseded_sql``,
``superseded_ids``) and which subjects the caller's episodes have (``subjects_named``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..calls import checked_calls
from ..clock import Clock
from ..errors import ConfigError, NotFound
from ..inputs import MAX_K, MAX_SOURCE, dates_arg, int_arg, record_id_arg, text_arg
from ..models import Episode, Hit, Scope, make_scope
from ..scoping import SCOPE_COLUMNS, applies_sql, principal_of, resolve_caller
from ..store.base import Database, Row, Tx
from ..store.sql import chunks, marks, observed_between
from .episode_records import episode_from_row

COLUMNS = ("id, event, text, actor, source, evidence, created_at, observed_at, outcome, "
           "confidence, expires_at, supersedes, readers, flags, subject, thread")
SELECT = f"SELECT {SCOPE_COLUMNS}, {COLUMNS} FROM episodes r"
#: What a ranker scores a candidate by and builds its hit from (:meth:`Episodes.score_rows`,
#: :func:`row_hit`): the short columns of a row, without evidence, readers and expiry.
_SCORE_SELECT = ("SELECT r.tenant, r.id, r.text, r.event, r.subject, r.observed_at, r.actor, "
                 "r.source, r.outcome, r.flags, r.thread, r.s_user, r.s_project, r.s_agent, "
                 "EXISTS (SELECT 1 FROM episodes s WHERE s.tenant = r.tenant AND "
                 "s.supersedes = r.id) AS superseded FROM episodes r")


#: A ranked search of the log: ``(scope, query, k, since, until, principal) -> hits``.
HistorySearch = Callable[[Scope, str, int, datetime | None, datetime | None, str | None],
                         list[Hit]]


@checked_calls
class EpisodeReads:
    """Reads of the ``episodes`` table (mixed into :class:`~memstrata.layers.episodes.Episodes`)."""

    _db: Database
    _clock: Clock
    _default_tenant: str
    _ranked: HistorySearch | None

    def filter_sql(self, scope: Scope, principal: str | None, *,
                   since: datetime | None = None, until: datetime | None = None,
                   include_expired: bool = False) -> tuple[str, list[Any]]:
        """The WHERE fragment (alias ``r``) every episode read applies before ranking."""
        where, params = applies_sql(scope)
        where += f" AND {self._db.readers_clause('r.readers')}"
        params.append(principal_of(scope, principal))
        if not include_expired:
            where += " AND (r.expires_at IS NULL OR r.expires_at > ?)"
            params.append(self._clock.now())
        window, dates = observed_between("r", since, until)
        return where + window, [*params, *dates]

    # -- reads ------------------------------------------------------------
    def get(self, episode_id: str, scope: Scope | dict[str, Any] | None = None, *,
            principal: str | None = None, tenant: str | None = None) -> Episode:
        """One episode by id (or ``episode:ID``). With ``scope``, it must apply to the scope
        and be readable by the principal, else NotFound."""
        eid = record_id_arg(episode_id, "episode")
        tenant, sc = resolve_caller(scope, tenant, self._default_tenant)
        with self._db.transaction(tenant, write=False) as tx:
            if sc is None:
                row = tx.one(f"{SELECT} WHERE r.tenant = ? AND r.id = ?", (tenant, eid))
            else:
                where, params = self.filter_sql(sc, principal, include_expired=True)
                row = tx.one(f"{SELECT} WHERE {where} AND r.id = ?", (*params, eid))
            if row is None:
                raise NotFound(f"no episode {eid} in {sc if sc is not None else tenant}",
                               hint="find episodes with `memstrata episodes search`")
            sup = self.superseded_ids(tx, tenant, [eid])
        return episode_from_row(row, superseded=bool(sup), now=self._clock.now())

    def log(self, scope: Scope | dict[str, Any], *, principal: str | None = None,
            limit: int = 100_000, thread: str | None = None,
            since: datetime | str | None = None,
            until: datetime | str | None = None) -> list[Episode]:
        """The episodes of exactly this scope that the principal may read, oldest first
        (unexpired): what the episodic file shows; ``thread``, ``since`` and ``until``
        narrow it to one thread and a date range (inclusive)."""
        scope = make_scope(scope)
        limit = int_arg(limit, "limit", low=0, high=1_000_000)
        where, params = self.filter_sql(scope, principal)
        where += " AND r.scope_key = ?"
        extra: list[Any] = [scope.key]
        if thread is not None:
            where += " AND r.thread = ?"
            extra.append(text_arg(thread, "thread", max_len=MAX_SOURCE))
        for op, when in zip((">=", "<="), dates_arg(since, until), strict=True):
            if when is not None:
                where += f" AND r.observed_at {op} ?"
                extra.append(when)
        with self._db.transaction(scope.tenant, write=False) as tx:
            rows = tx.all(f"{SELECT} WHERE {where} "
                          "ORDER BY r.observed_at, r.id LIMIT ?",
                          [*params, *extra, limit])
            sup = self.superseded_ids(tx, scope.tenant, [r["id"] for r in rows])
        now = self._clock.now()
        return [episode_from_row(r, superseded=r["id"] in sup, now=now) for r in rows]

    def search(self, scope: Scope | dict[str, Any], query: str, k: int = 5, *,
               since: datetime | str | None = None, until: datetime | str | None = None,
               principal: str | None = None, include_superseded: bool = True) -> list[Hit]:
        """Search the log within scope and dates, best first.

        This is the store's ranker, bound by :class:`~memstrata.Memory` (the one behind
        ``recall(layers=["episodes"])`` and the ``search_history`` tool: lexical + vectors
        + adjustments, scores on the gate's 0..1 scale, the same order for the same request).
        """
        if self._ranked is None:
            raise ConfigError("episodes.search has no ranker bound",
                              hint="open the store with Memory.open(...), which binds the gate")
        scope = make_scope(scope)
        query = text_arg(query, "query", max_len=4000,
                         hint="describe what to look for in past events")
        k = int_arg(k, "k", low=1, high=MAX_K)
        since_dt, until_dt = dates_arg(since, until)
        hits = self._ranked(scope, query, k, since_dt, until_dt, principal)
        if include_superseded:
            return hits
        current = [h for h in hits if h.status != "superseded"]
        if len(current) < len(hits) and k < MAX_K:  # superseded ones took slots: ask wider
            current = [h for h in self._ranked(scope, query, MAX_K, since_dt, until_dt,
                                               principal) if h.status != "superseded"]
        return current[:k]

    def _read_many(self, tx: Tx, tenant: str, ids: Sequence[str]) -> dict[str, Episode]:
        now = self._clock.now()
        rows = self.rows(tx, tenant, ids)
        return {i: episode_from_row(rows[i], now=now) for i in ids if i in rows}

    @staticmethod
    def rows(tx: Tx, tenant: str, ids: Sequence[str]) -> dict[str, Row]:
        """Raw rows by id inside the caller's transaction (the ranker scores many candidates
        and builds :class:`Episode` objects only for those it keeps)."""
        out: dict[str, Row] = {}
        for chunk in chunks(list(ids)):
            for row in tx.all(f"{SELECT} WHERE r.tenant = ? AND r.id IN ({marks(chunk)})",
                              (tenant, *chunk)):
                out[row["id"]] = row
        return out

    @staticmethod
    def score_rows(tx: Tx, tenant: str, ids: Sequence[str]) -> dict[str, Row]:
        """What a ranker scores candidates by and builds their hits from (:func:`row_hit`),
        by id, inside the caller's transaction (the caller filtered them): tenant, id, text,
        event, subject, observed_at, actor, source, outcome, flags, thread, the scope
        columns s_user/s_project/s_agent, and ``superseded`` (a later episode supersedes
        it)."""
        out: dict[str, Row] = {}
        for chunk in chunks(list(ids)):
            for row in tx.all(f"{_SCORE_SELECT} WHERE r.tenant = ? AND r.id IN "
                              f"({marks(chunk)})", (tenant, *chunk)):
                out[row["id"]] = row
        return out

    @staticmethod
    def present(tx: Tx, tenant: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are still stored (not forgotten or swept)."""
        out: set[str] = set()
        for chunk in chunks(list(ids)):
            out |= {r["id"] for r in tx.all(
                f"SELECT id FROM episodes WHERE tenant = ? AND id IN ({marks(chunk)})",
                (tenant, *chunk))}
        return out

    def read_many(self, tx: Tx, tenant: str, ids: Sequence[str]) -> dict[str, Episode]:
        """Episodes by id inside the caller's transaction (the caller filtered them)."""
        return self._read_many(tx, tenant, ids)

    @staticmethod
    def superseded_sql(tenant: str) -> tuple[str, list[Any]]:
        """SQL true for an episode (alias ``r``) a later episode of the tenant supersedes,
        and its parameters: the same rule as ``superseded`` of :meth:`score_rows` and
        :meth:`superseded_ids`, as one list of the superseded ids, read once per query."""
        return ("r.id IN (SELECT s.supersedes FROM episodes s WHERE s.tenant = ? AND "
                "s.supersedes IS NOT NULL)", [tenant])

    @staticmethod
    def superseded_ids(tx: Tx, tenant: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` a later episode supersedes."""
        out: set[str] = set()
        for chunk in chunks(list(ids)):
            out |= {r["supersedes"] for r in tx.all(
                f"SELECT supersedes FROM episodes WHERE tenant = ? AND supersedes IN "
                f"({marks(chunk)})", (tenant, *chunk))}
        return out

    def subjects_named(self, tx: Tx, where: str, params: Sequence[Any],
                       words: Sequence[str]) -> set[str]:
        """Which of ``words`` are the subject of some episode the caller may read (``where``,
        alias ``r``: :meth:`filter_sql`): another scope's or reader's subjects never shape
        the caller's search."""
        if not words:
            return set()
        rows = tx.all(f"SELECT DISTINCT r.subject AS subject FROM episodes r WHERE "
                      f"r.subject IN ({marks(words)}) AND {where}", (*words, *params))
        return {r["subject"] for r in rows}


__all__ = ["COLUMNS", "EpisodeReads", "HistorySearch"]
