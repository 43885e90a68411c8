"""The episodic log (DESIGN §2, §3): append-only, dated, sourced events; the only writer of
the ``episodes`` table.

Contract:
- ``append`` stores one event with ``observed_at`` (when it was true, may differ from
  ``created_at``; default now, on the injected clock), provenance (``actor`` and
  ``source`` are required), outcome, confidence, optional ``expires_at`` and
  ``supersedes``. A correction is a *new* entry naming what it supersedes (and inheriting
  its restricted readers); rows are never updated (a trigger refuses UPDATE and any DELETE
  outside forget/retention). ``append_many`` writes a batch in one transaction;
  ``append_missing`` leaves out the items whose key an episode of their thread already has
  (whoever its readers), decided inside that transaction with the threads held (an
  idempotent re-import, also when two run at once).
- Every write is screened (:mod:`memstrata.governance.safety`): secrets are redacted in
  every stored string (text, evidence, outcome, source, event, subject, thread); content
  from an untrusted actor (the policy's ``untrusted_actors``) is flagged ``untrusted``, and
  text from any actor that reads as an instruction is ``quarantined`` too.
- A *thread* is the episodes of one scope with the same ``thread``: a conversation session,
  a run, a ticket, given as ``thread=`` (a run's :meth:`memstrata.memory.Run.log` and the
  tools' ``log_episode`` default to the run; otherwise the default is the ``source``, so
  ``source`` stays free for per-item provenance such as ``chat:s3/t12``). An episode's
  lexical entry is ``[date] line`` with the lines of the :data:`CONTEXT_EPISODES` before
  *and after* it in its thread as lower-weighted context; its vector is made from the
  previous line and its own (:meth:`Episodes.embed_text`). The date is the stored
  ``observed_at``. The rows stay append-only; their index entries are refreshed when a
  neighbour arrives (the earlier turns gain it as following context, and a turn that lands
  before others changes their previous line, so they are re-embedded too). A turn
  restricted to some readers, or that expires, joins the context of only those turns whose
  every reader may read it, for no longer than it lasts
  (:func:`memstrata.layers.threads.may_join`, with the rest of the thread context): its words and
  meaning never reach the entry of a neighbour others may read, or that outlives it.
- When an episode is forgotten or swept (expired), the neighbours that carried it as
  context are re-indexed from what remains (:meth:`Episodes.refresh_neighbours`); without
  an embedder, the one whose vector was made with its line loses that vector (found by
  words until a ``reindex``).
- The reads (:mod:`memstrata.layers.episode_reads`, mixed in): the read filter
  :meth:`~memstrata.layers.episode_reads.EpisodeReads.filter_sql` (scope applies, readers,
  unexpired, dates); ``search`` is targeted (superseded entries ranked below current ones)
  and returns Hits; the log is never loaded whole.
- By id, with ``scope``: the episode must apply to it and be readable (NotFound).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from datetime import datetime
from typing import Any

from ..calls import checked_calls
from ..clock import Clock
from ..errors import ValidationError
from ..governance.policy import WritePolicy
from ..governance.safety import screen_record
from ..ids import new_id
from ..models import (
    Episode,
    Scope,
    build,
    make_scope,
)
from ..scoping import (
    SCOPE_COLUMNS,
    dump_readers,
    hidden_from_writer,
    load_json_list,
    scope_from_row,
    scope_values,
)
from ..store.base import Database, Row, Tx
from ..store.sql import chunks, contains_sql, like_param, marks
from .episode_reads import COLUMNS, SELECT, EpisodeReads, HistorySearch
from .episode_records import (
    EpisodeInput,
    episode_from_row,
    episode_hit,
    excerpt,
    mentions,
    row_hit,
    run_thread,
)
from .indexing import IndexEntry, RecordIndex
from .selector import Selector, narrowed, read_not_owned
from .threads import CONTEXT_EPISODES, ThreadIndex

#: Text columns a forget ``match`` searches.
_TEXT_COLUMNS = ("text", "event", "evidence", "outcome", "source")




@checked_calls
class Episodes(EpisodeReads):
    """The episodic layer; reached as ``mem.episodes``."""

    table = "episodes"

    def __init__(self, db: Database, clock: Clock, policy: WritePolicy, index: RecordIndex,
                 *, default_tenant: str = "default") -> None:
        self._db = db
        self._clock = clock
        self._policy = policy
        self._index = index
        self._default_tenant = default_tenant
        self._ranked: HistorySearch | None = None
        self._threads = ThreadIndex(db, index, clock, select=SELECT, line=self.line,
                                    index_text=self.index_text, embed_text=self.embed_text)

    def bind_ranker(self, search: HistorySearch) -> None:
        """Let :meth:`search` rank with the store's ranker. The facade binds the gate's, so
        every path that searches the log shares one ranking (this layer cannot import the
        gate, which reads it)."""
        self._ranked = search

    # -- the rules of this layer -------------------------------------------
    @staticmethod
    def line(item: EpisodeInput | Episode | Row) -> str:
        """How an episode reads in a thread: ``Subject: text`` (or the event type)."""
        get = item.get if isinstance(item, dict) else lambda k: getattr(item, k)
        who = get("subject") or str(get("event")).replace("_", " ")
        outcome = get("outcome")
        return f"{who}: {get('text')}" + (f" ({outcome})" if outcome else "")

    @classmethod
    def index_text(cls, item: EpisodeInput | Episode | Row, observed_at: datetime) -> str:
        """An episode's own lexical entry: ``[YYYY-MM-DD] line`` (the stored observed date)."""
        return f"[{observed_at.date().isoformat()}] {cls.line(item)}"

    @staticmethod
    def embed_text(context: Sequence[str], line: str) -> str:
        """What an episode's vector is made from: the previous line of its thread, then its
        own (a reply is understood with what it answers)."""
        return f"{context[-1]}\n{line}" if context else line

    # -- writes -------------------------------------------------------------
    def append(self, scope: Scope | dict[str, Any], *, text: str, actor: str | None = None,
               source: str | None = None, event: str = "note",
               observed_at: datetime | str | None = None,
               evidence: str | None = None, outcome: str | None = None,
               confidence: float = 1.0, expires_at: datetime | str | None = None,
               supersedes: str | None = None,
               readers: Sequence[str] | None = None, subject: str | None = None,
               thread: str | None = None) -> Episode:
        """Append one episode; returns it as stored. ``actor`` and ``source`` are required
        (who said it, where it came from). ``subject`` names who or what it is about (a
        speaker, a system); a query naming the subject ranks its episodes first. ``thread``
        names the conversation, run or ticket it belongs to (default: the source)."""
        if actor is None or source is None:
            missing = "actor" if actor is None else "source"
            raise ValidationError(f"an episode needs its {missing}: who said it (actor) and "
                                  "where it came from (source); nothing was stored",
                                  hint="e.g. actor='tool', source='ci:run/812'")
        item = build(EpisodeInput, scope=make_scope(scope), text=text, event=event, actor=actor,
                     source=source, observed_at=observed_at, evidence=evidence, outcome=outcome,
                     confidence=confidence, expires_at=expires_at, supersedes=supersedes,
                     readers=readers, subject=subject, thread=thread)
        return self.append_many([item])[0]

    def append_many(self, items: Sequence[EpisodeInput | dict[str, Any]]) -> list[Episode]:
        """Append a batch in one transaction (all or nothing)."""
        return [ep for ep, _ in self._append(self._inputs(items))]

    def append_missing(self, items: Sequence[EpisodeInput | dict[str, Any]],
                       keys: Sequence[Hashable],
                       key: Callable[[Episode], Hashable]) -> list[tuple[Episode, bool]]:
        """:meth:`append_many`, leaving out each item whose ``keys[n]`` is the ``key`` of an
        episode already in its thread (of exactly its scope, unexpired, whoever its readers:
        the writer acts for the scope, and an episode restricted to other readers is there
        all the same) or of an earlier item: decided inside the write transaction, its
        threads held, so two writers of the same items at once (two imports of one file)
        store each once. Returns, per item, the episode stored (True) or the one already
        there (False): one restricted to others is the caller's to count, not to show."""
        inputs = self._inputs(items)
        if isinstance(keys, str | bytes) or not isinstance(keys, Sequence) or \
                len(keys) != len(inputs) or not callable(key):
            raise ValidationError("append_missing takes the items, one key per item, and "
                                  "the function that gives a stored episode's key",
                                  hint="e.g. append_missing(items, [i['source'] for i in "
                                       "items], lambda ep: ep.provenance.source)")
        return self._append(inputs, (list(keys), key))

    def _inputs(self, items: Sequence[EpisodeInput | dict[str, Any]]) -> list[EpisodeInput]:
        if isinstance(items, str | bytes | dict) or not isinstance(items, Sequence):
            raise ValidationError("append_many takes a list of episodes (dicts or "
                                  "EpisodeInput)", hint="e.g. [{'scope': ..., 'text': ...}]")
        inputs = []
        for n, i in enumerate(items):
            if isinstance(i, EpisodeInput):
                inputs.append(i)
            elif isinstance(i, dict):
                inputs.append(build(EpisodeInput, **i))
            else:
                raise ValidationError(f"episode {n} is a {type(i).__name__}, not a dict",
                                      hint="each item is an EpisodeInput or a dict of "
                                           "append()'s arguments: scope, text, actor, source")
        return inputs

    def _append(self, inputs: list[EpisodeInput],
                unless: tuple[list[Hashable], Callable[[Episode], Hashable]] | None = None
                ) -> list[tuple[Episode, bool]]:
        """Write a batch (:meth:`append_many`); with ``unless`` (keys, key), only the items
        whose key no episode of their thread has yet (:meth:`append_missing`)."""
        if not inputs:
            return []
        tenants = {i.scope.tenant for i in inputs}
        if len(tenants) != 1:
            raise ValidationError("a batch must stay within one tenant")
        tenant = tenants.pop()
        now = self._clock.now()
        past = [n for n, i in enumerate(inputs) if i.expires_at is not None and
                i.expires_at <= now]
        if past:  # stored, it would be hidden from every read at once: refused, as a fact's
            raise ValidationError(
                f"expires_at is already in the past (episode {past[0]}: "
                f"{inputs[past[0]].expires_at}); nothing was written",
                hint="give a future expires_at, or none to keep the episode")
        inputs = [self._screen(i) for i in inputs]
        # observed_at defaults to now, the thread to the source: resolved once, so the row
        # and its index agree
        inputs = [i.model_copy(update={"observed_at": i.observed_at or now,
                                       "thread": i.thread or i.source}) for i in inputs]
        inputs = self._inherit_readers(tenant, inputs)
        # placed and embedded before the write transaction (an embedding holds no lock),
        # then placed again inside it (ThreadIndex.replace)
        ids = [new_id() for _ in inputs]
        texts = self._threads.vector_texts(inputs, self._threads.plan(tenant, inputs, ids))[0]
        made = self._index.embed(texts, tenant=tenant)
        with self._db.transaction(tenant) as tx:
            total = len(inputs)
            found: dict[int, Episode] = {}
            same: dict[int, int] = {}
            if unless is not None:
                found, same = self._logged(tx, tenant, inputs, *unless)
                fresh = [n for n in range(total) if n not in found and n not in same]
                if not fresh:
                    return [(found[n], False) for n in range(total)]
                inputs, ids = [inputs[n] for n in fresh], [ids[n] for n in fresh]
            plan, moved, vectors = self._threads.replace(tx, tenant, inputs, ids, texts, made)
            for n, item in enumerate(inputs):
                if item.supersedes is not None:
                    inputs[n] = self._check_supersedes(tx, item)
            rows = [[*scope_values(item.scope), eid, item.event, item.text, item.actor,
                     item.source, item.evidence, now, item.observed_at, item.outcome,
                     item.confidence, item.expires_at, item.supersedes,
                     dump_readers(item.readers), json.dumps(item.flags), item.subject,
                     item.thread]
                    for eid, item in zip(ids, inputs, strict=True)]
            tx.executemany(f"INSERT INTO episodes ({SCOPE_COLUMNS}, {COLUMNS}) VALUES "
                           f"({', '.join('?' * len(rows[0]))})", rows)
            entries = [IndexEntry(eid, self.index_text(item, item.observed_at or now),
                                  " ".join([*before, *after]))
                       for eid, item, before, after in zip(ids, inputs, plan.before,
                                                           plan.after, strict=True)]
            self._index.write(tx, "episodes", tenant, entries,
                              None if vectors is None else vectors[:len(inputs)])
            self._threads.refresh(tx, tenant, plan.refresh, moved,
                          None if vectors is None else vectors[len(inputs):])
            stored = iter(self._read_many(tx, tenant, ids).values())
            out: list[tuple[Episode, bool]] = []
            for n in range(total):
                out.append((found[n], False) if n in found else
                           (out[same[n]][0], False) if n in same else (next(stored), True))
            return out

    def _logged(self, tx: Tx, tenant: str, inputs: Sequence[EpisodeInput],
                keys: Sequence[Hashable], key: Callable[[Episode], Hashable]
                ) -> tuple[dict[int, Episode], dict[int, int]]:
        """Inside the write transaction, its threads held first: the positions of the items
        whose key an episode of their thread has (exactly their scope, unexpired, whatever
        its readers), with that episode, and of those whose key an earlier item has, with
        its position."""
        self._db.lock_threads(tx, tenant, self._threads.threads_in(inputs))
        now = self._clock.now()
        have: dict[tuple[str, Hashable], Episode] = {}
        by_scope: dict[str, tuple[Scope, set[str]]] = {}
        for i in inputs:
            by_scope.setdefault(i.scope.key, (i.scope, set()))[1].add(str(i.thread))
        for scope, threads in by_scope.values():
            # not the read filter: its readers clause would hide an episode restricted to
            # others, and each import would store it again
            for chunk in chunks(sorted(threads)):
                for row in tx.all(f"{SELECT} WHERE r.tenant = ? AND r.scope_key = ? AND "
                                  "(r.expires_at IS NULL OR r.expires_at > ?) AND r.thread "
                                  f"IN ({marks(chunk)})", (tenant, scope.key, now, *chunk)):
                    ep = episode_from_row(row, now=now)
                    have.setdefault((scope.key, key(ep)), ep)
        found: dict[int, Episode] = {}
        same: dict[int, int] = {}
        first: dict[tuple[str, Hashable], int] = {}
        for n, (item, k) in enumerate(zip(inputs, keys, strict=True)):
            if (item.scope.key, k) in have:
                found[n] = have[(item.scope.key, k)]
            elif (item.scope.key, k) in first:
                same[n] = first[(item.scope.key, k)]
            else:
                first[(item.scope.key, k)] = n
        return found, same

    def _screen(self, item: EpisodeInput) -> EpisodeInput:
        """Secrets redacted in every stored string; the trust flags of the text."""
        updates, flags = screen_record(
            {"text": item.text, "evidence": item.evidence, "outcome": item.outcome,
             "source": item.source, "event": item.event, "subject": item.subject,
             "thread": item.thread},
            actor=item.actor, untrusted=self._policy.config.untrusted_actors)
        if not updates and not flags:
            return item
        return item.model_copy(update={**updates, "flags": sorted({*item.flags, *flags})})

    def _inherit_readers(self, tenant: str,
                         inputs: list[EpisodeInput]) -> list[EpisodeInput]:
        """A correction of a restricted episode is restricted alike (readers not given): known
        before the batch is placed in its threads, so its context follows the rule too
        (:func:`~memstrata.layers.threads.may_join`). The write transaction checks the target again
        (:meth:`_check_supersedes`)."""
        wanted = {i.supersedes.removeprefix("episode:") for i in inputs
                  if i.supersedes is not None and i.readers is None}
        if not wanted:
            return inputs
        readers: dict[str, list[str] | None] = {}
        with self._db.transaction(tenant, write=False) as tx:
            for chunk in chunks(sorted(wanted)):
                readers.update((r["id"], load_json_list(r["readers"])) for r in tx.all(
                    f"SELECT id, readers FROM episodes WHERE tenant = ? AND id IN "
                    f"({marks(chunk)}) AND readers IS NOT NULL", (tenant, *chunk)))
        return [i.model_copy(update={"readers": readers[target]})
                if i.supersedes is not None and i.readers is None
                and (target := i.supersedes.removeprefix("episode:")) in readers
                and not hidden_from_writer(readers[target], i.scope) else i
                for i in inputs]

    def _check_supersedes(self, tx: Tx, item: EpisodeInput) -> EpisodeInput:
        assert item.supersedes is not None
        target = item.supersedes.removeprefix("episode:")
        row = tx.one(f"SELECT {SCOPE_COLUMNS}, readers FROM episodes WHERE tenant = ? AND id = ?",
                     (item.scope.tenant, target))
        # an episode the writer may not read is no more there than one that never was:
        # the same refusal, nothing written, its readers never echoed
        if row is None or scope_from_row(row).key != item.scope.key or \
                hidden_from_writer(load_json_list(row["readers"]), item.scope):
            raise ValidationError(
                f"supersedes {item.supersedes!r}: no such episode in this scope",
                hint="name an episode of this exact scope that its user may read, by the "
                     "ref a search returned (episode:ID)")
        update: dict[str, Any] = {"supersedes": target}
        if item.readers is None and row["readers"] is not None:
            # access follows the source: a correction of a restricted entry stays restricted
            update["readers"] = load_json_list(row["readers"])
        return item.model_copy(update=update)

    # -- retention and forget (inside the caller's transaction) ---------------------
    def delete_expired(self, tx: Tx, tenant: str, now: datetime) -> int:
        """Delete the tenant's episodes past ``expires_at`` (a maintenance transaction); the
        neighbours that carried one as thread context are re-indexed without it, as after
        a forget (:meth:`refresh_neighbours`)."""
        ids = [r["id"] for r in tx.all("SELECT id FROM episodes WHERE tenant = ? AND "
                                       "expires_at IS NOT NULL AND expires_at <= ?",
                                       (tenant, now))]
        if not ids:
            return 0
        threads = self.threads_of(tx, tenant, ids)
        gone = self.delete_rows(tx, tenant, ids)
        self.refresh_neighbours(tx, tenant, threads)
        return gone

    def forget_rows(self, tx: Tx, sel: Selector, *, dry_run: bool) -> list[str]:
        """Delete (unless ``dry_run``) the episodes ``sel`` selects; their full-text entries
        and vectors go by trigger. A ``subject`` selects episodes mentioning it."""
        where, params = sel.where(_TEXT_COLUMNS)
        readers, more = sel.readers(self._db.readers_clause)
        return self._selected(tx, sel, (where + readers, [*params, *more]), dry_run=dry_run)

    def kept_rows(self, tx: Tx, sel: Selector) -> list[tuple[str, Scope]]:
        """(id, scope) of the episodes ``sel`` would select among those its scope reads but
        does not own (user-wide ones seen from a project): what its forget leaves, to be
        reported."""
        among = read_not_owned(sel, self.filter_sql(sel.scope, sel.principal))
        ids = self._selected(tx, sel, sel.where(_TEXT_COLUMNS, among), dry_run=True)
        return [(i, scope_from_row(r)) for i, r in self.rows(tx, sel.scope.tenant, ids).items()]

    def _selected(self, tx: Tx, sel: Selector, base: tuple[str, list[Any]], *,
                  dry_run: bool) -> list[str]:
        chosen = narrowed(sel, "episode", base)
        if chosen is None:
            return []
        where, params = chosen
        if sel.subject is not None:
            # a cheap superset first: the subject field or the text holding its letters
            where += f" AND ({contains_sql('r.subject')} OR {contains_sql('r.text')})"
            params += [like_param(sel.subject)] * 2
        rows = tx.all(f"SELECT r.id AS id, r.subject AS subject, r.text AS text FROM episodes r "
                      f"WHERE {where}", params)
        if sel.subject is not None:
            rows = [r for r in rows if mentions(r, sel.subject)]
        ids = [r["id"] for r in rows]
        if ids and not dry_run:
            self.delete_rows(tx, sel.scope.tenant, ids)
        return ids

    def delete_rows(self, tx: Tx, tenant: str, ids: Sequence[str]) -> int:
        """Delete these episodes (chosen by :meth:`forget_rows` in a dry run, their threads
        held: :meth:`threads_of`); returns how many were deleted."""
        gone = 0
        for chunk in chunks(list(ids)):
            gone += tx.execute(f"DELETE FROM episodes WHERE tenant = ? AND id IN "
                               f"({marks(chunk)})", (tenant, *chunk))
        return gone

    def threads_of(self, tx: Tx, tenant: str,
                   ids: Sequence[str]) -> list[tuple[str, str, Any, str]]:
        """(scope key, thread, observed_at, id) of these episodes: where their neighbours
        are (:meth:`ThreadIndex.threads_of`)."""
        return self._threads.threads_of(tx, tenant, ids)

    def refresh_neighbours(self, tx: Tx, tenant: str,
                           threads: Sequence[tuple[str, str, Any, str]]) -> int:
        """Re-index the neighbours of deleted episodes (:meth:`ThreadIndex.refresh_neighbours`)."""
        return self._threads.refresh_neighbours(tx, tenant, threads)

    def rebuild_restricted_threads(self, tx: Tx, tenant: str) -> int:
        """Rewrite the threads that hold restricted or expiring turns
        (:meth:`ThreadIndex.rebuild_restricted_threads`)."""
        return self._threads.rebuild_restricted_threads(tx, tenant)

    def embed_items(self, tx: Tx, tenant: str) -> list[tuple[str, str]]:
        """(id, embed text) of every episode of the tenant, for a reindex."""
        return self._threads.embed_items(tx, tenant)

    def hold_stored(self, tx: Tx, tenant: str, ids: Sequence[str]) -> set[str]:
        """Of these episodes, those still stored, for a reindex's batch: their threads are
        held first (:meth:`threads_of`, as a forget or a sweep holds them before it
        deletes), then they are read again, so one deleted meanwhile is not among them."""
        self.threads_of(tx, tenant, ids)
        found: set[str] = set()
        for chunk in chunks(list(ids)):
            found.update(r["id"] for r in tx.all(
                f"SELECT id FROM episodes WHERE tenant = ? AND id IN ({marks(chunk)})",
                (tenant, *chunk)))
        return found

    def clear_links(self, tx: Tx, tenant: str, ids: Sequence[str]) -> None:
        """Clear ``supersedes`` links that point at forgotten episodes."""
        for chunk in chunks(list(ids)):
            tx.execute(f"UPDATE episodes SET supersedes = NULL WHERE tenant = ? AND supersedes "
                       f"IN ({marks(chunk)})", (tenant, *chunk))

__all__ = [
    "COLUMNS",
    "CONTEXT_EPISODES",
    "EpisodeInput",
    "Episodes",
    "episode_from_row",
    "episode_hit",
    "excerpt",
    "row_hit",
    "run_thread",
]
