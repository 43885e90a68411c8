"""Text as a person sees it, defined once for every rule that reads text: the secret scanner
(:mod:`.sensitivity`), the injection detector (:mod:`.injection`) and the actor rules of
:mod:`.safety`.

Contract:
- :func:`is_hidden` is true of a character that shows nothing: every Unicode format
  character (zero-width spaces and joiners, a soft hyphen, direction marks and overrides,
  the byte-order mark, tag characters), variation selectors, fillers and the blank braille
  pattern. One inside a key or a word hides it from a pattern and vanishes when the text
  is copied back out.
- :data:`LOOKALIKES` maps Cyrillic and Greek letters that look like Latin ones (for
  ``str.translate``); :func:`as_latin` applies it to a word that holds Latin letters too,
  so real Russian or Greek is left as it is.
- :func:`folded` is a text without its hidden characters, compatibility forms folded
  (NFKC: full-width ``ｓｋ＿ｌｉｖｅ`` is ``sk_live``) and look-alikes read as Latin, with the
  index in the text of each of its characters (one look-alike letter for one Latin letter:
  the indexes hold); None when that changes nothing (all ASCII, say). It reads the text
  in one pass, with no pattern that backtracks: a long run costs what its length does.
"""

from __future__ import annotations

import re
import unicodedata

#: The characters :func:`is_hidden` is true of: Unicode's format characters (category Cf,
#: listed so that no Python version's tables change it) and the invisible ones of other
#: categories (the combining grapheme joiner, fillers, variation selectors, blank braille).
_HIDDEN = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f"
    "\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0\ufe00-\ufe0f\U000e0100-\U000e01ef]")
#: Cyrillic and Greek letters that look like Latin ones, as ``str.translate`` takes them.
LOOKALIKES = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ɡ": "g", "А": "A", "В": "B", "Е": "E", "К": "K",
    "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X", "І": "I", "Ј": "J",
    "ο": "o", "α": "a", "ι": "i", "ν": "v", "ε": "e", "κ": "k", "ρ": "p", "τ": "t", "υ": "u",
    "Ο": "O", "Α": "A", "Ε": "E", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ρ": "P", "Τ": "T",
})
#: A word, for :func:`as_latin` (one pass: a long run is read once).
_WORD = re.compile(r"[\w\-]+")


def is_hidden(ch: str) -> bool:
    """Whether the character ``ch`` shows nothing (see the module docstring)."""
    return _HIDDEN.match(ch) is not None


def _mixed(word: str) -> bool:
    return not word.isascii() and any("a" <= c.lower() <= "z" for c in word)


def as_latin(word: str) -> str:
    """``word`` with its look-alike letters read as Latin, when it holds Latin letters too
    (else as it is)."""
    return word.translate(LOOKALIKES) if _mixed(word) else word


def _as_latin(m: re.Match[str]) -> str:
    return as_latin(m.group(0))


def folded(text: str) -> tuple[str, list[int]] | None:
    """``text`` as a pattern should read it, with the index in ``text`` of each of its
    characters; None when it is that already (see the module docstring)."""
    if text.isascii() or (_HIDDEN.search(text) is None
                          and not any(map(_mixed, _WORD.findall(text)))
                          and unicodedata.is_normalized("NFKC", text)):
        return None
    out: list[str] = []
    where: list[int] = []
    for i, c in enumerate(text):
        if is_hidden(c):
            continue
        plain = c if c.isascii() else unicodedata.normalize("NFKC", c)
        out.append(plain)
        where.extend([i] * len(plain))
    joined = "".join(out)
    if not joined.isascii():
        joined = _WORD.sub(_as_latin, joined)
    return joined, where


def shown(text: str) -> str:
    """``text`` as :func:`folded` reads it, without the indexes."""
    done = folded(text)
    return text if done is None else done[0]


__all__ = ["LOOKALIKES", "as_latin", "folded", "is_hidden", "shown"]
