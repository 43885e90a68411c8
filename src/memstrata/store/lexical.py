"""Query text to lexical-search syntax, shared by every backend.

A natural-language query becomes a disjunction of its content words (stop
words and question words removed), so a question like "what did Alice say
about the deploy?" matches records that mention alice or deploy. Terms are
quoted so punctuation and FTS operators in user text can never change the
query's meaning. In a large index, :func:`selective` is the one rule for which
words a query keeps (the backends count, within the caller's filter).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal

#: Words no query searches by: PostgreSQL's ``english`` stop list (its index leaves them
#: out, so both engines drop them) and a few more.
STOPWORDS = frozenset({
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any",
    "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below",
    "between", "both", "but", "by", "can", "could", "did", "didn't", "do", "does",
    "doesn't", "doing", "don't", "down", "during", "each", "few", "for", "from", "further",
    "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him",
    "himself", "his", "how", "i", "if", "in", "into", "is", "isn't", "it", "it's", "its",
    "itself", "just", "let's", "me", "more", "most", "my", "myself", "no", "nor", "not",
    "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves",
    "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that",
    "that's", "the", "their", "theirs", "them", "themselves", "then", "there", "these",
    "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was",
    "wasn't", "we", "were", "weren't", "what", "when", "where", "which", "while", "who",
    "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves", "ever", "also", "would've", "could've", "should've", "yes", "s", "t", "d",
    "ll", "m", "o", "re", "ve", "y", "now", "don",
})

#: A query word found in this many of the rows the caller's filter admits is left out of a
#: large index's query (:func:`selective`): scoring grows with a word's postings (a join to
#: the row for the filter, then BM25; measured on SQLite at 100k rows, loaded machine,
#: 12.7 ms for a word in 612 rows, 32 ms in 2,087, 212 ms in 24,805).
COMMON_TERM_DOCS = 1_000
#: From this many index rows on, the backends apply that rule: a word can be that common
#: only in an index at least this large, and below it the counts would cost more than they
#: save (measured at 20k episodes, quiet machine: the recall of the synthetic queries 26 ms
#: with the threshold at 50k, 17 ms at 2k).
LARGE_INDEX_ROWS = 2 * COMMON_TERM_DOCS
#: Above :data:`LARGE_INDEX_ROWS`, the number of a caller's rows that a word's inverse
#: document frequency is taken against is counted up to this many on PostgreSQL (once per
#: filter and process): a bounded count, while every word a large index keeps stays below
#: ``COMMON_TERM_DOCS``, so the weights keep their order (at 100k and 1M episodes on
#: PostgreSQL the first query after open stayed at 0.44-0.86 s, see dbb8038).
IDF_ROWS = 10 * COMMON_TERM_DOCS
#: On SQLite a caller's ``N`` and the entry lengths BM25 takes are counted up to this many
#: (once per process and filter, then topped up with the rows written since): up to it its
#: statistics are exact, so a caller alone in its index is scored with one ``bm25`` query
#: (see :mod:`memstrata.store.sqlite_search`). Measured warm: a caller's 20k rows counted
#: in 3.5 ms and their lengths read in 6-8 ms; at 1M episodes, 9-11 ms and 20-38 ms for
#: the first 50k (cold: 91 ms to count).
EXACT_ROWS = 50 * COMMON_TERM_DOCS

#: What :func:`selective` does when every matching word of a query is that common.
AllCommon = Literal["keep", "drop"]

#: The combining marks of Latin, Greek and Cyrillic letters, as ranges of a character class.
COMBINING_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
#: What a word is made of (after its first character, a letter or digit): the one rule for
#: the query's words (:func:`terms`) and for the index's (:func:`plain_words`). Combining
#: marks belong to their word: "İ" lower-cases to "i" and a combining dot, and text typed
#: decomposed (NFD) carries its accents as marks, where a word must not end.
_WORD_CHARS = rf"\w'\-{COMBINING_MARKS}"
_WORD_RE = re.compile(rf"[\w][{_WORD_CHARS}]*", re.UNICODE)


def bm25_idf(rows: int, holding: int) -> float:
    """BM25's inverse document frequency of a word found in ``holding`` of ``rows`` rows,
    never negative: ``log(1 + (N - n + 0.5) / (n + 0.5))`` (PostgreSQL's ranking, the
    handoffs')."""
    return math.log(1 + (max(rows, holding) - holding + 0.5) / (holding + 0.5))


def settled(score: float) -> float:
    """A lexical score to 12 significant digits: what two ways of computing it give alike
    (SQLite's one query and its word-by-word parts differ in the last bits, by the whole
    table's statistics), so equal scores tie and order by id, whoever else holds rows."""
    return float(f"{score:.12g}")


def fts5_idf(rows: int, holding: int) -> float:
    """The weight SQLite's FTS5 ``bm25`` gives a word found in ``holding`` of ``rows`` rows:
    ``log((N - n + 0.5) / (n + 0.5))``, at least 1e-6 (a word in half the rows or more
    weighs next to nothing)."""
    idf = math.log((max(rows, holding) - holding + 0.5) / (holding + 0.5))
    return idf if idf > 0.0 else 1e-6


def _folds() -> dict[int, str]:
    """The Latin letters that are an ASCII letter with one accent (é, ñ, ç, İ; U+00C0 to
    U+024F and U+1E00 to U+1EFF), each to its letter: the letters SQLite's ``unicode61``
    tokenizer folds (``remove_diacritics 1``). A letter of two accents (Vietnamese ệ),
    another script's accents (Greek ά), Japanese voicing marks (パ, バ) and compatibility
    forms (full-width ｒ, the ligature ﬁ) are kept, as SQLite keeps them. Greek's final
    sigma is its sigma, as SQLite's case folding makes it."""
    out: dict[int, str] = {}
    for code in (*range(0xC0, 0x250), *range(0x1E00, 0x1F00)):
        parts = unicodedata.normalize("NFD", chr(code))
        if (len(parts) == 2 and parts[0].isascii() and parts[0].isalpha()
                and "\u0300" <= parts[1] <= "\u036f"):
            out[code] = parts[0]
    out[ord("ς")] = "σ"  # SQLite folds Greek's final sigma too ("ΟΔΟΣ" is "οδοσ")
    return out


_FOLDS = _folds()
#: Accents left on their own once composed (no letter holds them: "i" and a dot above, as
#: "İ" lower-cases), which SQLite's tokenizer drops.
_LONE_ACCENTS_RE = re.compile("[\u0300-\u036f]")


def fold(text: str) -> str:
    """``text`` composed (NFC) and without the accents SQLite's tokenizer drops ("café" ->
    "cafe", "naïve" -> "naive"; see :func:`_folds`; and an accent no letter holds):
    for comparing words in Python the way the index matches them, and for PostgreSQL's
    index (:func:`plain_words`)."""
    if text.isascii():
        return text
    return _LONE_ACCENTS_RE.sub("", unicodedata.normalize("NFC", text).translate(_FOLDS))


def terms(text: str, *, keep_stopwords: bool = False, evidence: bool = False) -> list[str]:
    """Lowercase content words of ``text``, in order, without duplicates. A run of CJK
    characters longer than two is taken as its overlapping pairs (:func:`cjk_pairs`; with
    ``evidence``, only the pairs that may stand for a word of the text: see there). A word
    is a stopword as it is matched, accents folded ("à" as "a")."""
    seen: dict[str, None] = {}
    ascii_only = text.isascii()
    if not ascii_only:  # one form for the accents of a word, as typed either way
        text = unicodedata.normalize("NFC", text)
    for raw in _WORD_RE.findall(text.lower()):
        word = raw.strip("'-").replace("'s", "")
        if not word or (not keep_stopwords and (word in STOPWORDS or (
                not word.isascii() and fold(word) in STOPWORDS))):
            continue
        if ascii_only or not has_cjk(word):
            seen.setdefault(word, None)
            continue
        stop = frozenset() if keep_stopwords else CJK_STOP_WORDS
        for part in cjk_pairs(word, stop=stop, evidence=evidence):
            if keep_stopwords or part not in STOPWORDS:
                seen.setdefault(part, None)
    return list(seen)


#: CJK function words (question words, pronouns, demonstratives, auxiliaries and endings of
#: Chinese, Japanese and Korean), as pairs of characters or single ones: what English's
#: stopwords are to :func:`terms`. A question is mostly made of them ("为什么…", "…ですか"),
#: and as words of the query they would rank texts that share only them first. Only pairs
#: that are rarely part of another word are listed (not 一下, which 周一下午 holds).
_CJK_STOP_TEXT = """
什么 为什 怎么 怎样 哪里 哪个 哪些 时候 我们 你们 他们 她们 它们 这个 那个 这些 那些 这样
那样 这里 那里 请问 为何 如何 什麼 為什 怎麼 怎樣 哪裡 哪個 時候 我們 你們 他們 她們
這個 那個 這些 那些 這樣 那樣 這裡 那裡 請問 為何 吗 呢 吧 嗎
です ます まし ませ でし した して この その あの どの これ それ あれ どこ なぜ どう いつ
なに だれ はい ので のは のを には では とは けど
습니 니다 합니 입니 세요 어요 해요 나요 언제 어디 무엇 누구 왜 뭐
"""
CJK_STOP_WORDS = frozenset(_CJK_STOP_TEXT.split())
#: Particles that join words (的, 呢, が, は...): a pair holding one mostly straddles two
#: words, so it is no evidence that a text holds a word of the query (:func:`cjk_pairs`).
_CJK_PARTICLES = frozenset("的呢吗吧啊嗎呀嘛がをはのにでへ")


def cjk_pairs(word: str, stop: frozenset[str] = frozenset(), *,
              evidence: bool = False) -> list[str]:
    """The words of a token that holds CJK characters: each run of them longer than two as
    its overlapping pairs ("部署失败" -> 部署, 署失, 失败), a shorter run as it is, and the
    other characters' pieces as words. Chinese and Japanese put no spaces between words, so
    a question typed as one run would be one phrase that no text holds whole; its pairs
    find the texts that hold its words, the way CJK search engines index text (a pair is a
    phrase of two adjacent characters in the index: :func:`cjk_spaced`). The pairs and
    short runs in ``stop`` (function words: :data:`CJK_STOP_WORDS`) are left out, and a
    pair between two of them ("什么时候" -> not 么时).

    With ``evidence``, the pairs a text's share of the query is counted over (the ranker's
    word check): also without the pairs that share a character with a stop pair or hold a
    particle, which mostly straddle two words ("为什么我们昨天晚上的部署" -> 昨天, 天晚, 晚上,
    部署; not 么我, 们昨, 上的, 的部). They are still searched: 目的 and 酒吧 are words."""
    out: list[str] = []
    for run in _CJK_RUN_RE.findall(word):
        if not _CJK_RE.match(run):
            piece = run.strip("'-_")
            if piece:
                out.append(piece)
        elif len(run) <= 2:
            if run not in stop:
                out.append(run)
        else:
            pairs = [run[i:i + 2] for i in range(len(run) - 1)]
            taken = {i + j for i, pair in enumerate(pairs) if pair in stop for j in (0, 1)}
            out.extend(pair for i, pair in enumerate(pairs) if pair not in stop and not (
                (i in taken and i + 1 in taken) or (evidence and (
                    i in taken or i + 1 in taken or pair[0] in _CJK_PARTICLES
                    or pair[1] in _CJK_PARTICLES))))
    return out


#: What joins words into one token for PostgreSQL's parser but not for a query's words: a
#: path, a URL, a file name, a dotted key or a version ("src/handlers/payment.py",
#: "settings.yaml", "3.11") is one lexeme to ``to_tsvector``, where :func:`terms` (and
#: SQLite's tokenizer) see its words.
_JOINERS_RE = re.compile(rf"[^\s{_WORD_CHARS}]+", re.UNICODE)


def plain_words(text: str) -> str:
    """``text`` as words for a full-text parser that keeps paths, URLs, file names and
    versions whole (PostgreSQL's): every run of other characters between words becomes a
    space, so an index holds the words a query is split into (:func:`terms`), in
    :func:`index_form`, without their accents (:func:`fold`: "café" is held as "cafe", as
    SQLite's tokenizer holds it; a query word is matched in both forms)."""
    return index_form(fold(_JOINERS_RE.sub(" ", text)))


def index_form(text: str) -> str:
    """``text`` as an index holds it: composed (NFC, as a query's words are: text typed
    decomposed carries a letter's accents as marks SQLite strips one by one, where the
    query's composed letter keeps them) and each CJK character a word of its own
    (:func:`cjk_spaced`)."""
    if text.isascii():
        return text
    return cjk_spaced(unicodedata.normalize("NFC", text))


#: Chinese, Japanese and Korean characters of the basic plane (kana, CJK ideographs,
#: Hangul syllables, half-width katakana), as ranges of a character class: written without
#: spaces between words, so a tokenizer that splits at spaces and punctuation (SQLite's
#: ``unicode61``, PostgreSQL's parser) would make a whole clause one token, found by no
#: word of it.
CJK_CHARS = ("\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
             "\uf900-\ufaff\uff66-\uff9f")
_CJK_RE = re.compile(f"([{CJK_CHARS}\U00020000-\U0002fa1f])")
_CJK_RUN_RE = re.compile(f"[{CJK_CHARS}\U00020000-\U0002fa1f]+|[^{CJK_CHARS}"
                         "\U00020000-\U0002fa1f]+")


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a Chinese, Japanese or Korean character."""
    return not text.isascii() and _CJK_RE.search(text) is not None


def cjk_spaced(text: str) -> str:
    """``text`` with each CJK character set apart by spaces: the index holds one token per
    character and a query word of them is a phrase of adjacent characters, so "缓存" finds
    "服务器部署失败了，因为缓存过期" (Latin text is unchanged)."""
    return _CJK_RE.sub(r" \1 ", text) if has_cjk(text) else text


def selective(words: Sequence[str], common: int, count: Callable[[str], int], *,
              bound: Callable[[str], int] | None = None,
              all_common: AllCommon = "keep") -> list[str]:
    """The words a query over a large index keeps, given ``count(word)``: how many of the
    rows *the caller's filter admits* contain it (capped at ``common``).

    A word in ``common`` or more of the caller's rows is left out while a rarer word that
    matches remains (it barely moves a rank, yet scoring its postings dominates the query
    time); a word in none of the caller's rows is left out then too. When every word that
    matches is that common, ``all_common="keep"`` keeps them all, so a lexical-only query
    never loses all its words to pruning; ``"drop"`` returns none, for a caller that ranks
    by vectors as well (the lexical index cannot tell such rows apart, and scoring them
    costs hundreds of milliseconds at 100k rows).

    ``bound(word)``, when given, is a cheap upper bound of ``count(word)`` (the rows of
    every caller): a word it puts below ``common`` is common for nobody, so the caller's own
    count is asked only when the decision needs it. No other caller's rows decide what this
    caller's query keeps: a bound only ever spares a count.
    """
    unique = list(dict.fromkeys(words))
    upper = {w: bound(w) for w in unique} if bound is not None else {}
    counts: dict[str, int] = {}

    def counted(w: str) -> int:
        if w not in counts:
            counts[w] = count(w)
        return counts[w]

    frequent = [w for w in unique if upper.get(w, common) >= common and counted(w) >= common]
    if not frequent:  # nothing to prune: keep what can match (cheap to score)
        return [w for w in words if (upper[w] > 0 if w in upper else counted(w) > 0)]
    rare = [w for w in unique if w not in frequent and counted(w) > 0]
    if rare:
        return [w for w in words if w in rare]
    return [w for w in words if w in frequent] if all_common == "keep" else []


class TermCounts:
    """How many of a caller's rows hold a word, remembered per process for one filter (it
    decides which words a query scores, and their weights). An entry holds while the index
    has grown by less than a tenth since it was counted; where the engine can count a
    word's rows written since (``more``: SQLite's rowids), an entry is brought up to date
    with them on every use, so a long-lived process weighs a word as a new one does. A
    count of 0 is never remembered: a word first written after a search that found none
    would be left out of every later query (:func:`selective` drops a word no row holds)."""

    def __init__(self, size: int = 8192) -> None:
        self._size = size
        self._items: dict[tuple[Any, ...], tuple[int, int, int]] = {}

    def counter(self, key: tuple[Any, ...], top: int, count: Callable[[str], int], *,
                more: Callable[[str, int], int] | None = None,
                cap: int | None = None) -> Callable[[str], int]:
        """``count`` remembered under ``key`` (the table and the filter) at index size
        ``top`` (the highest rowid); ``more(word, since)`` counts the word's rows above
        rowid ``since``; counts stop at ``cap``."""
        def remembered(word: str) -> int:
            entry = self._items.get((*key, word))
            if entry is not None and entry[2] <= top <= entry[2] * 1.1 + 1_000:
                n, counted, base = entry
                if more is not None and counted < top and (cap is None or n < cap):
                    n += more(word, counted)
                    n = n if cap is None else min(n, cap)
                    self._items[(*key, word)] = (n, top, base)
                return n
            n = count(word)
            if n == 0:
                return n
            if len(self._items) >= self._size:
                self._items.clear()
            self._items[(*key, word)] = (n, top, top)
            return n
        return remembered

    def peek(self, key: tuple[Any, ...], word: str) -> int | None:
        """The count remembered under ``key`` for ``word`` as it stands (None: none)."""
        entry = self._items.get((*key, word))
        return entry[0] if entry is not None else None

    def drop(self, table: str, keep: Callable[[tuple[Any, ...]], bool] | None = None) -> None:
        """Forget every count of ``table`` (rows were deleted: a count can only be topped
        up with rows written since, never lowered), but those whose key ``keep`` holds."""
        self._items = {k: v for k, v in self._items.items()
                       if k[0] != table or (keep is not None and keep(k))}


def filter_key(table: str, where: str, params: Sequence[Any]) -> tuple[Any, ...]:
    """A filter's identity for :class:`TermCounts`: its SQL and parameters, its times to
    the hour. The current time of an expiry test, or of a window a decision keeps ("the
    last 90 days"), changes on every call: counts are taken again once an hour. Two
    windows a caller names ("since yesterday", "since last month") are two filters, never
    weighed with each other's counts."""
    return (table, where, *(p.replace(minute=0, second=0, microsecond=0)
                            if isinstance(p, datetime) else p for p in params))


__all__ = [
    "CJK_CHARS",
    "CJK_STOP_WORDS",
    "COMBINING_MARKS",
    "COMMON_TERM_DOCS",
    "EXACT_ROWS",
    "IDF_ROWS",
    "LARGE_INDEX_ROWS",
    "STOPWORDS",
    "AllCommon",
    "TermCounts",
    "cjk_pairs",
    "cjk_spaced",
    "filter_key",
    "fold",
    "fts5_idf",
    "has_cjk",
    "index_form",
    "plain_words",
    "selective",
    "settled",
    "terms",
]
