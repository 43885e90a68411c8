"""What a candidate secret value and its key name look like: the checks of the scanner.

Pure functions and word lists, no state, used by the locators of
:mod:`memstrata.governance.sensitivity`: Shannon entropy, Luhn and IBAN checksums,
documentation placeholders (``sk-...``, ``<token>``, ``${VAR}``, runs of ``x``), names and
identifiers (``db_password``, ``refreshToken``), code (``getpass()``, ``self.password``),
paths, base64 that decodes to text, whether a value looks randomly generated, and which
key names are secret-named (``api_key``, ``client_secret``) or merely describe a secret
(``key_id``, ``token_hash``).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import re
from collections import Counter


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
IBAN_LENGTHS = {
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
    if IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


_PLACEHOLDER_RE = re.compile(
    r"(.)\1{5,}|\.\.\.|…|<[^<>]*>|\$\{|\{\{|\{%|%\([A-Za-z_]\w*\)[sdr]|^\$[A-Z_][A-Z0-9_]*$"
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


NAME_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
VOWELS = frozenset("aeiouAEIOU")
_CONSONANT_RUN = re.compile(r"[^aeiouAEIOU]{4}")


def _is_word(part: str) -> bool:
    """A pronounceable word: 3-14 letters, a quarter of them vowels, no four consonants in a row."""
    if not 3 <= len(part) <= 14 or _CONSONANT_RUN.search(part.lower().replace("y", "a")):
        return False
    return sum(c in VOWELS for c in part) * 4 >= len(part)


def is_identifier(value: str) -> bool:
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
    parts = [p for chunk in value.split("_") for p in NAME_PART.findall(chunk.capitalize()
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


def is_code(value: str, *, quoted: bool = False) -> bool:
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
    raw = b64decode(value.rstrip("="), urlsafe="-" in value or "_" in value)
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
                or is_identifier(plain.strip("_") or "x")):
            return False
    if value.startswith(("/", "~", "./", "../")):
        return True
    return re.search(r"\.[a-z]{1,5}$", value) is not None


def looks_random(value: str, threshold: float, *, quoted: bool = False) -> bool:
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
        elif len(value) < 20 or not set(value) <= _NO_DIGIT_CHARS or is_wordy(
                value.replace("/", "-").replace("+", "-")) or not (
                value.lower() != value != value.upper() or
                len(set(value) & _GENERATED_MARKS) >= 2):
            return False
        threshold = max(threshold, 3.5)
    if "://" in value or _EMAIL_LIKE.search(value) or _is_path(value):
        return False
    if re.match(r"v?\d+(\.\d+)+", value) or is_code(value, quoted=quoted) or \
            is_identifier(value):
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
DESCRIPTOR_WORDS = frozenset({
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


def is_secret_key(key: str) -> bool:
    words = _key_words(key)
    if not words or words[-1] in DESCRIPTOR_WORDS or _NOT_SECRET_WORDS.intersection(words):
        return False
    for i in range(len(words) - 1, -1, -1):
        w = words[i]
        noun = w in _SECRET_WORDS or w.endswith(("apikey", "secret")) or (
            w == "key" and i > 0 and words[i - 1] in _KEY_QUALIFIERS)
        if noun:
            return all(t in _TRAILING_OK or t.isdigit() for t in words[i + 1:])
    return False


def is_password_key(key: str) -> bool:
    words = _key_words(key)
    if not words or words[-1] in DESCRIPTOR_WORDS:
        return False
    return words[-1] in _PASSWORD_WORDS or words[-1].endswith("password")


def b64decode(segment: str, *, urlsafe: bool) -> bytes | None:
    padded = segment + "=" * (-len(segment) % 4)
    try:
        if urlsafe:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None


def is_wordy(value: str) -> bool:
    """``base64url-encoded``, ``prod-reader-2024``: words joined by ``-``/``_``/``.``, a name."""
    parts = [p for chunk in re.split(r"[-_.]", value) for p in NAME_PART.findall(chunk)]
    if "".join(parts) != re.sub(r"[-_.]", "", value):
        return False
    words = [p for p in parts if not p.isdigit()]
    return (len(parts) - len(words) <= 1 and len(words) >= 2 and
            all(len(w) >= 3 and any(c in VOWELS for c in w) for w in words))


__all__ = [
    "DESCRIPTOR_WORDS",
    "IBAN_LENGTHS",
    "NAME_PART",
    "VOWELS",
    "b64decode",
    "iban_valid",
    "is_code",
    "is_identifier",
    "is_password_key",
    "is_placeholder",
    "is_secret_key",
    "is_wordy",
    "looks_random",
    "luhn_valid",
    "shannon_entropy",
]
