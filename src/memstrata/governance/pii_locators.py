"""Locators of the personal-data detectors of :mod:`memstrata.governance.sensitivity`:
from a pattern's match to the span to report, or ``None`` when the match is not personal
data after all (an image file name that looks like an email, a number that is an order or
a ticket, a card number that fails Luhn, an IBAN that fails mod-97, a US Social Security
number of an area or group never issued, a passport number or date of birth without the
words that say so). Pure functions, no state; the secrets' locators are
:mod:`memstrata.governance.secret_locators`.
"""

from __future__ import annotations

import re

from .secret_values import IBAN_LENGTHS, iban_valid, luhn_valid

_IMAGE_TLDS = frozenset({
    "png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "tif", "tiff", "js", "ts", "css",
    "json", "yaml", "yml", "toml", "lock", "txt", "html", "pdf", "whl", "tgz",
})


_LOCAL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")


def email(m: re.Match[str]) -> tuple[int, int] | None:
    """The pattern starts at ``@``; walk back over the local part (at most 64 characters)."""
    if m.group("tld").lower() in _IMAGE_TLDS:
        return None
    text, start = m.string, m.start()
    while start > 0 and m.start() - start < 64 and text[start - 1] in _LOCAL_CHARS:
        start -= 1
    while start < m.start() and not text[start].isalnum():
        start += 1
    if start == m.start() or (start > 0 and text[start - 1] in "/\\"):
        return None  # no local part, or a path such as /pkg@1.2/x
    if re.search(r"://[^\s/@]*:$", text[max(0, start - 200):start]):
        return None  # the password half of user:password@host
    return start, m.end()


_PHONE_CONTEXT = re.compile(
    r"(?i)\b(?:tel|telephone|phone|mobile|mob|cell|fax|call|ring|whatsapp|text|sms|handy"
    r"|telefon|t[ée]l[ée]phone|t[ée]l|appelez|rufnummer|contact|reach)\b"
)
_NOT_PHONE_CONTEXT = re.compile(
    r"(?i)(?:\b(?:order|invoice|ticket|ref|reference|serial|sku|tracking|account|acct|case|po"
    r"|isbn|id)\b|#|\bno\.)[^\n]{0,12}$"
)


def phone(m: re.Match[str]) -> tuple[int, int] | None:
    digits = sum(c.isdigit() for c in m.group(0))
    if not 8 <= digits <= 15:
        return None
    before = m.string[max(0, m.start() - 30):m.start()]
    if _NOT_PHONE_CONTEXT.search(before) and not _PHONE_CONTEXT.search(before):
        return None
    return m.span()


def phone_with_context(m: re.Match[str]) -> tuple[int, int] | None:
    """A national number (trunk prefix 0) only counts after a word such as "tel" or "mobile"."""
    digits = sum(c.isdigit() for c in m.group(0))
    if not 9 <= digits <= 12:
        return None
    before = m.string[max(0, m.start() - 24):m.start()]
    return m.span() if _PHONE_CONTEXT.search(before) and "\n" not in before[-3:] else None


_CARD_PREFIX = re.compile(
    r"4|5[1-5]|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)|3[47]|6(?:011|4[4-9]|5)"
    r"|35(?:2[89]|[3-8]\d)|3(?:0[0-5]|[689])|62"
)


def card(m: re.Match[str]) -> tuple[int, int] | None:
    raw = m.group(0)
    groups = re.split(r"[ -]", raw)
    digits = "".join(groups)
    if not 13 <= len(digits) <= 19 or not _CARD_PREFIX.match(digits) or not luhn_valid(digits):
        return None
    if len(groups) == 1 and len(digits) not in (15, 16):
        return None  # a long bare integer is far more often an ID than a card
    if len(groups) > 1:
        seps = set(re.findall(r"[ -]", raw))
        sizes = [len(g) for g in groups]
        regular = all(s == 4 for s in sizes[:-1]) and 1 <= sizes[-1] <= 4
        if len(seps) > 1 or not (regular or sizes == [4, 6, 5] or sizes == [4, 6, 4]):
            return None
    return m.span()


def iban(m: re.Match[str]) -> tuple[int, int] | None:
    text = m.string
    start, end = m.span()
    expected = IBAN_LENGTHS.get(text[start:start + 2])
    if expected is None:
        return None
    # The pattern may run into a following upper-case word; cut at the country length.
    count, pos = 0, start
    while pos < end and count < expected:
        if text[pos] != " ":
            count += 1
        pos += 1
    if count < expected or not iban_valid(text[start:pos]):
        return None
    return start, pos


def ssn_valid(digits: str) -> bool:
    """The SSA's rules for a US Social Security number (9 digits): no area 000, 666 or
    900-999, no group 00, no serial 0000."""
    if len(digits) != 9 or not digits.isdigit():
        return False
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


#: Words just before a number that make it a reference, not a person's number.
_NOT_SSN_CONTEXT = re.compile(
    r"(?i)(?:\b(?:order|invoice|ticket|ref|reference|serial|sku|part|model|tracking|case|po"
    r"|isbn|build|version|item|lot|batch|patent)\b|#|\bno\.)[^\n]{0,12}$"
)
_SSN_CONTEXT = re.compile(r"(?i)\b(?:ssn\b|social security|ss ?#|ss no\b)")


def us_ssn(m: re.Match[str]) -> tuple[int, int] | None:
    """``###-##-####`` that passes :func:`ssn_valid`, unless a word such as "order" or
    "part" right before it says it is a reference (the SSN words override that). The
    pattern starts at the first dash: the number starts three digits before it."""
    start = m.start() - 3
    if not ssn_valid(m.string[start:m.end()].replace("-", "")):
        return None
    before = m.string[max(0, start - 30):start]
    if _NOT_SSN_CONTEXT.search(before) and not _SSN_CONTEXT.search(before):
        return None
    return start, m.end()


def ssn_with_context(m: re.Match[str]) -> tuple[int, int] | None:
    """Nine digits (bare, or grouped 3-2-4 by spaces or dashes) right after "SSN" or
    "social security number": the validity rules still apply."""
    digits = re.sub(r"[ \-]", "", m.group("secret"))
    return m.span("secret") if ssn_valid(digits) else None


def passport_number(m: re.Match[str]) -> tuple[int, int] | None:
    """A passport number after the word: 6-9 upper-case letters and digits, at least two of
    them digits (so a word in capitals is not one)."""
    value = m.group("secret")
    return m.span("secret") if sum(c.isdigit() for c in value) >= 2 else None


_MONTHS = {name: n for n, names in enumerate((
    ("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",),
    ("jun", "june"), ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"),
    ("oct", "october"), ("nov", "november"), ("dec", "december")), 1) for name in names}


def date_of_birth(m: re.Match[str]) -> tuple[int, int] | None:
    """A whole date (day, month and a four-digit year from 1900 on, or two digits) after
    "born (on)", "date of birth", "DOB" or "birthday": a plausible calendar date, so
    "born on 2/3 of the team" or a version is not one."""
    value = m.group("secret")
    numbers = [int(n) for n in re.findall(r"\d+", value)]
    month = next((_MONTHS[w] for w in re.findall(r"[a-z]+", value.lower()) if w in _MONTHS),
                 None)
    if month is not None:
        if len(numbers) != 2:
            return None
        day, year = numbers
        ok = 1 <= day <= 31 and 1900 <= year <= 2100
    else:
        parts = re.split(r"[./\-]", value)
        if len(parts) != 3:
            return None
        first, second, third = (int(p) for p in parts)
        if len(parts[0]) == 4:  # ISO: year-month-day
            ok = 1900 <= first <= 2100 and 1 <= second <= 12 and 1 <= third <= 31
        else:  # day/month/year or month/day/year
            ok = (len(parts[2]) in (2, 4) and (len(parts[2]) == 2 or 1900 <= third <= 2100)
                  and 1 <= min(first, second) <= 12 and 1 <= max(first, second) <= 31)
    return m.span("secret") if ok else None


__all__ = [
    "card",
    "date_of_birth",
    "email",
    "iban",
    "passport_number",
    "phone",
    "phone_with_context",
    "ssn_valid",
    "ssn_with_context",
    "us_ssn",
]
