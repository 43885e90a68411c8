"""Thread context of episodes: which turns an episode is indexed with, and keeping those
index entries right as its thread changes.

Contract (the rules behind :class:`memstrata.layers.episodes.Episodes`, which owns the rows):
- An episode's lexical entry holds the lines of the :data:`CONTEXT_EPISODES` turns before
  *and after* it in its thread (scope + ``thread``) as lower-weighted context; its vector is
  made from the previous line and its own (``embed_text``).
- A turn joins another's context only when whoever may read the other may read it, for as
  long (:func:`may_join` over each one's :class:`Access`): a restricted or expiring turn
  never speaks through the entry of a neighbour others may read, or that outlives it.
- :meth:`ThreadIndex.plan` places a batch in its threads before it is written (the lines
  around each new turn, and the stored neighbours whose context changes, re-embedded when
  their previous line changes), and :meth:`ThreadIndex.replace` again inside the write
  transaction, its threads held against other writers;
  :meth:`ThreadIndex.refresh_neighbours` rebuilds the entries around deleted turns
  (forget, sweep; :meth:`ThreadIndex.threads_of` holds their threads first), dropping a
  vector it cannot make again without an embedder;
  :meth:`ThreadIndex.rebuild_restricted_threads` rewrites the threads that hold restricted
  or expiring turns (reindex); :meth:`ThreadIndex.embed_items` gives a reindex every
  episode's vector text.
- This module writes index entries only through the record index, never the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import Any

from ..clock import Clock, from_text
from ..scoping import load_json_list
from ..store.base import Database, Row, Tx
from ..store.sql import chunks, marks
from .indexing import IndexEntry, RecordIndex

#: How many episodes before (and after) one in its thread are indexed as its context.
CONTEXT_EPISODES = 2


@dataclass(frozen=True)
class Access:
    """Who may read an episode (None: anyone in its scope) and until when (None: no end)."""

    readers: frozenset[str] | None
    expires: datetime | None


def may_join(reader_of: Access, line_of: Access) -> bool:
    """Whether the second episode may be in the thread context of the first: only when
    whoever may read the first may read the second, for as long (it expires no earlier). A
    restricted turn never speaks through the index entry (words or vector) of a neighbour
    others may read, nor an expiring one through a neighbour that outlives it."""
    readers = line_of.readers is None or (
        reader_of.readers is not None and reader_of.readers <= line_of.readers)
    lasts = line_of.expires is None or (
        reader_of.expires is not None and reader_of.expires <= line_of.expires)
    return readers and lasts


def access_of(item: Any) -> Access:
    """The :class:`Access` of a stored row (a mapping) or of an episode to be written."""
    if isinstance(item, Mapping):
        readers, expires = load_json_list(item["readers"]), from_text(item["expires_at"])
    else:
        readers, expires = item.readers, item.expires_at
    return Access(None if readers is None else frozenset(readers), expires)


def _side(cmp: str) -> str:
    """The WHERE and ORDER BY tail (alias ``r``) of one side of a point of a thread, in the
    thread's order, time then id (``cmp`` ``<``: before it, nearest first; ``>``: after):
    parameters observed time, observed time, id, limit."""
    order = "DESC" if cmp == "<" else "ASC"
    return (f"(r.observed_at {cmp} ? OR (r.observed_at = ? AND r.id {cmp} ?)) "
            f"ORDER BY r.observed_at {order}, r.id {order} LIMIT ?")


def _around(access: Sequence[Access], pos: int,
            width: int = CONTEXT_EPISODES) -> tuple[list[int], list[int], bool, bool]:
    """The positions of the ``width`` episodes before and after ``pos`` in a thread's
    sequence that may join its context (:func:`may_join`), nearest last / first, and
    whether each side ran out of the sequence first."""
    mine = access[pos]
    # the nearest first, stopping at ``width``: a walk, not a scan of the whole thread
    before = list(islice((i for i in range(pos - 1, -1, -1) if may_join(mine, access[i])),
                         width))
    after = list(islice((i for i in range(pos + 1, len(access)) if may_join(mine, access[i])),
                        width))
    return before[::-1], after, len(before) < width, len(after) < width


#: How many stored episodes after a batch's first one are read to place the batch, and
#: before it (their contexts may skip restricted turns: :func:`may_join`).
_PLACE_WINDOW = 500
_PLACE_BACK = 8 * CONTEXT_EPISODES


@dataclass
class Neighbour:
    """A stored episode whose thread context changes, and its new context."""

    row: Row
    before: list[str]
    after: list[str]
    reembed: bool = False


@dataclass
class Plan:
    """Where a batch lands in its threads (see :meth:`ThreadIndex.plan`)."""

    before: list[list[str]]
    after: list[list[str]]
    refresh: list[Neighbour] = field(default_factory=list)


class ThreadIndex:
    """The thread context of one store's episodes (see the module docstring). It reads
    episode rows with ``select`` and renders them with the episodes' own ``line``,
    ``index_text`` and ``embed_text``."""

    def __init__(self, db: Database, index: RecordIndex, clock: Clock, *, select: str,
                 line: Callable[[Any], str], index_text: Callable[[Any, datetime], str],
                 embed_text: Callable[[Sequence[str], str], str]) -> None:
        self._db = db
        self._index = index
        self._clock = clock
        self._select = select
        self.line = line
        self.index_text = index_text
        self.embed_text = embed_text

    @staticmethod
    def threads_in(inputs: Sequence[Any]) -> list[tuple[str, str]]:
        """The (scope key, thread) of each thread a batch writes to."""
        return sorted({(i.scope.key, i.thread) for i in inputs})

    def plan(self, tenant: str, inputs: Sequence[Any], ids: Sequence[str],
             tx: Tx | None = None) -> Plan:
        """Place each input (its id in ``ids``) in its thread (scope + thread, by observed
        time, then id: the order the thread is stored and read in, whichever writer
        commits first): the lines before and after it, and the stored neighbours whose
        context changes; read in ``tx`` (the write transaction, to check a plan made before
        it: :meth:`Episodes.append_many`), else in a read transaction of its own."""
        if tx is None:
            with self._db.transaction(tenant, write=False) as own:
                return self.plan(tenant, inputs, ids, own)
        plan = Plan(before=[[] for _ in inputs], after=[[] for _ in inputs])
        groups: dict[tuple[str, str], list[int]] = {}
        for n, item in enumerate(inputs):
            assert item.thread is not None
            groups.setdefault((item.scope.key, item.thread), []).append(n)
        for (scope_key, thread), members in groups.items():
            at, first = min((inputs[n].observed_at, ids[n]) for n in members)
            # the context back (of stored turns too: those whose following context
            # changes need their own earlier context), and what follows, split at the
            # batch's first turn in the thread's order (time, then id: turns of one moment
            # written by other writers fall on the side their ids put them)
            where = f"{self._select} WHERE r.tenant = ? AND r.scope_key = ? AND r.thread = ? AND "
            earlier = tx.all(where + _side("<"),
                             (tenant, scope_key, thread, at, at, first, _PLACE_BACK))
            later = tx.all(where + _side(">"),
                           (tenant, scope_key, thread, at, at, first, _PLACE_WINDOW))
            seq: list[tuple[Any, str, Row | int]] = [
                (from_text(r["observed_at"]), str(r["id"]), r) for r in reversed(earlier)]
            seq += [(from_text(r["observed_at"]), str(r["id"]), r) for r in later]
            seq += [(inputs[n].observed_at, ids[n], n) for n in members]
            seq.sort(key=lambda x: (x[0], x[1]))
            lines = [self.line(inputs[x] if isinstance(x, int) else x) for _, _, x in seq]
            access = [access_of(inputs[x] if isinstance(x, int) else x) for _, _, x in seq]
            new = [isinstance(x, int) for _, _, x in seq]
            # what was read is cut at both ends: a stored row whose context reaches past
            # a cut edge is context only (its own context is not all here)
            cut_low = len(earlier) == _PLACE_BACK
            cut_high = len(later) == _PLACE_WINDOW
            for pos, (_, _, x) in enumerate(seq):
                ahead, behind, start, end = _around(access, pos)
                before, after = [lines[i] for i in ahead], [lines[i] for i in behind]
                if isinstance(x, int):
                    plan.before[x], plan.after[x] = before, after
                elif not (start and cut_low) and not (end and cut_high) and any(
                        new[i] for i in (*ahead, *behind)):
                    plan.refresh.append(Neighbour(x, before, after,
                                                  reembed=bool(ahead) and new[ahead[-1]]))
        return plan

    def vector_texts(self, inputs: Sequence[Any], plan: Plan) -> tuple[list[str], list[int]]:
        """What the vectors of a placed batch are made from: each new turn's, then each
        stored neighbour's whose previous line changes (those neighbours' positions in
        ``plan.refresh`` are returned too)."""
        moved = [n for n, r in enumerate(plan.refresh) if r.reembed]
        texts = [self.embed_text(before, self.line(i))
                 for i, before in zip(inputs, plan.before, strict=True)]
        return texts + [self.embed_text(plan.refresh[n].before, self.line(plan.refresh[n].row))
                        for n in moved], moved

    def replace(self, tx: Tx, tenant: str, inputs: Sequence[Any], ids: Sequence[str],
                texts: Sequence[str], made: Any) -> tuple[Plan, list[int], Any]:
        """Inside a batch's write transaction: hold its threads (:meth:`Database.lock_threads`)
        and place it again, so a turn another writer forgot or wrote since it was placed
        is not (or is) in the context; returns the plan, the refreshed neighbours to
        re-embed and the vectors: those ``made`` from ``texts`` before the transaction,
        and only what changed embedded now."""
        self._db.lock_threads(tx, tenant, self.threads_in(inputs))
        plan = self.plan(tenant, inputs, ids, tx)
        wanted, moved = self.vector_texts(inputs, plan)
        if made is None or list(wanted) == list(texts):
            return plan, moved, made
        import numpy as np

        have = {t: made[n] for n, t in enumerate(texts)}
        missing = [t for t in dict.fromkeys(wanted) if t not in have]
        fresh = self._index.embed(missing) if missing else None
        if fresh is not None:
            have.update(zip(missing, fresh, strict=True))
        return plan, moved, np.stack([have[t] for t in wanted])

    def refresh(self, tx: Tx, tenant: str, targets: Sequence[Neighbour],
                moved: Sequence[int], vectors: Any) -> None:
        """Rewrite the index entries of stored neighbours whose context changed (with their
        new vectors when their previous line changed), each entry once."""
        entries = [IndexEntry(t.row["id"], self.index_text(t.row, from_text(
            t.row["observed_at"]) or self._clock.now()), " ".join([*t.before, *t.after]))
            for t in targets]
        kept = set(moved) if vectors is not None else set()
        self._index.write(tx, "episodes", tenant,
                          [e for n, e in enumerate(entries) if n not in kept])
        if kept:
            self._index.write(tx, "episodes", tenant, [entries[n] for n in moved], vectors)

    def threads_of(self, tx: Tx, tenant: str,
                   ids: Sequence[str]) -> list[tuple[str, str, Any, str]]:
        """(scope key, thread, observed_at, id) of these episodes, about to be deleted:
        where their neighbours are. Their threads are held against appends until the
        transaction ends (:meth:`Database.lock_threads`), so no append places a turn beside
        one of them from a view that still holds it."""
        out: list[tuple[str, str, Any, str]] = []
        for chunk in chunks(list(ids)):
            out += [(r["scope_key"], r["thread"] or r["source"], r["observed_at"], r["id"])
                    for r in tx.all(
                        f"SELECT id, scope_key, thread, source, observed_at FROM episodes "
                        f"WHERE tenant = ? AND id IN ({marks(chunk)})", (tenant, *chunk))]
        self._db.lock_threads(tx, tenant, [(key, thread) for key, thread, _, _ in out])
        return out

    def refresh_neighbours(self, tx: Tx, tenant: str,
                           threads: Sequence[tuple[str, str, Any, str]]) -> int:
        """Re-index the episodes that may have had a deleted episode in their thread
        context: on each side, in thread order (observed time, then id: a batch's turns
        share their time), every turn with fewer than :data:`CONTEXT_EPISODES` turns it
        may join (:func:`may_join`) between it and the deleted one. Their lexical context
        is rebuilt from the episodes that remain, and the vectors of those that came next
        with no such turn between (made with its line, :meth:`embed_text`) are made again,
        so a deleted text survives in no neighbour's index entry. Returns how many entries
        were rebuilt."""
        seen: set[str] = set()
        targets: list[Row] = []
        followers: set[str] = set()
        for scope_key, thread, observed, gone in threads:
            for cmp in (">", "<"):
                side = tx.all(
                    f"{self._select} WHERE r.tenant = ? AND r.scope_key = ? AND r.thread = ? "
                    f"AND {_side(cmp)}",
                    (tenant, scope_key, thread, observed, observed, gone, _PLACE_BACK))
                access = [access_of(r) for r in side]
                for i, row in enumerate(side):
                    between = sum(may_join(access[i], access[j]) for j in range(i))
                    if between >= CONTEXT_EPISODES:
                        continue  # the deleted turn was past its reach
                    if cmp == ">" and between == 0:
                        followers.add(row["id"])  # its vector held the deleted line
                    if row["id"] not in seen:
                        seen.add(row["id"])
                        targets.append(row)
        if not targets:
            return 0
        contexts = [self.context_of(tx, tenant, row) for row in targets]
        entries = [IndexEntry(row["id"], self.index_text(row, from_text(row["observed_at"])
                                                         or self._clock.now()),
                              " ".join([*before, *after]))
                   for row, (before, after) in zip(targets, contexts, strict=True)]
        moved = [n for n, row in enumerate(targets) if row["id"] in followers]
        self._index.write(tx, "episodes", tenant,
                          [e for e in entries if e.record_id not in followers])
        if moved:
            vectors = self._index.embed([self.embed_text(contexts[n][0], self.line(targets[n]))
                                         for n in moved])
            self._index.write(tx, "episodes", tenant, [entries[n] for n in moved], vectors)
            if vectors is None:  # no embedder here: the old vectors hold the line that is gone
                self._index.drop_vectors(tx, tenant, [targets[n]["id"] for n in moved])
        return len(entries)

    def context_of(self, tx: Tx, tenant: str, row: Row) -> tuple[list[str], list[str]]:
        """The lines before and after a stored episode in its thread that may join its
        context (:func:`may_join`), as stored now."""
        mine = access_of(row)
        sides = []
        for cmp in ("<", ">"):
            near = tx.all(
                "SELECT r.event, r.text, r.outcome, r.subject, r.readers, r.expires_at FROM "
                f"episodes r WHERE r.tenant = ? AND r.scope_key = ? AND r.thread = ? AND "
                f"{_side(cmp)}",
                (tenant, row["scope_key"], row["thread"] or row["source"], row["observed_at"],
                 row["observed_at"], row["id"], _PLACE_BACK))
            sides.append([r for r in near if may_join(mine, access_of(r))][:CONTEXT_EPISODES])
        earlier, later = sides
        return [self.line(r) for r in reversed(earlier)], [self.line(r) for r in later]

    def rebuild_restricted_threads(self, tx: Tx, tenant: str) -> int:
        """Rewrite the lexical entries of every episode in a thread that holds a restricted
        or expiring turn, by :func:`may_join` (entries written before the rule carried such
        turns to their neighbours); returns how many. Vectors are re-made by ``reindex``."""
        entries: list[IndexEntry] = []
        for t in tx.all("SELECT DISTINCT scope_key, thread FROM episodes WHERE tenant = ? "
                        "AND (readers IS NOT NULL OR expires_at IS NOT NULL)", (tenant,)):
            rows = tx.all(f"{self._select} WHERE r.tenant = ? AND r.scope_key = ? AND r.thread = ? "
                          "ORDER BY r.observed_at, r.id", (tenant, t["scope_key"], t["thread"]))
            lines = [self.line(r) for r in rows]
            access = [access_of(r) for r in rows]
            for pos, row in enumerate(rows):
                ahead, behind, _, _ = _around(access, pos)
                entries.append(IndexEntry(
                    row["id"], self.index_text(row, from_text(row["observed_at"])
                                               or self._clock.now()),
                    " ".join(lines[i] for i in (*ahead, *behind))))
        self._index.write(tx, "episodes", tenant, entries)
        return len(entries)

    def embed_items(self, tx: Tx, tenant: str) -> list[tuple[str, str]]:
        """(id, embed text) of every episode of the tenant, thread by thread, for a reindex:
        its line after the nearest earlier one that may join it (:func:`_around`)."""
        rows = tx.all("SELECT id, event, text, outcome, subject, readers, expires_at, "
                      "scope_key, thread FROM episodes WHERE tenant = ? ORDER BY scope_key, "
                      "thread, observed_at, id", (tenant,))
        out: list[tuple[str, str]] = []
        start = 0
        for end in range(1, len(rows) + 1):
            if end < len(rows) and (rows[end]["scope_key"], rows[end]["thread"]) == \
                    (rows[start]["scope_key"], rows[start]["thread"]):
                continue
            thread = rows[start:end]  # one thread, in order
            lines = [self.line(r) for r in thread]
            access = [access_of(r) for r in thread]
            for pos, row in enumerate(thread):
                ahead = _around(access, pos)[0]
                out.append((row["id"], self.embed_text([lines[i] for i in ahead], lines[pos])))
            start = end
        return out

__all__ = ["CONTEXT_EPISODES", "Access", "Neighbour", "Plan", "ThreadIndex", "access_of",
           "may_join"]
