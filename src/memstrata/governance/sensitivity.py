"""Recognise secrets and personal data in text by their shape.

Contract
--------
* :func:`scan` returns a :class:`ScanReport` of :class:`Finding` objects. A
  finding names its detector, its kind (``"secret"`` or ``"pii"``) and the
  character span ``[start, end)``; it never holds the matched text, so the
  ``repr``/``str`` of a finding or report, and anything that logs one, cannot
  leak a secret. This module itself never logs and does no I/O.
* Findings do not overlap. When detectors overlap, the most specific one names
  the finding and the span grows to the union of the overlapping spans, so a
  redaction never leaves a fragment. PII overlapping a secret is dropped (the
  secret span already covers it).
* :func:`redact` replaces every secret span (and, with ``redact_pii=True``,
  every PII span) with ``[REDACTED:<detector>]``.
* Detectors are named regular expressions plus checks: Luhn for card numbers,
  ISO 13616 mod-97 and country lengths for IBANs, header-decodes-to-JSON-with-
  ``alg`` for JWTs, id-part-decodes-to-digits for Discord bot tokens,
  decodes-to-``user:password`` for Basic and Docker ``auth`` values,
  decodes-to-a-PEM-private-key for base64 key files, the other SAS fields
  before an Azure ``sig=``, Shannon entropy and character-class mix for the
  generic ``key = value``, ``--flag value`` and prose detectors, and a
  placeholder filter (``sk-...``, ``ghp_XXXX``, ``<token>``, ``${VAR}``,
  ``user:password@``) for all of them.
* A finding always covers the whole value, so :func:`redact` (and
  :func:`memstrata.governance.safety.redact_secrets`, which every write path
  uses) leaves no part of it.
* :class:`SensitivityScanner` is configurable (extra patterns, disabled
  detectors, entropy threshold, PII on/off); the module-level :func:`scan` and
  :func:`redact` use one default instance.

Decisions
---------
* Shape, not intent: a vendor's documented example key with a real key's
  shape (``AKIAIOSFODNN7EXAMPLE``) is reported. An allow-list of "known
  examples" would be a bypass, and redacting a documentation example loses
  nothing. Likewise Stripe's public test card number is PII.
* The generic detector only fires for a secret-named key (``api_key``,
  ``client_secret``, ``SECRET_KEY``, ``x-api-key``...) whose last word is not a
  descriptor (``token_type``, ``api_key_header``, ``private_key_path``), that
  has no word such as ``public``, ``page`` or ``next``, and whose value looks
  random: 16+ characters, letters and digits (or letters of both cases, at
  3.5 bits or more), Shannon entropy at or above the threshold (default 3.0
  bits per character). The same test applies to ``--client-secret X`` flags
  and Terraform ``variable "api_token" { default = "X" }``. A bare
  high-entropy string with no key name is not reported (hashes, digests and
  base64 payloads are far more common than naked secrets).
* A value is random, not a name, unless it reads as one: ``SecretStr`` and
  ``refreshToken`` are made of pronounceable words end to end; a random
  mixed-case token breaks into short vowel-less fragments and digit runs.
  This test is tuned never to trade recall for look-alike suppression: it
  takes under 0.1% of random 24-character alphanumeric strings for names and
  none of 32 or more. Code is a call or subscript after a name
  (``get_password()``, ``uuid.uuid4().hex``, ``os.environ[``), an attribute
  chain, a YAML tag (``!vault``) or a template; a random value that merely
  holds a bracket is not code. Base64 of ordinary text or JSON (page cursors)
  is not random.
* A secret named in prose is found when a secret noun (``token``, ``key``,
  ``secret``, ``credential``) is followed within six words by a random value
  (``the bot token for the alerts bot: X``, ``my bearer token is X``), unless
  a describing word (``id``, ``hash``, ``fingerprint``...) comes first or the
  noun is a data key (``primary key``, ``cache key``). Git SHAs and digests
  (40/64 hex), short hex key ids and UUIDs are not taken from prose.
* Passwords (``password=...``, ``"password": "..."``, ``the password is X``,
  ``docker login -p X``, ``redis-cli -a X``, ``curl -u user:X``) need no
  entropy: ``hunter2`` is a password. Words (``required``), code
  (``getpass()``, ``self.password``, ``db_password``) and placeholders are not.
* Sentence punctuation after a bare value is not part of it (``the password
  is Winter2024!`` redacts ``Winter2024``); quote a value to keep it whole.

Limits
------
Shapes not listed here (a new vendor's token format with no secret-named key
or noun before it, a password written as prose without the word "password",
a naked 40-character AWS secret with no key name) are not found. Add them
with ``extra_patterns``. Figures for the tuning corpus and third-party
documentation are in the header of ``tests/data/secrets_corpus.yaml``; the
figures on a held-out corpus never used for tuning (recall and false
positives, before and after each tuning round) are in the header of
``tests/data/secrets_holdout.yaml``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError

Kind = Literal["secret", "pii"]
Locator = Callable[[re.Match[str]], "tuple[int, int] | None"]

DEFAULT_ENTROPY_THRESHOLD = 3.0
"""Minimum Shannon entropy (bits per character) of a generic secret value."""


@dataclass(frozen=True)
class Finding:
    """One sensitive span: which detector, what kind, where. Never the value."""

    detector: str
    kind: Kind
    start: int
    end: int


@dataclass(frozen=True)
class ScanReport:
    """Every finding of one scan, ordered by position, non-overlapping."""

    findings: tuple[Finding, ...] = ()

    @property
    def secrets(self) -> tuple[Finding, ...]:
        """Findings of kind ``secret``."""
        return tuple(f for f in self.findings if f.kind == "secret")

    @property
    def pii(self) -> tuple[Finding, ...]:
        """Findings of kind ``pii``."""
        return tuple(f for f in self.findings if f.kind == "pii")

    @property
    def has_secret(self) -> bool:
        """Whether any secret was found."""
        return any(f.kind == "secret" for f in self.findings)

    @property
    def has_pii(self) -> bool:
        """Whether any personal data was found."""
        return any(f.kind == "pii" for f in self.findings)

    def detectors(self) -> list[str]:
        """Sorted names of the detectors that fired."""
        return sorted({f.detector for f in self.findings})


@dataclass(frozen=True)
class Detector:
    """A named pattern. ``locate`` turns a match into the sensitive span or rejects it.

    Without ``locate`` the span is the group named ``secret`` if the pattern
    has one, else the whole match. Higher ``priority`` wins an overlap.
    ``hints`` are lower-case substrings of which at least one must occur in
    the lower-cased text for the pattern to be worth running (a fast
    pre-filter; empty means always run). ``long_token`` says the pattern
    cannot match without 20 consecutive characters of ``[A-Za-z0-9_-]``
    (most vendor tokens), so text without such a run skips it before its
    hints are even looked up.
    """

    name: str
    kind: Kind
    pattern: re.Pattern[str]
    locate: Locator | None = None
    priority: int = 50
    hints: tuple[str, ...] = ()
    long_token: bool = False

    def applies(self, lowered: str) -> bool:
        """Whether the pre-filter lets this detector run on ``lowered`` text."""
        return not self.hints or any(h in lowered for h in self.hints)

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """The sensitive spans this detector finds in ``text``."""
        has_group = "secret" in self.pattern.groupindex
        pos = 0
        while (m := self.pattern.search(text, pos)) is not None:
            if self.locate is not None:
                span = self.locate(m)
            elif has_group and m.group("secret") is not None:
                span = m.span("secret")
            else:
                span = m.span()
            if span is not None and span[1] > span[0]:
                yield span
                pos = max(m.end(), m.start() + 1)
            else:
                # a rejected match must not swallow a real one that overlaps it
                # ("credential: SECRET_KEY = '...'": the first candidate value is the key name)
                pos = m.start() + 1


# --------------------------------------------------------------------------- checks


def shannon_entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character (0 for the empty string)."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn checksum."""
    if not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# ISO 13616 lengths; an IBAN of another country is not recognised.
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18,
    "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
    "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}


def iban_valid(value: str) -> bool:
    """Whether ``value`` (spaces allowed) is an IBAN of the right length with a valid mod-97."""
    compact = value.replace(" ", "").upper()
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


_PLACEHOLDER_RE = re.compile(
    r"(.)\1{5,}|\.\.\.|…|<[^>]*>|\$\{|\{\{|\{%|%\([A-Za-z_]\w*\)[sdr]|^\$[A-Z_][A-Z0-9_]*$"
    r"|(?<![A-Za-z0-9])your[_\- .]|^your[a-z]*$|placeholder"
    r"|redacted|replace[_-]?me|insert[_-]|[_-]here\b|example[_-]|^x+$|^\*+$",
    re.IGNORECASE,
)
_PLACEHOLDER_WORDS = frozenset({
    "password", "passwd", "pass", "pwd", "pw", "secret", "string", "none", "null", "nil",
    "true", "false", "undefined", "required", "optional", "hidden", "masked", "redacted",
    "example", "changeme", "mypassword", "my_password", "yourpassword", "foo", "bar", "foobar",
    "test", "token", "key", "value", "xxx", "empty",
})


def _has_sequence(value: str, run: int = 6) -> bool:
    """``0123456``/``abcdef``-style runs mark hand-typed placeholders."""
    count = 1
    for a, b in itertools.pairwise(value):
        count = count + 1 if a.isalnum() and ord(b) == ord(a) + 1 else 1
        if count >= run:
            return True
    return False


def is_placeholder(value: str) -> bool:
    """Whether ``value`` is a documentation placeholder rather than a credential."""
    if value.lower().strip("\"'`") in _PLACEHOLDER_WORDS:
        return True
    if _PLACEHOLDER_RE.search(value) or _has_sequence(value):
        return True
    return len(value) >= 10 and len(set(value)) < 5


_NAME_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_VOWELS = frozenset("aeiouAEIOU")
_CONSONANT_RUN = re.compile(r"[^aeiouAEIOU]{4}")


def _is_word(part: str) -> bool:
    """A pronounceable word: 3-14 letters, a quarter of them vowels, no four consonants in a row."""
    if not 3 <= len(part) <= 14 or _CONSONANT_RUN.search(part.lower().replace("y", "a")):
        return False
    return sum(c in _VOWELS for c in part) * 4 >= len(part)


def _is_identifier(value: str) -> bool:
    """``Ed25519PrivateKey``, ``SecretStr``, ``challengePassword``: a type or a name, not a secret.

    A name is made of words from end to end: its camelCase/snake_case parts are
    pronounceable words (three or more letters with a vowel) or acronyms (two to
    five capitals), with at most one other part and at most one number, and the
    words cover most of it. A random token of mixed case breaks into short,
    vowel-less fragments and several digit runs, so a random value is very
    rarely taken for a name (measured: under 0.1% of random 24-character
    alphanumeric strings, none of 32 or more).
    """
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", value):
        return False
    if (value.islower() or value.isupper()) and "_" not in value.strip("_"):
        return False  # one word, or one-case run: the entropy test decides
    parts = [p for chunk in value.split("_") for p in _NAME_PART.findall(chunk.capitalize()
                                                                        if chunk.isupper()
                                                                        else chunk)]
    numbers = sum(p.isdigit() for p in parts)
    words = [p for p in parts if not p.isdigit()]
    good = [w for w in words if _is_word(w)]
    acronyms = [w for w in words if w.isupper() and 2 <= len(w) <= 5 and not _is_word(w)]
    if len(words) < 2 or numbers > 1 or len(acronyms) > 1 or \
            len(words) - len(good) - len(acronyms) > 1:
        return False
    # the one odd part counts when it is a syllable (``Str`` of SecretStr), not a fragment
    covered = sum(len(p) for p in parts if len(p) >= 3 or p in good or p in acronyms
                  or p.isdigit())
    return covered * 10 >= len(value) * 7


_GENERATED_MARKS = frozenset("!@#$%^&*~")
_NO_DIGIT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_+/=!@#$%^&*~")
# name(args), name[index], then any chain of .attr, (args), [index]: `uuid.uuid4().hex`
_ARGS = r"[\w.,'\" =:/\-]*"  # what call arguments and subscripts are made of (no !@#$%^&*+)
_CALL_CHAIN = re.compile(
    r"[A-Za-z_$][\w.]*(?:\(" + _ARGS + r"\)|\[" + _ARGS + r"\])(?:\.[A-Za-z_]\w*|\(" + _ARGS
    + r"\)|\[" + _ARGS + r"\])*")


def _is_code(value: str, *, quoted: bool = False) -> bool:
    """A call, subscript, attribute chain, YAML tag or template in a value: code, not a literal.

    ``get_password()``, ``os.environ[`` (a bare value is cut at the quote),
    ``creds.client_secret``, ``!vault``, ``{{ x }}``. A bare (unquoted) value
    holding a bracket is code (``Callable[[int``, ``(settings.X``) unless it
    also holds two or more of ``!@#$%^&*~``, the mark of a generated secret. A
    quoted value is a literal: it is code only when it is a whole call chain
    (``"uuid.uuid4().hex"``), so a quoted random key holding a bracket
    (``'k(7-x...'``, Django's alphabet) stays a secret.
    """
    if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", value):
        return True
    if re.fullmatch(r"!!?[A-Za-z][\w.\-]*", value):
        return True  # a YAML tag: `password: !vault |`, `token: !secret name`
    if value[:1] in "{[" and value[-1:] in "}]":
        return True
    if any(_CALL_CHAIN.fullmatch(value + close) for close in ("", ")", "]")):
        return True  # a call chain, or one cut at a quote or a space: `os.environ[`
    if value.startswith(("$(", "`")):
        return True
    return not quoted and re.search(r"[()\[\]{}]", value) is not None and \
        len(set(value) & _GENERATED_MARKS) < 2


def _decodes_to_text(value: str) -> bool:
    """Base64 of ordinary text or JSON (a page cursor, a payload): not a credential.

    Text holding credential words (a ``.dockerconfigjson``, an encoded PEM key)
    does not count as ordinary.
    """
    if len(value) < 16 or not re.fullmatch(r"[A-Za-z0-9+/_\-]+={0,2}", value):
        return False
    raw = _b64decode(value.rstrip("="), urlsafe="-" in value or "_" in value)
    try:
        decoded = raw.decode("utf-8") if raw else ""
    except UnicodeDecodeError:
        return False
    if not decoded or not decoded.isprintable():
        return False
    lowered = decoded.lower()
    if any(w in lowered for w in ("auth", "password", "secret", "token", "private key")):
        return False
    return decoded.count(" ") >= 2 or decoded.startswith(("{", "["))


_EMAIL_LIKE = re.compile(r"[\w.+\-]@[A-Za-z0-9\-]+\.[A-Za-z]{2,}")
_PATH_SEGMENT = re.compile(r"[A-Za-z0-9._\-~]*")


def _is_path(value: str) -> bool:
    """``/etc/ssl/app.key``, ``~/.aws/credentials``, ``src/auth/token.py``: a path.

    Each segment must read as a name (lower case, Title case, a word-made
    identifier, a number, or a file name with an extension), so a base64
    value that happens to start with ``/`` is not a path.
    """
    if "/" not in value or "+" in value or "=" in value:
        return False
    segments = [seg for seg in value.split("/") if seg not in ("", "~", ".", "..")]
    if not segments:
        return True
    for seg in segments:
        stem = seg.rsplit(".", 1)[0] if re.search(r"\.[A-Za-z0-9]{1,5}$", seg) else seg
        if not _PATH_SEGMENT.fullmatch(seg):
            return False
        plain = stem.replace("-", "_").replace(".", "_")
        if not (stem == stem.lower() or stem.istitle() or stem.isdigit()
                or _is_identifier(plain.strip("_") or "x")):
            return False
    if value.startswith(("/", "~", "./", "../")):
        return True
    return re.search(r"\.[a-z]{1,5}$", value) is not None


def _looks_random(value: str, threshold: float, *, quoted: bool = False) -> bool:
    if len(value) < 16 or is_placeholder(value) or any(c.isspace() for c in value):
        return False
    if not any(c.isalpha() for c in value):
        return False
    if not any(c.isdigit() for c in value):
        # no digit: letters of both cases (16+), or 20+ characters of letters and the
        # symbols of generated secrets; names and words are caught below
        if value.isalpha():
            if value.islower() or value.isupper():
                return False
        elif len(value) < 20 or not set(value) <= _NO_DIGIT_CHARS or _is_wordy(
                value.replace("/", "-").replace("+", "-")) or not (
                value.lower() != value != value.upper() or
                len(set(value) & _GENERATED_MARKS) >= 2):
            return False
        threshold = max(threshold, 3.5)
    if "://" in value or _EMAIL_LIKE.search(value) or _is_path(value):
        return False
    if re.match(r"v?\d+(\.\d+)+", value) or _is_code(value, quoted=quoted) or \
            _is_identifier(value):
        return False  # a version, or code
    if _decodes_to_text(value):
        return False
    return shannon_entropy(value) >= threshold


# --------------------------------------------------------------------------- key names

_WORDS_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_KEY_QUALIFIERS = frozenset({
    "api", "access", "private", "secret", "signing", "encryption", "master", "session", "auth",
    "client", "app", "service", "admin", "webhook", "account", "consumer", "shared", "license",
    "sas", "storage", "deploy", "jwt", "hmac", "aes",
})
_SECRET_WORDS = frozenset({"secret", "token", "apikey", "credential", "credentials", "passphrase"})
_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "pass", "passphrase", "pgpassword"})
# A key whose last word describes the secret (its type, place, size...) holds no secret.
_DESCRIPTOR_WORDS = frozenset({
    "id", "ids", "name", "names", "type", "url", "uri", "endpoint", "path", "file", "dir", "arn",
    "ttl", "length", "len", "count", "expiry", "expires", "expiration", "in", "header", "prefix",
    "env", "version", "format", "field", "source", "provider", "hint", "limit", "size", "days",
    "rotation", "policy", "hash", "hashed", "hasher", "hashers", "algorithm", "alg", "method",
    "kind", "location", "mode", "enabled", "required", "used", "manager", "store", "ref", "label",
    "description", "usage", "validators", "reset", "link", "min", "max", "strength", "rules",
    "changed", "set", "at", "scope", "scopes", "lifetime", "age", "timeout", "var", "variable",
})


def _key_words(key: str) -> list[str]:
    return [w.lower() for w in _WORDS_RE.findall(key)]


# Words that may follow the secret noun without changing what the key holds.
_TRAILING_OK = frozenset({
    "value", "val", "str", "string", "b64", "base64", "hex", "raw", "plain", "plaintext", "bytes",
    "data", "prod", "production", "dev", "development", "test", "live", "staging", "old", "new",
    "current", "primary", "secondary", "base", "v", "encoded", "env",
})


# A key with one of these words holds something that is not a credential.
_NOT_SECRET_WORDS = frozenset({"public", "publishable", "page", "pagination", "continuation",
                               "next", "cursor", "max", "num", "total"})


def _is_secret_key(key: str) -> bool:
    words = _key_words(key)
    if not words or words[-1] in _DESCRIPTOR_WORDS or _NOT_SECRET_WORDS.intersection(words):
        return False
    for i in range(len(words) - 1, -1, -1):
        w = words[i]
        noun = w in _SECRET_WORDS or w.endswith(("apikey", "secret")) or (
            w == "key" and i > 0 and words[i - 1] in _KEY_QUALIFIERS)
        if noun:
            return all(t in _TRAILING_OK or t.isdigit() for t in words[i + 1:])
    return False


def _is_password_key(key: str) -> bool:
    words = _key_words(key)
    if not words or words[-1] in _DESCRIPTOR_WORDS:
        return False
    return words[-1] in _PASSWORD_WORDS or words[-1].endswith("password")


# --------------------------------------------------------------------------- locators

_TRAILING_PUNCT = ".,;:!?)]}>"
# One value after a separator: the inside of quotes, or a bare token.
_VALUE = (
    r"""["'`]?(?P<secret>(?<=")[^"\r\n]{1,400}(?=")|(?<=')[^'\r\n]{1,400}(?=')"""
    r"""|(?<=`)[^`\r\n]{1,400}(?=`)|(?<!["'`])[^\s"'`,;]{1,400})"""
)
_SEP = r"""["']?[ \t]*(?::=|=>|=|:)[ \t]*"""


def _value_span(m: re.Match[str]) -> tuple[str, int, int, bool]:
    """The value, its span without trailing punctuation, and whether it was quoted.

    A bare value that is a placeholder before its punctuation is cut
    (``<password>;``) comes back empty, so every caller rejects it.
    """
    start, end = m.span("secret")
    text = m.string
    quoted = start > 0 and text[start - 1] in "\"'`"
    if not quoted:
        if is_placeholder(text[start:end]):
            return "", start, start, quoted
        while end > start and text[end - 1] in _TRAILING_PUNCT:
            end -= 1
    return text[start:end], start, end, quoted


def _not_placeholder(m: re.Match[str]) -> tuple[int, int] | None:
    span = m.span("secret") if "secret" in m.re.groupindex else m.span()
    return None if is_placeholder(m.string[span[0]:span[1]]) else span


def _mixed_token(m: re.Match[str]) -> tuple[int, int] | None:
    """A vendor token whose body must mix letters and digits (guards short generic prefixes)."""
    value = m.group(0)
    if is_placeholder(value) or not any(c.isdigit() for c in value[3:]):
        return None
    return m.span()


def _password_value(m: re.Match[str]) -> tuple[int, int] | None:
    value, start, end, quoted = _value_span(m)
    core = value.strip()
    if len(core) < 6 or is_placeholder(core):
        return None
    if _is_identifier(core) and not any(c.isdigit() for c in core):
        return None  # a type or field name: SecretStr, challengePassword
    if quoted:
        words = core.split()
        if len(words) > 1 and all(w.isalpha() for w in words):
            return None  # prose, e.g. a UI label "Mot de passe"
        return start, end
    if _is_code(core):
        return None
    if "_" in core and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", core):
        return None  # a variable name
    if core.isalpha() and (core.islower() or core.isupper() or core.istitle()):
        return None  # a word such as "required" or "Hidden"
    return start, end


_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _key(m: re.Match[str]) -> str:
    """The whole key name: the patterns start at the secret noun, so walk back to its start."""
    text, start = m.string, m.start()
    while start > 0 and text[start - 1] in _KEY_CHARS:
        start -= 1
    return text[start:m.end("key")]


def _mysql_password(m: re.Match[str]) -> tuple[int, int] | None:
    start, end = m.span("secret")
    if m.string[start] in "'\"":
        start, end = start + 1, end - 1  # keep the quotes, redact what they hold
    value = m.string[start:end]
    return None if len(value) < 4 or is_placeholder(value) else (start, end)


def _password_assignment(m: re.Match[str]) -> tuple[int, int] | None:
    return _password_value(m) if _is_password_key(_key(m)) else None


def _password_prose(m: re.Match[str]) -> tuple[int, int] | None:
    value = _value_span(m)[0]
    if not (any(c.isdigit() for c in value) or re.search(r"[^\w\s]", value)):
        return None  # "the password is incorrect"
    return _password_value(m)


def _generic_locator(threshold: float) -> Locator:
    def locate(m: re.Match[str]) -> tuple[int, int] | None:
        if not _is_secret_key(_key(m)):
            return None
        value, start, end, quoted = _value_span(m)
        return (start, end) if _looks_random(value, threshold, quoted=quoted) else None

    return locate


def _bearer_locator(threshold: float) -> Locator:
    def locate(m: re.Match[str]) -> tuple[int, int] | None:
        return m.span("secret") if _looks_random(m.group("secret"), threshold) else None

    return locate


def _b64decode(segment: str, *, urlsafe: bool) -> bytes | None:
    padded = segment + "=" * (-len(segment) % 4)
    try:
        if urlsafe:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None


def _jwt(m: re.Match[str]) -> tuple[int, int] | None:
    raw = _b64decode(m.group(0).split(".", 1)[0], urlsafe=True)
    try:
        header = json.loads(raw) if raw else None
    except ValueError:
        return None
    return m.span() if isinstance(header, dict) and "alg" in header else None


def _basic_auth(m: re.Match[str]) -> tuple[int, int] | None:
    raw = _b64decode(m.group("secret"), urlsafe=False)
    try:
        decoded = raw.decode("utf-8") if raw else ""
    except UnicodeDecodeError:
        return None
    user, sep, password = decoded.partition(":")
    if not sep or not user or not password or not decoded.isprintable():
        return None
    return None if is_placeholder(password) else m.span("secret")


def _url_password(m: re.Match[str]) -> tuple[int, int] | None:
    if re.search(r"[\[\]{}]", m.group("secret")):
        return None  # brackets are not allowed unencoded in userinfo: a syntax diagram
    return _not_placeholder(m)


# ADO.NET/ODBC/Npgsql style: `Key=value;` pairs, one of them naming the server or user.
_CONN_CONTEXT = re.compile(
    r"(?i)(?:server|data source|host|uid|user id|username|database|initial catalog|driver)"
    r"\s*=[^;\r\n]*;"
)


def _connection_password(m: re.Match[str]) -> tuple[int, int] | None:
    text = m.string
    window = text[max(0, m.start() - 300):m.end() + 50]
    if not _CONN_CONTEXT.search(window):
        return None
    start, end = m.span("secret")
    while end > start and text[end - 1] in " \t":
        end -= 1
    return None if is_placeholder(text[start:end]) else (start, end)


_IMAGE_TLDS = frozenset({
    "png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "tif", "tiff", "js", "ts", "css",
    "json", "yaml", "yml", "toml", "lock", "txt", "html", "pdf", "whl", "tgz",
})


_LOCAL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")


def _email(m: re.Match[str]) -> tuple[int, int] | None:
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


def _phone(m: re.Match[str]) -> tuple[int, int] | None:
    digits = sum(c.isdigit() for c in m.group(0))
    if not 8 <= digits <= 15:
        return None
    before = m.string[max(0, m.start() - 30):m.start()]
    if _NOT_PHONE_CONTEXT.search(before) and not _PHONE_CONTEXT.search(before):
        return None
    return m.span()


def _phone_with_context(m: re.Match[str]) -> tuple[int, int] | None:
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


def _card(m: re.Match[str]) -> tuple[int, int] | None:
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


def _telegram(m: re.Match[str]) -> tuple[int, int] | None:
    """``<bot id>:AA<35>``; the pattern starts at ``:AA`` so walk back over the 8-10 digit id."""
    text, start = m.string, m.start()
    while start > 0 and text[start - 1].isdigit():
        start -= 1
    digits = m.start() - start
    if not 8 <= digits <= 10:
        return None
    if start > 0 and text[start - 1].isalnum() and not text[:start].endswith("/bot"):
        return None  # part of a longer word; /bot<id>:<token> is the API URL form
    return None if is_placeholder(text[m.start():m.end()]) else (start, m.end())


def _iban(m: re.Match[str]) -> tuple[int, int] | None:
    text = m.string
    start, end = m.span()
    expected = _IBAN_LENGTHS.get(text[start:start + 2])
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


_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _discord_bot(m: re.Match[str]) -> tuple[int, int] | None:
    """``<base64 of the bot's numeric id>.<timestamp>.<hmac>``: the first part must decode to it.

    The pattern starts at the first dot; walk back over the id part (23-28 characters).
    """
    text, start = m.string, m.start()
    while start > 0 and m.start() - start <= 28 and text[start - 1] in _TOKEN_CHARS:
        start -= 1
    if not 23 <= m.start() - start <= 28 or (start > 0 and text[start - 1] in _TOKEN_CHARS):
        return None
    raw = _b64decode(text[start:m.start()], urlsafe=True)
    if raw is None or not raw.isdigit() or not 17 <= len(raw) <= 20:
        return None
    return None if is_placeholder(text[start:m.end()]) else (start, m.end())


# A SAS signature is recognised by the other SAS fields (or the word) before it.
_SAS_CONTEXT = re.compile(r"(?i)[?&\s]s[vperp]=|\bsas\b|\.windows\.net|\bsr=|\bspr=")


def _sas_signature(m: re.Match[str]) -> tuple[int, int] | None:
    value = m.group("secret")
    if not _SAS_CONTEXT.search(m.string[max(0, m.start() - 400):m.start()]):
        return None
    if not (any(c.isalpha() for c in value) and any(c.isdigit() for c in value)):
        return None
    return _not_placeholder(m)


_ACCOUNT_KEY_CONTEXT = re.compile(r"(?i)account[ _\-]?key|storage[ _\-]?key|\bkey[12]\b|azure")


def _azure_bare_key(m: re.Match[str]) -> tuple[int, int] | None:
    """A bare 64-byte base64 key (88 characters with ``==``) right after an account-key name."""
    text, start = m.string, m.start() - 86
    if start > 0 and text[start - 1] in _B64_CHARS:
        return None
    if not _ACCOUNT_KEY_CONTEXT.search(text[max(0, start - 80):start]):
        return None
    return None if is_placeholder(text[start:m.end()]) else (start, m.end())


_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_")


def _encoded_private_key(m: re.Match[str]) -> tuple[int, int] | None:
    """Base64 of a PEM private key (a Kubernetes ``tls.key``): the decoded head says so."""
    head = m.group(0)[:96]
    raw = _b64decode(head[:len(head) - len(head) % 4], urlsafe=False)
    return m.span() if raw is not None and b"PRIVATE KEY" in raw[:60] else None


_CLI_WITH_PASSWORD = re.compile(
    r"(?:redis-cli|sshpass|(?:docker|podman|buildah|skopeo|helm[ \t]+registry)[ \t]+login)\b"
    r"[^\n|;&]*$")


def _cli_password(m: re.Match[str]) -> tuple[int, int] | None:
    """A password given on a command line (quotes kept; ``$VAR`` and code are not one)."""
    start, end = m.span("secret")
    if m.string[start] in "'\"":
        start, end = start + 1, end - 1
    value = m.string[start:end]
    if len(value) < 4 or is_placeholder(value) or value.startswith("$") or _is_code(value):
        return None
    return start, end


def _tool_password(m: re.Match[str]) -> tuple[int, int] | None:
    """``-a``/``-p``/``--password`` counts only after a tool that takes a password there."""
    text = m.string
    line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
    return _cli_password(m) if _CLI_WITH_PASSWORD.search(line) else None


def _sentry_dsn(m: re.Match[str]) -> tuple[int, int] | None:
    host = m.group("host").lower()
    return m.span("secret") if "sentry" in host else None


def _terraform_variable(threshold: float) -> Locator:
    """``variable "db_password" { default = "..." }``: the default of a secret-named variable."""
    def locate(m: re.Match[str]) -> tuple[int, int] | None:
        name, value = m.group("name"), m.group("secret")
        if _is_password_key(name):
            ok = len(value) >= 6 and not is_placeholder(value)
        else:
            ok = _is_secret_key(name) and _looks_random(value, threshold, quoted=True)
        return m.span("secret") if ok else None

    return locate


def _flag_secret(threshold: float) -> Locator:
    """``--client-secret VALUE``, ``--account-key VALUE``: a secret-named flag, a random value."""
    def locate(m: re.Match[str]) -> tuple[int, int] | None:
        if not _is_secret_key(m.group("key")):
            return None
        value, start, end, quoted = _value_span(m)
        return (start, end) if _looks_random(value, threshold, quoted=quoted) else None

    return locate


# Words before "key" that make it a database or data-structure key, not a credential.
_NOT_CREDENTIAL_KEYS = frozenset({
    "public", "publishable", "primary", "foreign", "partition", "sort", "cache", "idempotency",
    "routing", "object", "composite", "unique", "lookup", "dict", "map", "row", "index", "shard",
    "surrogate", "natural", "hash", "gpg", "pgp", "ssh", "host", "sorting", "group", "deploy",
    "page", "next", "continuation", "s3", "registry", "dedup", "dedupe", "cursor",
})
# Words between the noun and a value that say the value describes the secret, not is it.
_PROSE_STOP = frozenset({
    "id", "ids", "name", "names", "hash", "sha", "sha1", "sha256", "digest", "fingerprint",
    "type", "length", "path", "file", "url", "uri", "arn", "version", "prefix", "public",
    "checksum", "commit", "ref", "label", "tag", "header", "field", "env", "variable", "var",
    "limit", "limits", "count", "tokens", "keys", "size", "format", "formats",
}) | _DESCRIPTOR_WORDS
_PROSE_STRIP = "\"'`([{<"
_HEX_RE = re.compile(r"[0-9a-fA-F]+")
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def _is_wordy(value: str) -> bool:
    """``base64url-encoded``, ``prod-reader-2024``: words joined by ``-``/``_``/``.``, a name."""
    parts = [p for chunk in re.split(r"[-_.]", value) for p in _NAME_PART.findall(chunk)]
    if "".join(parts) != re.sub(r"[-_.]", "", value):
        return False
    words = [p for p in parts if not p.isdigit()]
    return (len(parts) - len(words) <= 1 and len(words) >= 2 and
            all(len(w) >= 3 and any(c in _VOWELS for c in w) for w in words))


_PROSE_CANDIDATE = re.compile(r"[A-Za-z0-9+/=_\-.~%]{16}")


def _prose_secret(threshold: float) -> Locator:
    """``the bot token for the alerts bot: X``, ``my key is X``: a secret noun, words, a value.

    The value is the first of the next six words that looks random (the same test as the
    generic detector), unless a word such as ``id``, ``hash`` or ``fingerprint`` comes
    first. Git SHAs and digests (40/64 hex), short hex key ids and bare UUIDs are not taken
    from prose (only after "api key"/"api token").
    """
    def locate(m: re.Match[str]) -> tuple[int, int] | None:
        text = m.string
        if not _word_start(m):
            return None
        before = text[max(0, m.start() - 24):m.start()].lower()
        previous = re.findall(r"[a-z0-9]+", before)
        if previous and previous[-1] in _NOT_CREDENTIAL_KEYS:
            return None
        pos, line_end = m.end(), text.find("\n", m.end())
        line_end = len(text) if line_end < 0 else line_end
        if _PROSE_CANDIDATE.search(text, pos, min(line_end, pos + 160)) is None:
            return None  # nothing long enough to be a secret follows
        for word in re.finditer(r"\S+", text[pos:min(line_end, pos + 160)]):
            raw = word.group(0)
            start = pos + word.start() + len(raw) - len(raw.lstrip(_PROSE_STRIP))
            end = pos + word.end()
            while end > start and text[end - 1] in _TRAILING_PUNCT + "\"'`":
                end -= 1
            value = text[start:end]
            if value.lower().strip(":=") in _PROSE_STOP:
                return None
            if is_placeholder(raw) or "=" in value.rstrip("="):
                continue  # a placeholder, or an assignment (the generic detectors' business)
            core = raw.rstrip(_TRAILING_PUNCT)
            quoted = len(core) > 2 and core[0] in "\"'`" and core.count(core[0]) == 2 and \
                core.endswith(core[0])  # a whole quoted word, not `'x'.join([...`
            if word.start() > 0 and _looks_random(value, threshold, quoted=quoted) and \
                    not _is_wordy(value):
                hexlike = _HEX_RE.fullmatch(value) is not None
                if hexlike and (len(value) <= 20 or len(value) in (40, 64)):
                    return None
                if _UUID_RE.fullmatch(value) and (not previous or previous[-1] != "api"):
                    return None
                return start, end
            if word.start() > 80 or (raw.endswith((".", ";")) and len(raw) > 1 and
                                     not _looks_random(raw[:-1], threshold)):
                return None  # the sentence ended
        return None

    return locate


# --------------------------------------------------------------------------- detectors
#
# Every pattern starts with a literal or a character class, never with a
# look-behind or a case-insensitive group: the regex engine can then skip
# ahead in C. Boundary checks come right after the first character or in the
# locator. With the `hints` pre-filter, ordinary prose skips most detectors
# (see benchmarks/scan_speed.py for figures).

_TC = r"[A-Za-z0-9_\-]"  # a token character
_R = r"(?!" + _TC + ")"  # token end
#: What may not come right before a vendor prefix: a letter or digit. A ``-`` or ``_``
#: may (``deploy-ghp_...``, ``KEY_sk_live_...``): the prefix and its long random body are
#: specific enough on their own, and keys and names glue tokens that way.
_PB = r"[A-Za-z0-9]"


def _tok(prefix: str, body: str) -> re.Pattern[str]:
    """A token that starts with a literal ``prefix`` not preceded by a letter or digit."""
    return re.compile(prefix + r"(?<!" + _PB + prefix + r")" + body + _R)


def _word_start(m: re.Match[str]) -> bool:
    return m.start() == 0 or not (m.string[m.start() - 1].isalnum() or
                                  m.string[m.start() - 1] == "_")


def _at_word_start(locate: Locator) -> Locator:
    def wrapped(m: re.Match[str]) -> tuple[int, int] | None:
        return locate(m) if _word_start(m) else None

    return wrapped


_DIGITS = tuple("0123456789")


def _builtin_detectors(threshold: float) -> list[Detector]:
    d, rx = Detector, re.compile
    g = functools.partial(Detector, long_token=True)
    v = 100  # vendor formats: the most specific
    ph, mixed = _not_placeholder, _mixed_token
    return [
        g("aws_access_key_id", "secret", rx(
            r"A(?<![A-Z0-9]A)(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|PKA|ROA|SCA)[A-Z0-9]{16}"
            r"(?![A-Z0-9])"), ph, v,
          ("akia", "asia", "abia", "acca", "agpa", "aida", "aipa", "anpa", "anva", "apka", "aroa",
           "asca")),
        d("aws_secret_access_key", "secret", rx(
            r"[AaSs](?i:ws[_ \-]?secret[_ \-]?(?:access[_ \-]?)?key|ecret[_ \-]?access[_ \-]?key)"
            r"[\"']?(?:[ \t]*\[[^\]\n]{0,20}\])?(?:\s*[:=]\s*|[ \t]+(?:is[ \t]+)?)"
            r"[\"']?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"), ph, 95, ("secret",)),
        g("github_token", "secret", rx(
            r"g(?<!" + _PB + r"g)(?:h[pousr]_[A-Za-z0-9]{36,255}|ithub_pat_[A-Za-z0-9_]{50,255})"
            + _R), ph, v, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
        g("gitlab_token", "secret", rx(
            r"[gG](?<!" + _PB + r"[gG])(?:l(?:pat|dt|rt|ptt|soat|cbt|ft|imt|oas)-"
            r"[A-Za-z0-9_\-]{20,}|R1348941[A-Za-z0-9_\-]{20,})" + _R), ph, v,
          ("glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "glcbt-", "glft-", "glimt-", "gloas-",
           "gr1348941")),
        g("anthropic_api_key", "secret", _tok(
            "sk-ant-", r"(?:api|admin|oat|ort|sid)\d{2}-[A-Za-z0-9_\-]{32,}"), ph, v, ("sk-ant-",)),
        g("openai_api_key", "secret", _tok(
            "sk-", r"(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{40,}"
            r"|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|(?!ant-)[A-Za-z0-9]{32,})"), mixed, v - 1,
          ("sk-",)),
        g("stripe_secret_key", "secret", rx(
            r"[sr](?<!" + _PB + r"[sr])k_(?:live|test)_[A-Za-z0-9]{20,}" + _R), mixed, v,
          ("k_live_", "k_test_")),
        d("stripe_webhook_secret", "secret", _tok("whsec_", r"[A-Za-z0-9+/=]{24,}"), ph, v,
          ("whsec_",)),
        d("slack_token", "secret", rx(
            r"x(?<![A-Za-z0-9]x)(?:ox[abposre]-[A-Za-z0-9\-]{10,}|oxe\.xox[bp]-[A-Za-z0-9\-]{10,}"
            r"|app-\d-[A-Za-z0-9\-]{10,})"), mixed, v, ("xox", "xapp-")),
        d("slack_webhook_url", "secret", rx(
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,}"),
          ph, v, ("hooks.slack.com",)),
        g("discord_webhook_url", "secret", rx(
            r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d{5,30}/"
            r"[A-Za-z0-9_\-]{30,}"), ph, v, ("/api/webhooks/",)),
        g("google_api_key", "secret", _tok("AIza", r"[0-9A-Za-z_\-]{35}"), ph, v, ("aiza",)),
        g("google_oauth_client_secret", "secret", _tok("GOCSPX-", r"[A-Za-z0-9_\-]{28}"), ph, v,
          ("gocspx-",)),
        g("sendgrid_api_key", "secret", _tok(
            r"SG\.", r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"), ph, v, ("sg.",)),
        g("twilio_api_key", "secret", rx(r"SK(?<![A-Za-z0-9]SK)[0-9a-f]{32}(?![A-Za-z0-9])"),
          ph, v, ("sk",)),
        g("npm_token", "secret", _tok("npm_", r"[A-Za-z0-9]{36}"), mixed, v, ("npm_",)),
        g("pypi_token", "secret", _tok(
            "pypi-", r"AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{50,}"), ph, v,
          ("pypi-",)),
        g("huggingface_token", "secret", _tok("hf_", r"[A-Za-z]{34,40}"), ph, v, ("hf_",)),
        g("digitalocean_token", "secret", rx(
            r"do(?<!" + _PB + r"do)[opr]_v1_[a-f0-9]{64}" + _R), ph, v, ("_v1_",)),
        g("shopify_token", "secret", _tok("shp", r"(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"), ph, v,
          ("shpat_", "shpca_", "shppa_", "shpss_")),
        g("databricks_token", "secret", _tok("dapi", r"[a-f0-9]{32}(?:-\d)?"), ph, v, ("dapi",)),
        g("hashicorp_vault_token", "secret", _tok("hv", r"[sbr]\.[A-Za-z0-9_\-]{24,}"), mixed, v,
          ("hvs.", "hvb.", "hvr.")),
        g("age_secret_key", "secret", rx(
            r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"), None, v,
          ("age-secret-key-1",)),
        g("telegram_bot_token", "secret", rx(r":AA(?<=\d:AA)[A-Za-z0-9_\-]{33}" + _R),
          _telegram, v, (":aa",)),
        g("mailgun_api_key", "secret", _tok("key-", r"[0-9a-f]{32}"), ph, v, ("key-",)),
        d("azure_storage_key", "secret", rx(
            r"[AaSs](?i:ccountKey|haredAccessKey)\s*=\s*(?P<secret>[A-Za-z0-9+/]{30,100}={0,2})"),
          ph, v, ("accountkey", "sharedaccesskey")),
        # starts at the padding (a literal) and looks back over the 86 key characters
        d("azure_storage_key", "secret", rx(r"==(?<=[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])"),
          _azure_bare_key, v - 5, ("==",)),
        d("azure_sas_token", "secret", rx(
            r"sig=(?P<secret>[A-Za-z0-9%+/]{30,200}={0,2})(?![A-Za-z0-9%+/=])"), _sas_signature,
          v, ("sig=",)),
        d("azure_client_secret", "secret", rx(
            r"[A-Za-z0-9_~.\-](?<![A-Za-z0-9_~.\-][A-Za-z0-9_~.\-])[A-Za-z0-9_~.\-]{2}\dQ~"
            r"[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])"), mixed, v, ("q~",)),
        # starts at the first dot (a literal the engine can skip to); the locator walks back
        g("discord_bot_token", "secret", rx(
            r"\.(?<=[A-Za-z0-9_\-]{23}\.)[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}" + _R),
          _discord_bot, v, (".",)),
        g("square_token", "secret", _tok("EAAA", r"[A-Za-z0-9_\-]{56,64}"), mixed, v, ("eaaa",)),
        g("square_token", "secret", _tok("sq0", r"(?:atp|csp)-[A-Za-z0-9_\-]{22,43}"), mixed, v,
          ("sq0atp-", "sq0csp-")),
        g("braintree_token", "secret", rx(
            r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}"), None, v,
          ("access_token$",)),
        g("okta_token", "secret", rx(r"SSWS[ \t]+(?P<secret>00[A-Za-z0-9_\-]{40})" + _R), ph, v,
          ("ssws",)),
        d("atlassian_token", "secret", _tok("ATATT3", r"[A-Za-z0-9_\-=]{150,}"), ph, v,
          ("atatt3",)),
        g("linear_api_key", "secret", _tok("lin_api_", r"[A-Za-z0-9]{40}"), mixed, v,
          ("lin_api_",)),
        g("notion_token", "secret", rx(
            r"(?:secret_(?<!" + _PB + r"secret_)[A-Za-z0-9]{43}|ntn_(?<!" + _PB
            + r"ntn_)[A-Za-z0-9]{46})" + _R), mixed, v, ("secret_", "ntn_")),
        g("heroku_api_key", "secret", _tok("HRKU-", r"[A-Za-z0-9_\-]{40,}"), ph, v, ("hrku-",)),
        g("firebase_fcm_key", "secret", rx(
            r"AAAA(?<!" + _PB + r"AAAA)[A-Za-z0-9_\-]{7}:APA91b[A-Za-z0-9_\-]{100,}" + _R), ph, v,
          (":apa91b",)),
        g("sentry_dsn", "secret", rx(
            r"https?://(?P<secret>[0-9a-f]{32})(?::[0-9a-f]{32})?@(?P<host>[A-Za-z0-9.\-]+)"),
          _sentry_dsn, v, ("sentry",)),
        d("sentry_dsn", "secret", _tok("sntry", r"[su]_[A-Za-z0-9_\-=+/]{40,}"), ph, v,
          ("sntrys_", "sntryu_")),
        d("grafana_token", "secret", rx(
            r"gl(?<!" + _PB + r"gl)(?:sa_[A-Za-z0-9]{32}_[0-9a-f]{8}|c_[A-Za-z0-9+/=]{32,400})"
            + _R), mixed, v, ("glsa_", "glc_")),
        g("doppler_token", "secret", _tok(
            r"dp\.", r"(?:st|ct|sa|scim|audit)\.(?:[a-z0-9\-_]{2,35}\.)?[A-Za-z0-9]{40,44}"), mixed,
          v, ("dp.",)),
        g("postman_api_key", "secret", _tok("PMAK-", r"[0-9a-f]{24}-[0-9a-f]{34}"), ph, v,
          ("pmak-",)),
        g("newrelic_api_key", "secret", _tok("NRAK-", r"[A-Z0-9]{27}"), mixed, v, ("nrak-",)),
        g("pulumi_token", "secret", _tok("pul-", r"[0-9a-f]{40}"), mixed, v, ("pul-",)),
        d("private_key", "secret", rx(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]{0,20000}?"
            r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=\s:,.\-]"
            r"|\\[nr])*)"), None, v, ("private key",)),
        d("private_key", "secret", rx(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{40,}={0,2}"),
          _encoded_private_key, v, ("ls0tls1crudjti",)),
        d("jwt", "secret", rx(
            r"eyJ(?<!" + _PB + r"eyJ)[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
          _jwt, 90, ("eyj",)),
        d("basic_auth", "secret", rx(
            r"Basic(?<!\wBasic)\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"),
          _basic_auth, 85, ("basic",)),
        d("basic_auth", "secret", rx(
            r"\"auth\"\s*:\s*\"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})\""), _basic_auth, 85,
          ('"auth"',)),
        d("basic_auth", "secret", rx(
            r"(?:curl|wget|http)\b[^\n|;&]*?[ \t](?:-u|--user)(?:[ \t]+|=)[\"']?[^\s:'\"]+:"
            r"(?P<secret>[^\s'\"]+)"), _cli_password, 85, ("-u",)),
        d("url_credentials", "secret", rx(
            r"://[^\s:/@'\"<>]*:(?P<secret>[^\s@/'\"<>]+)@(?=[^\s/@'\"<>]*[A-Za-z0-9])"),
          _url_password, 80, ("://",)),
        d("connection_string_password", "secret", rx(
            r"[Pp](?i:assword|wd)\s*=\s*(?P<secret>[^;\"'\r\n]+)"),
          _at_word_start(_connection_password), 75, ("password", "pwd")),
        d("bearer_token", "secret", rx(
            r"[BbAa](?i:earer(?:[ \t]+token)?(?:[ \t]*[:=]|[ \t]+is)?"
            r"|uthorization\s*[:=]\s*[\"']?(?:token|bot|ssws))\s+"
            r"(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)"), _at_word_start(_bearer_locator(threshold)),
          70, ("bearer", "authorization")),
        d("password_assignment", "secret", rx(
            r"[Pp_](?i:assword|asswd|assphrase|wd|pass)(?P<key>[A-Za-z0-9_\-]*)" + _SEP + _VALUE),
          _password_assignment, 60, ("pass", "pwd")),
        d("password_assignment", "secret", rx(
            r"[Pp](?i:assword|asscode|assphrase)\s+(?:is|was)\s+" + _VALUE),
          _at_word_start(_password_prose), 60, ("pass",)),
        # command-line flags: `--password hunter2`, `--db-password=...` is covered above
        d("password_assignment", "secret", rx(
            r"--(?:[a-z]+-)*(?i:password|passwd|pass|pwd)[ \t]+" + _VALUE), _password_value, 60,
          ("--",)),
        # mysql/mysqldump/mysqladmin take the password glued to -p
        d("password_assignment", "secret", rx(
            r"mysql(?:dump|admin|import|show)?\b[^\n|;&]*?[ \t]-p(?P<secret>[^\s'\"-][^\s'\"]*"
            r"|'[^'\n]+'|\"[^\"\n]+\")"), _mysql_password, 60, ("mysql",)),
        # `redis-cli -a X`, `docker login -p X`, `sshpass -p X`: the flag, then the tool before it
        d("password_assignment", "secret", rx(
            r"[ \t]-(?:a|p|-pass(?:word)?)(?:[ \t]+|=)(?P<secret>[^\s'\"-][^\s'\"]*"
            r"|'[^'\n]+'|\"[^\"\n]+\")"), _tool_password, 60, ("-a", "-p")),
        d("generic_secret", "secret", rx(
            r"[SsTtKkCcPp](?i:ecret|oken|ey|redential|assphrase)(?P<key>[A-Za-z0-9_\-]*)" + _SEP
            + _VALUE), _generic_locator(threshold), 50,
          ("secret", "token", "key", "credential", "passphrase")),
        d("generic_secret", "secret", rx(
            r"--(?P<key>(?:[a-z0-9]+-)*(?:key|token|secret|apikey|credentials?))[ \t]+" + _VALUE),
          _flag_secret(threshold), 50, ("--",)),
        d("generic_secret", "secret", rx(
            r"variable\s+\"(?P<name>[\w\-]+)\"\s*\{[^}]{0,300}?\bdefault\s*=\s*"
            r"\"(?P<secret>[^\"\n]{1,400})\""), _terraform_variable(threshold), 55,
          ("variable",)),
        d("secret_in_prose", "secret", rx(
            r"[TtKkSsCc](?i:oken|ey|ecret|redentials?)(?=[\s:=;,)\"'])"),
          _prose_secret(threshold), 45, ("token", "key", "secret", "credential")),
        # --- personal data
        d("iban", "pii", rx(
            r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?"
            r"(?![A-Za-z0-9])"), _iban, 40, _DIGITS),
        d("payment_card", "pii", rx(r"\d(?<![\w\-.+]\d)(?:[ \-]?\d){12,18}(?!\w)"), _card, 35,
          _DIGITS),
        d("email", "pii", rx(
            r"@(?<=[A-Za-z0-9_%+\-]@)(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+"
            r"(?P<tld>[A-Za-z]{2,24})(?![A-Za-z0-9\-]|\.[A-Za-z0-9]|:[\w~/])"), _email, 30, ("@",)),
        d("phone", "pii", rx(
            r"\+(?<![\w+.\-/]\+)(?:\d{1,3}(?:[ .\-]\(?\d{1,8}\)?|[ ]?\(\d{1,5}\)){1,6}|\d{8,15})"
            r"(?![\w\-]|[.+]\d)"), _phone, 20, ("+",)),
        d("phone", "pii", rx(
            r"[(2-9](?<![\w+.\-/(][(2-9])(?:(?<=\()[2-9]\d{2}\) ?|(?<=[2-9])\d{2}[ .\-])"
            r"[2-9]\d{2}[ .\-]\d{4}(?!\d|[.\-]\d)"), _phone, 20, _DIGITS),
        d("phone", "pii", rx(r"0(?<![\w.+\-/]0)\d{1,4}(?:[ .\-/]?\d{2,8}){1,4}(?!\d)"),
          _phone_with_context, 20, ("0",)),
    ]


BUILTIN_DETECTORS: tuple[str, ...] = tuple(
    sorted({det.name for det in _builtin_detectors(DEFAULT_ENTROPY_THRESHOLD)})
)
"""Names of the built-in detectors (usable in ``disabled``)."""


# --------------------------------------------------------------------------- scanner

_LONG_TOKEN_RUN = re.compile(r"[A-Za-z0-9_\-]{20}")


def _merge(found: list[tuple[Detector, int, int]]) -> list[Finding]:
    """Cluster overlapping spans; the highest-priority detector names the union."""
    out: list[Finding] = []
    found.sort(key=lambda f: (f[1], f[2]))
    cluster: list[tuple[Detector, int, int]] = []
    end = -1

    def flush() -> None:
        if cluster:
            best = max(cluster, key=lambda f: (f[0].priority, f[2] - f[1]))
            out.append(Finding(best[0].name, best[0].kind, cluster[0][1],
                               max(f[2] for f in cluster)))

    for item in found:
        if item[1] >= end:
            flush()
            cluster = [item]
        else:
            cluster.append(item)
        end = max(end, item[2])
    flush()
    return out


class SensitivityScanner:
    """A configured set of detectors.

    ``extra_patterns`` maps a detector name to a regular expression (a string
    or compiled); a named group ``secret`` narrows the span. Extra patterns
    are secrets and win overlaps against the generic detectors.
    ``extra_detectors`` adds fully specified :class:`Detector` objects.
    ``disabled`` names built-in detectors to switch off. ``entropy_threshold``
    applies to the generic and bearer detectors. ``detect_pii=False`` turns
    every PII detector off. ``prefilter=False`` runs every pattern on every
    text (the same findings, slower; it exists so tests can prove that).
    """

    def __init__(
        self,
        *,
        extra_patterns: Mapping[str, str | re.Pattern[str]] | None = None,
        extra_detectors: Iterable[Detector] = (),
        disabled: Iterable[str] = (),
        entropy_threshold: float = DEFAULT_ENTROPY_THRESHOLD,
        detect_pii: bool = True,
        prefilter: bool = True,
    ) -> None:
        if not 0.0 <= entropy_threshold <= 8.0:
            raise ConfigError(
                f"entropy_threshold must be within 0..8 bits, not {entropy_threshold}")
        off = set(disabled)
        unknown = off - set(BUILTIN_DETECTORS)
        if unknown:
            raise ConfigError(f"unknown detectors to disable: {', '.join(sorted(unknown))}",
                              hint="see memstrata.sensitivity.BUILTIN_DETECTORS")
        detectors = [det for det in _builtin_detectors(entropy_threshold)
                     if det.name not in off and (detect_pii or det.kind != "pii")]
        for name, pattern in (extra_patterns or {}).items():
            try:
                compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
            except re.error as exc:
                raise ConfigError(f"extra pattern {name!r} is not a valid regex: {exc}") from exc
            detectors.append(Detector(name, "secret", compiled, None, 95))
        detectors.extend(extra_detectors)
        self._detectors: tuple[Detector, ...] = tuple(detectors)
        self._prefilter = prefilter
        self.entropy_threshold = entropy_threshold

    @property
    def detector_names(self) -> tuple[str, ...]:
        """Sorted names of the active detectors."""
        return tuple(sorted({det.name for det in self._detectors}))

    def scan(self, text: str) -> ScanReport:
        """Find secrets and personal data in ``text``."""
        secrets: list[tuple[Detector, int, int]] = []
        pii: list[tuple[Detector, int, int]] = []
        lowered = text.lower()
        long_run = _LONG_TOKEN_RUN.search(text) is not None
        for det in self._detectors:
            if not self._prefilter or ((long_run or not det.long_token) and det.applies(lowered)):
                bucket = secrets if det.kind == "secret" else pii
                bucket.extend((det, s, e) for s, e in det.spans(text))
        merged = _merge(secrets)
        pii = [p for p in pii if not any(p[1] < f.end and f.start < p[2] for f in merged)]
        merged.extend(_merge(pii))
        merged.sort(key=lambda f: f.start)
        return ScanReport(tuple(merged))

    def redact(self, text: str, report: ScanReport | None = None, *,
               redact_pii: bool = False) -> str:
        """``text`` with secret spans (and PII spans if asked) replaced by a marker."""
        report = self.scan(text) if report is None else report
        out = text
        for f in sorted(report.findings, key=lambda f: f.start, reverse=True):
            if f.kind == "secret" or redact_pii:
                out = out[:f.start] + f"[REDACTED:{f.detector}]" + out[f.end:]
        return out


_DEFAULT = SensitivityScanner()


def scan(text: str) -> ScanReport:
    """Scan ``text`` with the default scanner."""
    return _DEFAULT.scan(text)


def redact(text: str, report: ScanReport | None = None, *, redact_pii: bool = False) -> str:
    """Redact ``text`` with the default scanner (``report`` must come from scanning ``text``)."""
    return _DEFAULT.redact(text, report, redact_pii=redact_pii)


__all__ = [
    "BUILTIN_DETECTORS",
    "DEFAULT_ENTROPY_THRESHOLD",
    "Detector",
    "Finding",
    "Kind",
    "ScanReport",
    "SensitivityScanner",
    "iban_valid",
    "is_placeholder",
    "luhn_valid",
    "redact",
    "scan",
    "shannon_entropy",
]
