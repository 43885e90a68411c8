"""Query text to lexical-search syntax, shared by every backend.

A natural-language query becomes a disjunction of its content words (stop
words and question words removed), so a question like "what did Alice say
about the deploy?" matches records that mention alice or deploy. Terms are
quoted so punctuation and FTS operators in user text can never change the
query's meaning. In a large index, :func:`selective` is the one rule for which
words a query keeps (the backends count, within the caller's filter).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

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
    "ll", "m", "o", "re", "ve", "y",
})

_WORD_RE = re.compile(r"[\w][\w'\-]*", re.UNICODE)


def terms(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Lowercase content words of ``text``, in order, without duplicates."""
    seen: dict[str, None] = {}
    for raw in _WORD_RE.findall(text.lower()):
        word = raw.strip("'-").replace("'s", "")
        if not word or (not keep_stopwords and word in STOPWORDS):
            continue
        seen.setdefault(word, None)
    return list(seen)


def fts5_query(text: str, drop: Sequence[str] = ()) -> str:
    """An FTS5 MATCH expression: quoted content words joined by OR ('' if none); words in
    ``drop`` (lowercase, e.g. names the caller boosts separately) are left out."""
    dropped = set(drop)
    words = [w for w in terms(text) if w not in dropped]
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words[:64])


def tsquery(text: str, drop: Sequence[str] = ()) -> str:
    """A PostgreSQL ``to_tsquery`` expression: content words joined by ``|``."""
    dropped = set(drop)
    words = [re.sub(r"[^\w]", "", w) for w in terms(text) if w not in dropped]
    return " | ".join(w for w in words[:64] if w)


def selective(words: Sequence[str], common: int, count: Callable[[str], int]) -> list[str]:
    """The words a query over a large index keeps, given ``count(word)``: how many of the
    rows *the caller's filter admits* contain it (capped at ``common``).

    A word in none of the caller's rows is left out (it matches nothing of theirs); a word
    in ``common`` or more of them is left out while a rarer word remains (it barely moves a
    rank, yet scoring its postings dominates the query time); when every word that matches
    is that common, they all stay, so a query never loses all its words to pruning.
    """
    counts = {w: count(w) for w in dict.fromkeys(words)}
    present = [w for w in words if counts[w] > 0]
    return [w for w in present if counts[w] < common] or present


__all__ = ["STOPWORDS", "fts5_query", "selective", "terms", "tsquery"]
