"""Lexical search on SQLite: FTS5's BM25 over the rows the caller's filter admits alone.

Contract (used by :class:`memstrata.store.sqlite.SQLiteDatabase`, which registers
:func:`doc_len` as the SQL function ``memstrata_doc_len`` on its connection):

- :meth:`TextSearch.search` returns ``(id, score)`` for the rows of ``episodes`` or
  ``facts`` that match the query's words and the caller's filter, best first. The context
  column (neighbouring records) counts half as much as the body.
- A word's weight and the mean entry length are the caller's (the rows its filter admits),
  never the whole table's: another user's or tenant's rows move no score and no order.
  Where the caller may read every row of the table (fewer than
  :data:`~memstrata.store.lexical.EXACT_ROWS`, no query word in ``COMMON_TERM_DOCS`` of
  them), the table's statistics are its own and the scores are SQLite's own ``bm25``, in
  one query; either way the same scores, so another caller's write that ends this moves
  none of them. For a caller with many rows the counts are bounded and remembered (see
  :func:`_key`), and never lag its rows (:meth:`TextSearch._watch`).
- In a large index very common query words are left out, as the caller's own counts say
  (:func:`memstrata.store.lexical.selective`); the counts are remembered per process
  (:class:`~memstrata.store.lexical.TermCounts`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from .lexical import (
    COMMON_TERM_DOCS,
    EXACT_ROWS,
    LARGE_INDEX_ROWS,
    AllCommon,
    TermCounts,
    cjk_spaced,
    filter_key,
    fts5_idf,
    selective,
    settled,
    terms,
)


def _varints(data: bytes) -> list[int]:
    """SQLite varints (big-endian, seven bits a byte, a ninth byte of eight), as FTS5
    writes an index's averages record: the row count, then each column's token total."""
    out: list[int] = []
    value, used = 0, 0
    for byte in data:
        used += 1
        if used == 9:
            out.append((value << 8) | byte)
            value, used = 0, 0
            continue
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            out.append(value)
            value, used = 0, 0
    return out


def doc_len(docsize: bytes | None) -> int:
    """An entry's length in tokens from its FTS5 ``docsize`` record (a varint per column:
    body and context), as ``bm25`` takes it; the SQL function ``memstrata_doc_len``."""
    if not docsize:
        return 0
    if len(docsize) == 2:  # both under 128 tokens: one byte each
        return docsize[0] + docsize[1]
    return sum(_varints(docsize))


#: BM25's term saturation and length normalisation (SQLite's ``bm25`` uses the same).
_BM25_K1, _BM25_B = 1.2, 0.75



def quote(word: str) -> str:
    """``word`` as an FTS5 phrase (a CJK word: its characters, adjacent, as indexed)."""
    return '"' + cjk_spaced(word).replace('"', '""') + '"'


class TextSearch:
    """One store's lexical search, with the counts it remembers."""

    def __init__(self) -> None:
        self._counts = TermCounts()
        #: Per table, what :meth:`_watch` saw last: the file's change state, the highest
        #: rowid, that row's id, the index's row count and its entries written in place.
        self._seen: dict[str, tuple[tuple[int, ...], int, str | None, int, int]] = {}

    def search(self, tx: Any, table: str, query: str, where: str, params: Sequence[Any],
               limit: int, drop: Sequence[str] = (), all_common: AllCommon = "keep",
               among: tuple[str, Sequence[Any]] | None = None,
               weight: tuple[str, Sequence[Any]] | None = None) -> list[tuple[str, float]]:
        """BM25 over the rows the caller's filter admits (chosen and ordered by BM25 times
        ``weight`` where one is given: :meth:`~memstrata.store.base.Database.text_search`),
        weighed among the rows ``among`` admits alone (the rows the caller may read, whatever
        their time or status; default the filter itself). SQLite's ``bm25`` takes its statistics
        from the whole full-text table (every user and tenant): a word's weight and the mean
        entry length, so another caller's rows would move this one's ranking and tell whether
        they hold a word. Each word is scored on its own; from its ``bm25``, the table's weight
        (:meth:`_table_stats`) and the entry's length (FTS5's own token counts) give back the
        word's term frequency, which is scored again with the word's weight and the mean entry
        length among the caller's rows (:meth:`_caller_rows`, :meth:`_caller_counts`,
        :meth:`_caller_length`). Where the caller may read every row (one caller in the file),
        the statistics are the same, and SQLite's ``bm25`` over all the words is the same score,
        in one query (at 10k and 20k episodes 0.8 ms against 2.1-2.3 ms for the parts)."""
        top = tx.one(f"SELECT max(rowid) AS n FROM {table}_fts")
        size = int(top["n"] or 0) if top else 0
        table_rows, table_len = self._table_stats(tx, table)
        self._watch(tx, table, size, table_rows)
        # the statistics' rows: every count below is taken among them
        sw, sp = among if among is not None else (where, params)
        words, counted = self._selective_words(tx, table, query, drop, sw, sp, all_common,
                                               size)
        if not words:
            return []
        small = counted is None
        key = _key(tx, table, sw, sp, small)
        before = self._counts.peek((*key, "rows"), "")  # the sample before a top-up
        own_rows = self._caller_rows(tx, table, sw, sp, key, size)
        fts = f"{table}_fts"
        # FTS5's weight of each word: the table's rows and the rows matching it, counted
        # for the file as it is now (a count remembered across writes would let the table's
        # writes show through)
        table_counts = self._counts.counter((table, "table", *tx.changes()), size, lambda w: int(
            tx.one(f"SELECT count(*) AS n FROM {fts} WHERE {fts} MATCH ?", (quote(w),))["n"]))
        if own_rows == table_rows < EXACT_ROWS and all(
                table_counts(w) < COMMON_TERM_DOCS for w in words):
            # the caller may read every row (its count is exact: topped up with new rows,
            # taken again after a delete), so the table's statistics are its own, and none
            # is past a cap the parts below would bound it by: SQLite's bm25 over all the
            # words at once gives their scores, and another caller's write that ends this
            # moves none of them
            return self._one_query(tx, table, words, where, params, limit, weight)
        own_counts = self._caller_counts(tx, table, words, counted, sw, sp, key, size)
        own = {w: fts5_idf(own_rows, own_counts[w]) for w in words}
        own_len = self._caller_length(tx, table, sw, sp, key, size, own_rows, before)
        table_idf = {w: fts5_idf(table_rows, table_counts(w)) for w in words}
        # one part per word; the context column (neighbouring records) counts half as much
        # as the body; CROSS JOIN keeps the full-text match the outer loop: before ANALYZE
        # has run, the planner may walk the scope index and test the match row by row (2 s,
        # against 7 ms, for one count at 52k rows)
        wsql, wparams = weight if weight is not None else ("1.0", ())
        part = (f"SELECT {fts}.rowid AS rid, r.id AS id, bm25({fts}, 1.0, 0.5) AS b, ? AS g, "
                f"? AS w, {wsql} AS wt FROM {fts} CROSS JOIN {table} r ON r.rowid = "
                f"{fts}.rowid WHERE {fts} MATCH ? AND {where}")
        k1, b, c = _BM25_K1, _BM25_B, _BM25_K1 + 1
        # t: a word's term part as bm25 gave it (the table's mean length); f: the term
        # frequency it stands for, at the entry's length dl; then BM25 at the caller's mean
        term = "(-p.b / p.g)"
        freq = f"({term} * {k1} * ({1 - b} + {b} * d.dl / ?) / max({c} - {term}, 1e-9))"
        rows = tx.tuples(
            f"WITH p AS MATERIALIZED ({' UNION ALL '.join([part] * len(words))}), "
            "d AS MATERIALIZED (SELECT DISTINCT p.rid AS rid, memstrata_doc_len(z.sz) AS dl "
            f"FROM p JOIN {fts}_docsize z ON z.id = p.rid) "
            f"SELECT p.id AS id, sum(p.w * {freq} * {c} / ({freq} + {k1} * ({1 - b} + "
            f"{b} * d.dl / ?))) AS s FROM p JOIN d ON d.rid = p.rid "
            "GROUP BY p.id ORDER BY s * max(p.wt) DESC, p.id LIMIT ?",
            (*(x for w in words for x in (table_idf[w], own[w], *wparams, quote(w), *params)),
             table_len, table_len, own_len, limit))
        return [(rid, settled(float(s))) for rid, s in rows]

    @staticmethod
    def _one_query(tx: Any, table: str, words: list[str], where: str, params: Sequence[Any],
                   limit: int, weight: tuple[str, Sequence[Any]] | None
                   ) -> list[tuple[str, float]]:
        """SQLite's ``bm25`` over all the words at once (the caller's statistics are the
        table's: see :meth:`search`); CROSS JOIN as there. ``bm25`` is lower for a better
        match (negative), so the weighted order is ascending."""
        fts = f"{table}_fts"
        wsql, wparams = weight if weight is not None else ("1.0", ())
        rows = tx.tuples(
            f"SELECT r.id AS id, bm25({fts}, 1.0, 0.5) AS s FROM {fts} CROSS JOIN "
            f"{table} r ON r.rowid = {fts}.rowid WHERE {fts} MATCH ? AND {where} "
            f"ORDER BY s * {wsql}, r.id LIMIT ?",
            (" OR ".join(quote(w) for w in words), *params, *wparams, limit))
        return [(rid, settled(-float(s))) for rid, s in rows]

    def _watch(self, tx: Any, table: str, top: int, total: int) -> None:
        """Forget the table's remembered counts when rows were deleted or written again in
        place since the last search (a count is only ever topped up with the rows above the
        rowid it was taken at): the highest rowid went down, the row that held it is another
        (a forget of the newest rows, then a write on the rowids SQLite gives again), the
        index lost rows below it, or an entry was written again (``fts_rewrites``, counted
        by :meth:`~memstrata.store.sqlite.SQLiteDatabase.index_text`: a new turn rewrites
        its neighbours' thread context). So a remembered count never lags the caller's rows,
        and a recount, whoever's write prompts it, moves no score (``top``: the highest
        rowid; ``total``: the index's rows). Read only when the file changed."""
        state = tuple(tx.changes())
        seen = self._seen.get(table)
        if seen is not None and seen[0] == state:
            return

        def id_at(rowid: int) -> str | None:
            row = tx.one(f"SELECT id FROM {table} WHERE rowid = ?", (rowid,))
            return str(row["id"]) if row else None
        mark = tx.one("SELECT n FROM fts_rewrites WHERE tbl = ?", (table,))
        rewritten = int(mark["n"]) if mark else 0
        if seen is not None:
            _, top0, id0, total0, rewritten0 = seen
            above = int(tx.one(f"SELECT count(*) AS n FROM {table} WHERE rowid > ?",
                               (top0,))["n"])
            if top < top0 or id_at(top0) != id0 or total - total0 != above:
                self._counts.drop(table)
            elif rewritten != rewritten0:  # the rows are the same: their number holds
                self._counts.drop(table, keep=_row_count)
        self._seen[table] = (state, top, id_at(top), total, rewritten)

    @staticmethod
    def _table_stats(tx: Any, table: str) -> tuple[int, float]:
        """What FTS5's ``bm25`` takes from the whole full-text table, from the index's
        averages record (read now): its row count and mean entry length in tokens."""
        record = tx.one(f"SELECT block FROM {table}_fts_data WHERE id = 1")
        counts = _varints(bytes(record["block"])) if record and record["block"] else []
        total = counts[0] if counts else 0
        return total, max(sum(counts[1:]) / total if total else 1.0, 1e-9)

    def _selective_words(self, tx: Any, table: str, query: str, drop: Sequence[str],
                         where: str, params: Sequence[Any], all_common: AllCommon,
                         size: int) -> tuple[list[str], Callable[[str], int] | None]:
        """The words to match, the caller's count of each (remembered; None when the index
        or the caller's rows are fewer than :data:`LARGE_INDEX_ROWS`: then every count is
        exact, see :func:`_key`) and the index size. In a large index, terms that occur in
        ``COMMON_TERM_DOCS`` or more of the rows *the caller's filter admits* are left out
        (BM25 gives them almost no weight, yet scoring their postings dominates the query
        time), like stopwords learnt from the caller's own data: another user's or
        tenant's rows never decide what this caller's query keeps
        (:func:`memstrata.store.lexical.selective`). The count over the index alone (no
        filter, 0.6 ms at 100k) bounds the caller's; the caller's own count (a join per
        posting, 10-17 ms) runs only for a word the bound cannot clear, or whose weight is
        wanted; both are remembered (:class:`~memstrata.store.lexical.TermCounts`)."""
        dropped = set(drop)
        words = [w for w in terms(query) if w not in dropped][:64]
        if size == 0 or not words:
            return [], None  # an empty index matches nothing (no facts yet, say)
        fts = f"{table}_fts"
        # each count reads the rows above a rowid (0: all): a remembered count is brought
        # up to date with the rows written since (TermCounts)
        rows_of = _rows_above(tx, table, where, params, LARGE_INDEX_ROWS)
        if size < LARGE_INDEX_ROWS or self._counts.counter(
                (*filter_key(table, where, params), "caller"), size, lambda _: rows_of("", 0),
                more=rows_of, cap=LARGE_INDEX_ROWS)("") < LARGE_INDEX_ROWS:
            # a small index, or a caller with few rows in a large one (its own count
            # decides, never the others' rows): every word, exact counts
            return words, None

        def caller_matches(word: str, since: int = 0) -> int:
            return int(tx.one(
                f"SELECT count(*) AS n FROM (SELECT 1 FROM {fts} CROSS JOIN {table} r ON "
                f"r.rowid = {fts}.rowid WHERE {fts} MATCH ? AND {fts}.rowid > ? AND {where} "
                "LIMIT ?)", (quote(word), since, *params, COMMON_TERM_DOCS))["n"])

        def index_matches(word: str, since: int = 0) -> int:
            return int(tx.one(f"SELECT count(*) AS n FROM (SELECT 1 FROM {fts} WHERE {fts} "
                              f"MATCH ? AND rowid > ? LIMIT ?)",
                              (quote(word), since, COMMON_TERM_DOCS))["n"])

        scoped = self._counts.counter(filter_key(table, where, params), size, caller_matches,
                                      more=caller_matches, cap=COMMON_TERM_DOCS)
        bound = self._counts.counter((table, "index"), size, index_matches,
                                     more=index_matches, cap=COMMON_TERM_DOCS)
        return (selective(words, COMMON_TERM_DOCS, scoped, all_common=all_common,
                          bound=bound), scoped)

    def _caller_rows(self, tx: Any, table: str, where: str, params: Sequence[Any],
                     key: tuple[Any, ...], size: int) -> int:
        """``N``, the rows the caller's filter admits: counted up to :data:`EXACT_ROWS` once
        per filter (exactly, until the next write to the file, for a small index or
        caller: ``key``, :func:`_key`), remembered and topped up with the rows written
        since."""
        rows_of = _rows_above(tx, table, where, params, EXACT_ROWS)
        return self._counts.counter((*key, "rows"), size, lambda _: rows_of("", 0),
                                    more=rows_of, cap=EXACT_ROWS)("")

    def _caller_counts(self, tx: Any, table: str, words: list[str],
                       counted: Callable[[str], int] | None, where: str,
                       params: Sequence[Any], key: tuple[Any, ...],
                       size: int) -> dict[str, int]:
        """How many of the rows the caller's filter admits hold each word. With no
        ``counted`` (a small index or caller) every count is exact, remembered until the
        next write to the file (``key``, :func:`_key`); else the caller's remembered ones,
        topped up with the rows written since (capped at ``COMMON_TERM_DOCS``, which every
        word a large index keeps stays below unless all of a query's words are that
        common)."""
        fts = f"{table}_fts"
        if counted is None:
            counted = self._counts.counter((*key, "words"), size, lambda w: int(tx.one(
                f"SELECT count(*) AS n FROM {fts} CROSS JOIN {table} r ON r.rowid = "
                f"{fts}.rowid WHERE {fts} MATCH ? AND {where}", (quote(w), *params))["n"]))
        return {w: counted(w) for w in words}

    def _caller_length(self, tx: Any, table: str, where: str, params: Sequence[Any],
                       key: tuple[Any, ...], size: int, rows: int,
                       before: int | None) -> float:
        """The mean length in tokens of the entries of the rows the filter admits: their
        total over as many of them as :meth:`_caller_rows` counted (all of them, or
        :data:`EXACT_ROWS`), remembered like its counts and topped up with the rows its count
        took since (``before``: that count before)."""
        def tokens_of(since: int, take: int) -> int:
            return int(tx.one(
                f"SELECT coalesce(sum(memstrata_doc_len(z.sz)), 0) AS n FROM "
                f"({_admitted(table, where, since)} LIMIT ?) c JOIN {table}_fts_docsize z "
                "ON z.id = c.rid", (since, *params, take))["n"])

        tokens = self._counts.counter(
            (*key, "tokens"), size, lambda _: tokens_of(0, EXACT_ROWS),
            more=lambda _, since: tokens_of(since, max(EXACT_ROWS - (before or 0), 0)))("")
        return max(tokens / rows if rows else 1.0, 1e-9)

def _rows_above(tx: Any, table: str, where: str, params: Sequence[Any],
                cap: int) -> Callable[[str, int], int]:
    """The count, up to ``cap``, of the rows the filter admits above a rowid (0: all), as
    :class:`TermCounts` takes it (its word argument unused)."""
    def count(_: str, since: int) -> int:
        return int(tx.one(f"SELECT count(*) AS n FROM ({_admitted(table, where, since)} "
                          "LIMIT ?)", (since, *params, cap))["n"])
    return count


def _admitted(table: str, where: str, since: int) -> str:
    """The rowids (``rid``) of the rows the filter admits above rowid ``since`` (its
    parameter, then the filter's). Above a rowid (a top-up: the rows written since a count)
    the rows are read by rowid range: the planner would walk the tenant's index and test
    every row of it (48.7 ms against 0.0 ms for 10 new rows at 1M episodes). From the start
    it keeps the plan it chooses, which stops at the ``LIMIT`` (an ORDER BY rowid made it
    sort all the tenant's rows: 215 ms for 50k of 1M, against 20-38 ms)."""
    scan = " NOT INDEXED" if since else ""
    return f"SELECT r.rowid AS rid FROM {table} r{scan} WHERE r.rowid > ? AND {where}"


def _key(tx: Any, table: str, where: str, params: Sequence[Any],
         small: bool) -> tuple[Any, ...]:
    """Under what a caller's counts are remembered. For a small index or a caller with few
    rows: the filter with its dates to the second (a window, the expiry's "now") and the
    file's state (every write, by any connection, changes it:
    :meth:`~memstrata.store.sqlite._SQLiteTx.changes`), so every count is exact. Else the
    filter without its dates (the counts are bounded hints, refreshed as the index grows:
    :class:`TermCounts`)."""
    base = filter_key(table, where, params)
    if not small:
        return base
    dates = tuple(int(p.timestamp()) for p in params if isinstance(p, datetime))
    return (*base, *dates, *tx.changes())

def _row_count(key: tuple[Any, ...]) -> bool:
    """Whether a remembered count is of rows (``N``, a caller's rows), not of words or
    tokens: an entry written again in place changes no row's presence."""
    return key[-1] == "" and key[-2] in ("rows", "caller")


__all__ = ["TextSearch", "doc_len", "quote"]
