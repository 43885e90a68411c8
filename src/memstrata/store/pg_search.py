"""Lexical search on PostgreSQL: full-text matches ranked among the rows the caller's filter
admits alone (the SQLite twin is :mod:`memstrata.store.sqlite_search`).

Contract (used by :class:`memstrata.store.postgres.PostgresDatabase`):

- :meth:`PgTextSearch.search` returns ``(id, score)`` for the rows of ``episodes`` or
  ``facts`` that match the query's words and the caller's filter, best first: ``ts_rank``
  (the context column counts half as much as the body) scaled by the inverse document
  frequency of the words each row holds, counted among the rows the filter admits; another
  user's or tenant's rows move no score. Matching goes through the SECURITY DEFINER
  functions of :mod:`memstrata.store.pg_schema` (the GIN index); user text is only ever a
  parameter.
- Where the caller may read :data:`~memstrata.store.lexical.LARGE_INDEX_ROWS` rows or more
  (its own count decides, as on SQLite), the query drops its very common words by the
  caller's own counts (:func:`memstrata.store.lexical.selective`). A process remembers
  those counts (:class:`~memstrata.store.lexical.TermCounts`) until the index grows by a
  tenth; a count of 0 is asked again each time, so a word written later is found. Unlike
  SQLite's, they are not topped up with the rows written since (there is no rowid to count
  from): meanwhile a long-lived process weighs words apart from a fresh one, and the
  recount that a tenth of growth prompts, whoever's rows they are, moves its scores.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from .lexical import (
    COMMON_TERM_DOCS,
    IDF_ROWS,
    LARGE_INDEX_ROWS,
    AllCommon,
    TermCounts,
    bm25_idf,
    cjk_spaced,
    filter_key,
    fold,
    selective,
    settled,
    terms,
)
from .pg_tx import _FTS_COPIED, TS_CONFIG

#: ... and B counts half as much as A in the rank (SQLite: bm25 column weights 1.0, 0.5).
_RANK_WEIGHTS = "'{0.1, 0.2, 0.5, 1.0}'"
#: The SECURITY DEFINER functions that match with the GIN index (see pg_schema).
_MATCHES = {"episodes": "memstrata_episode_matches", "facts": "memstrata_fact_matches"}
#: The matching rows with their filter columns (m009): tables whose filter the full-text
#: table carries.
_MATCH_ROWS = {"episodes": "memstrata_episode_match_rows"}
_FILTER_COLUMN_RE = re.compile(r"\br\.([a-z_]+)")
#: How many of the tenant's matches of a word its scoped count reads first, in
#: COMMON_TERM_DOCS (see _rare_words).
_COUNT_FIRST = 2


def _tsquery(word: str) -> tuple[str, tuple[str, ...]]:
    """The tsquery of one query word and its parameters: the word, or the word or its form
    without accents where they differ (rows are indexed without them,
    :func:`~memstrata.store.lexical.plain_words`; rows written before that hold them)."""
    one = f"plainto_tsquery('{TS_CONFIG}', ?)"
    bare = fold(word)
    return (f"({one} || {one})", (word, bare)) if bare != word else (one, (word,))


class PgTextSearch:
    """One database's lexical search, with the counts it remembers."""

    def __init__(self) -> None:
        self._term_counts = TermCounts()

    def search(self, tx: Any, table: str, query: str, where: str,
               params: Sequence[Any], limit: int, drop: Sequence[str] = (),
               all_common: AllCommon = "keep",
               among: tuple[str, Sequence[Any]] | None = None,
               weight: tuple[str, Sequence[Any]] | None = None) -> list[tuple[str, float]]:
        """``ts_rank`` of the words' matches among the rows the caller's filter admits
        (chosen and ordered by it times ``weight`` where one is given:
        :meth:`~memstrata.store.base.Database.text_search`),
        scaled by each word's weight among the rows ``among`` admits (the rows the caller
        may read, whatever their time or status; default the filter: :meth:`_idf`); very
        common words, by the same counts, left out in a large index
        (:meth:`_rare_words`)."""
        if table not in ("episodes", "facts"):
            raise ValueError(table)
        dropped = set(drop)
        # a CJK word is its characters, as the index holds them (plain_words)
        words = [cjk_spaced(w) for w in terms(query) if w not in dropped][:64]
        if not words:
            return []
        wsql, wparams = weight if weight is not None else ("1.0", ())
        if set(_FILTER_COLUMN_RE.findall(f"{where} {wsql}")) <= {"tenant", "id",
                                                               *_FTS_COPIED[table]}:
            # filter and rank on the full-text table alone (it carries the filter columns)
            source, fts = f"{table}_fts r", "r"
        else:
            source = f"{table}_fts f JOIN {table} r ON r.tenant = f.tenant AND r.id = f.id"
            fts = "f"
        sw, sp = among if among is not None else (where, params)  # the statistics' rows
        counted: Callable[[str], int] | None = None
        # large by the caller's own rows, as on SQLite: the planner's estimate of the table
        # (every tenant's rows, -1 before ANALYZE) let another tenant's rows decide
        own = int(tx.one(f"SELECT count(*) AS n FROM (SELECT 1 FROM {source} WHERE {sw} "
                         "LIMIT ?) c", (*sp, max(LARGE_INDEX_ROWS, 0)))["n"])
        size = max(self._size(tx, table), own)
        if own >= LARGE_INDEX_ROWS:
            words, counted = self._rare_words(tx, table, words, source, fts, sw, sp, size,
                                              all_common)
            if not words:
                return []
        idf = self._idf(tx, table, words, counted, source, fts, sw, sp, size)
        # one plainto_tsquery per word, OR-ed: a compound like "billing-api" stays a phrase
        # of its parts, and user text is only ever a parameter
        each = [_tsquery(w) for w in words]
        tsq = " || ".join(sql for sql, _ in each)
        args = [a for _, word_args in each for a in word_args]
        # ts_rank weighs a word found in every row like a rare one: the rank is scaled by
        # the inverse document frequency of the words each row holds
        held = " + ".join(f"? * ({fts}.tsv @@ {sql})::int" for sql, _ in each)
        rows = tx.all(
            f"SELECT id, s FROM (SELECT r.id AS id, ts_rank({_RANK_WEIGHTS}, {fts}.tsv, {tsq}, "
            f"1) * ({held}) AS s, {wsql} AS wt FROM {source} WHERE {fts}.id IN (SELECT "
            f"{_MATCHES[table]}({tsq}, NULL)) AND {where}) m ORDER BY s * wt DESC, id LIMIT ?",
            (*args, *(x for w, (_, a) in zip(words, each, strict=True) for x in (idf[w], *a)),
             *wparams, *args, *params, limit))
        return [(r["id"], settled(float(r["s"]))) for r in rows]

    def _idf(self, tx: Any, table: str, words: list[str], counted: Callable[[str], int] | None,
             source: str, fts: str, where: str, params: Sequence[Any],
             size: int) -> dict[str, float]:
        """Each word's inverse document frequency among the rows the caller's filter admits
        (:func:`~memstrata.store.lexical.bm25_idf`).
        Below :data:`LARGE_INDEX_ROWS` rows both counts are taken for each query (a few
        hundred rows: cheap); above, the word counts are those that chose the words
        (:meth:`_rare_words`, capped at ``COMMON_TERM_DOCS``) and ``N`` is counted once per
        filter up to :data:`IDF_ROWS`, both remembered."""
        if counted is None:  # one pass over the caller's few rows counts them all
            each = [_tsquery(w) for w in words]
            holds = ", ".join(f"count(*) FILTER (WHERE c.tsv @@ {sql}) AS n{i}"
                              for i, (sql, _) in enumerate(each))
            row = tx.one(f"SELECT count(*) AS n, {holds} FROM (SELECT {fts}.tsv FROM {source} "
                         f"WHERE {where} LIMIT ?) c",
                         (*(a for _, args in each for a in args), *params, LARGE_INDEX_ROWS))
            total = int(row["n"])
            n = {w: int(row[f"n{i}"]) for i, w in enumerate(words)}
        else:
            total = self._term_counts.counter(
                (*filter_key(table, where, params), "rows"), size, lambda _: int(tx.one(
                    f"SELECT count(*) AS n FROM (SELECT 1 FROM {source} WHERE {where} "
                    "LIMIT ?) c", (*params, IDF_ROWS))["n"]))("")
            n = {w: counted(w) for w in words}
        return {w: bm25_idf(total, n[w]) for w in words}

    @staticmethod
    def _size(tx: Any, table: str) -> int:
        """The full-text table's rows (planner estimate, all tenants; -1 when never
        analysed)."""
        size = tx.raw_one("SELECT reltuples AS n FROM pg_class WHERE oid = %s::regclass",
                          (f"{table}_fts",))
        return int(float(size["n"])) if size is not None else -1

    def _rare_words(self, tx: Any, table: str, words: list[str], source: str, fts: str,
                    where: str, params: Sequence[Any], size: int,
                    all_common: AllCommon) -> tuple[list[str], Callable[[str], int]]:
        """Leave out words found in ``COMMON_TERM_DOCS`` or more of the rows the caller's
        filter admits, as the SQLite backend does: they barely move a rank, yet ranking
        their matches dominates the query time. Another user's rows never decide what this
        caller's query keeps (:func:`memstrata.store.lexical.selective`); counts are
        remembered (per tenant, per filter).

        Where the full-text table carries the filter's columns, one statement per word
        reads the tenant's first matches once and counts both (its share of the first
        pass of a fresh process: 1 GIN scan a word instead of 2-3); otherwise the
        tenant's matches bound the caller's count, which joins the records. Returns the
        words kept and the caller's count of a word (remembered: asked again, free)."""
        first = _COUNT_FIRST * COMMON_TERM_DOCS
        # the filter applies to the matches as they come where the full-text table carries
        # its columns (m009): no lookup of each
        carried = table in _MATCH_ROWS and fts == "r"

        def rows(tsq: str) -> str:
            return f"{_MATCH_ROWS[table]}({tsq}, ?) r"

        def count(word: str, cap: int | None) -> int:
            # the caller's matching rows, at most COMMON_TERM_DOCS, among the tenant's
            # first ``cap`` matches (None: all of them)
            tsq, args = _tsquery(word)
            matches = f"{rows(tsq)} WHERE" if carried else \
                f"{source} WHERE {fts}.id IN (SELECT {_MATCHES[table]}({tsq}, ?)) AND"
            return int(tx.one(
                f"SELECT count(*) AS n FROM (SELECT 1 FROM {matches} {where} LIMIT ?) c",
                (*args, cap, *params, COMMON_TERM_DOCS))["n"])

        key = filter_key(table, where, params)
        if carried:
            def counted_once(word: str) -> int:
                # a PL/pgSQL function is never inlined: it returns all of its ``first``
                # matches whatever the outer query does, so count them all
                tsq, args = _tsquery(word)
                row = tx.one(f"SELECT count(*) AS seen, count(*) FILTER (WHERE {where}) AS n "
                             f"FROM {rows(tsq)}", (*params, *args, first))
                n, seen = int(row["n"]), int(row["seen"])
                if n >= COMMON_TERM_DOCS or seen < first:
                    return min(n, COMMON_TERM_DOCS)  # common, or every match was seen
                return count(word, None)

            once = self._term_counts.counter(key, size, counted_once)
            return selective(words, COMMON_TERM_DOCS, once, all_common=all_common), once

        def joined_count(word: str) -> int:
            # first tried on the tenant's first matches (enough when the caller's filter
            # admits most of the tenant's rows)
            n = count(word, first)
            return n if n >= COMMON_TERM_DOCS else count(word, None)

        def tenant_count(word: str) -> int:
            # the tenant's matches (the function filters by the transaction's tenant)
            tsq, args = _tsquery(word)
            return int(tx.one(f"SELECT count(*) AS n FROM {_MATCHES[table]}({tsq}, ?) c",
                              (*args, COMMON_TERM_DOCS))["n"])

        scoped = self._term_counts.counter(key, size, joined_count)
        bound = self._term_counts.counter((table, "tenant", tx.tenant), size, tenant_count)
        return selective(words, COMMON_TERM_DOCS, scoped, all_common=all_common,
                         bound=bound), scoped


__all__ = ["PgTextSearch"]
