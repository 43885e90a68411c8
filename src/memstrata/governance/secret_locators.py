"""Locators of the secret scanner: where, in a match, the secret value is (or none).

A detector of :mod:`memstrata.governance.sensitivity` is a pattern and, optionally, a
locator: a function from the pattern's match to the span of the value to report, or
``None`` when the match is not a secret after all (a placeholder, a name, code, a
checksum that fails, a word in prose). The checks they apply are in
:mod:`memstrata.governance.secret_values`. Pure functions, no state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from .secret_values import (
    DESCRIPTOR_WORDS,
    b64decode,
    is_code,
    is_identifier,
    is_password_key,
    is_placeholder,
    is_secret_key,
    is_wordy,
    looks_random,
)

Locator = Callable[[re.Match[str]], "tuple[int, int] | None"]


_TRAILING_PUNCT = ".,;:!?)]}>"
# One value after a separator: the inside of quotes, or a bare token.
VALUE = (
    r"""["'`]?(?P<secret>(?<=")[^"\r\n]{1,400}(?=")|(?<=')[^'\r\n]{1,400}(?=')"""
    r"""|(?<=`)[^`\r\n]{1,400}(?=`)|(?<!["'`])[^\s"'`,;]{1,400})"""
)
SEP = r"""["']?[ \t]*(?::=|=>|=|:)[ \t]*"""


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


def not_placeholder(m: re.Match[str]) -> tuple[int, int] | None:
    span = m.span("secret") if "secret" in m.re.groupindex else m.span()
    return None if is_placeholder(m.string[span[0]:span[1]]) else span


def mixed_token(m: re.Match[str]) -> tuple[int, int] | None:
    """A vendor token whose body must mix letters and digits (guards short generic prefixes)."""
    value = m.group(0)
    if is_placeholder(value) or not any(c.isdigit() for c in value[3:]):
        return None
    return m.span()


def generated_token(m: re.Match[str]) -> tuple[int, int] | None:
    """A vendor token whose body (after its last ``_``) is generated: letters and digits,
    or letters of both cases that read as no word (a Stripe or npm key may hold no digit:
    about 1 in 70 random 24-character bodies)."""
    value = m.group(0)
    body = value.rsplit("_", 1)[-1]
    if is_placeholder(value):
        return None
    if any(c.isdigit() for c in body) and any(c.isalpha() for c in body):
        return m.span()
    if body.lower() != body != body.upper() and not is_wordy(body):
        return m.span()
    return None


def password_value(m: re.Match[str]) -> tuple[int, int] | None:
    value, start, end, quoted = _value_span(m)
    core = value.strip()
    if len(core) < 6 or is_placeholder(core):
        return None
    if is_identifier(core) and not any(c.isdigit() for c in core):
        return None  # a type or field name: SecretStr, challengePassword
    if quoted:
        words = core.split()
        if len(words) > 1 and all(w.isalpha() for w in words):
            return None  # prose, e.g. a UI label "Mot de passe"
        return start, end
    if is_code(core):
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


def mysql_password(m: re.Match[str]) -> tuple[int, int] | None:
    start, end = m.span("secret")
    if m.string[start] in "'\"":
        start, end = start + 1, end - 1  # keep the quotes, redact what they hold
    value = m.string[start:end]
    return None if len(value) < 4 or is_placeholder(value) else (start, end)


def password_assignment(m: re.Match[str]) -> tuple[int, int] | None:
    return password_value(m) if is_password_key(_key(m)) else None


def password_prose(m: re.Match[str]) -> tuple[int, int] | None:
    value = _value_span(m)[0]
    if not (any(c.isdigit() for c in value) or re.search(r"[^\w\s]", value)):
        return None  # "the password is incorrect"
    return password_value(m)


def generic_locator(threshold: float) -> Locator:
    def locate(m: re.Match[str]) -> tuple[int, int] | None:
        if not is_secret_key(_key(m)):
            return None
        value, start, end, quoted = _value_span(m)
        return (start, end) if looks_random(value, threshold, quoted=quoted) else None

    return locate


def bearer_locator(threshold: float) -> Locator:
    def locate(m: re.Match[str]) -> tuple[int, int] | None:
        return m.span("secret") if looks_random(m.group("secret"), threshold) else None

    return locate


def jwt(m: re.Match[str]) -> tuple[int, int] | None:
    raw = b64decode(m.group(0).split(".", 1)[0], urlsafe=True)
    try:
        header = json.loads(raw) if raw else None
    except ValueError:
        return None
    return m.span() if isinstance(header, dict) and "alg" in header else None


def basic_auth(m: re.Match[str]) -> tuple[int, int] | None:
    raw = b64decode(m.group("secret"), urlsafe=False)
    try:
        decoded = raw.decode("utf-8") if raw else ""
    except UnicodeDecodeError:
        return None
    user, sep, password = decoded.partition(":")
    if not sep or not user or not password or not decoded.isprintable():
        return None
    return None if is_placeholder(password) else m.span("secret")


def url_password(m: re.Match[str]) -> tuple[int, int] | None:
    if re.search(r"[\[\]{}]", m.group("secret")):
        return None  # brackets are not allowed unencoded in userinfo: a syntax diagram
    return not_placeholder(m)


# ADO.NET/ODBC/Npgsql style: `Key=value;` pairs, one of them naming the server or user.
_CONN_CONTEXT = re.compile(
    r"(?i)(?:server|data source|host|uid|user id|username|database|initial catalog|driver)"
    r"\s*=[^;\r\n]*;"
)


def connection_password(m: re.Match[str]) -> tuple[int, int] | None:
    text = m.string
    window = text[max(0, m.start() - 300):m.end() + 50]
    if not _CONN_CONTEXT.search(window):
        return None
    start, end = m.span("secret")
    while end > start and text[end - 1] in " \t":
        end -= 1
    return None if is_placeholder(text[start:end]) else (start, end)


def telegram(m: re.Match[str]) -> tuple[int, int] | None:
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


_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def discord_bot(m: re.Match[str]) -> tuple[int, int] | None:
    """``<base64 of the bot's numeric id>.<timestamp>.<hmac>``: the first part must decode to it.

    The pattern starts at the first dot; walk back over the id part (23-28 characters).
    """
    text, start = m.string, m.start()
    while start > 0 and m.start() - start <= 28 and text[start - 1] in _TOKEN_CHARS:
        start -= 1
    if not 23 <= m.start() - start <= 28 or (start > 0 and text[start - 1] in _TOKEN_CHARS):
        return None
    raw = b64decode(text[start:m.start()], urlsafe=True)
    if raw is None or not raw.isdigit() or not 17 <= len(raw) <= 20:
        return None
    return None if is_placeholder(text[start:m.end()]) else (start, m.end())


# A SAS signature is recognised by the other SAS fields (or the word) before it.
_SAS_CONTEXT = re.compile(r"(?i)[?&\s]s[vperp]=|\bsas\b|\.windows\.net|\bsr=|\bspr=")


def sas_signature(m: re.Match[str]) -> tuple[int, int] | None:
    value = m.group("secret")
    if not _SAS_CONTEXT.search(m.string[max(0, m.start() - 400):m.start()]):
        return None
    if not (any(c.isalpha() for c in value) and any(c.isdigit() for c in value)):
        return None
    return not_placeholder(m)


_ACCOUNT_KEY_CONTEXT = re.compile(r"(?i)account[ _\-]?key|storage[ _\-]?key|\bkey[12]\b|azure")


def azure_bare_key(m: re.Match[str]) -> tuple[int, int] | None:
    """A bare 64-byte base64 key (88 characters with ``==``) right after an account-key name."""
    text, start = m.string, m.start() - 86
    if start > 0 and text[start - 1] in _B64_CHARS:
        return None
    if not _ACCOUNT_KEY_CONTEXT.search(text[max(0, start - 80):start]):
        return None
    return None if is_placeholder(text[start:m.end()]) else (start, m.end())


_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_")


def encoded_private_key(m: re.Match[str]) -> tuple[int, int] | None:
    """Base64 of a PEM private key (a Kubernetes ``tls.key``): the decoded head says so."""
    head = m.group(0)[:96]
    raw = b64decode(head[:len(head) - len(head) % 4], urlsafe=False)
    return m.span() if raw is not None and b"PRIVATE KEY" in raw[:60] else None


_CLI_WITH_PASSWORD = re.compile(
    r"(?:redis-cli|sshpass|(?:docker|podman|buildah|skopeo|helm[ \t]+registry)[ \t]+login)\b"
    r"[^\n|;&]*$")


def cli_password(m: re.Match[str]) -> tuple[int, int] | None:
    """A password given on a command line (quotes kept; ``$VAR`` and code are not one)."""
    start, end = m.span("secret")
    if m.string[start] in "'\"":
        start, end = start + 1, end - 1
    value = m.string[start:end]
    if len(value) < 4 or is_placeholder(value) or value.startswith("$") or is_code(value):
        return None
    return start, end


def tool_password(m: re.Match[str]) -> tuple[int, int] | None:
    """``-a``/``-p``/``--password`` counts only after a tool that takes a password there."""
    text = m.string
    # the tool is at most a few hundred characters before its flag (a bounded look back,
    # so a long line of flags costs linear time)
    begin = max(text.rfind("\n", 0, m.start()) + 1, m.start() - 300)
    return cli_password(m) if _CLI_WITH_PASSWORD.search(text, begin, m.start()) else None


def sentry_dsn(m: re.Match[str]) -> tuple[int, int] | None:
    host = m.group("host").lower()
    return m.span("secret") if "sentry" in host else None


def terraform_variable(threshold: float) -> Locator:
    """``variable "db_password" { default = "..." }``: the default of a secret-named variable."""
    def locate(m: re.Match[str]) -> tuple[int, int] | None:
        name, value = m.group("name"), m.group("secret")
        if is_password_key(name):
            ok = len(value) >= 6 and not is_placeholder(value)
        else:
            ok = is_secret_key(name) and looks_random(value, threshold, quoted=True)
        return m.span("secret") if ok else None

    return locate


def flag_secret(threshold: float) -> Locator:
    """``--client-secret VALUE``, ``--account-key VALUE``: a secret-named flag, a random value."""
    def locate(m: re.Match[str]) -> tuple[int, int] | None:
        if not is_secret_key(m.group("key")):
            return None
        value, start, end, quoted = _value_span(m)
        return (start, end) if looks_random(value, threshold, quoted=quoted) else None

    return locate


# Words before any secret noun that make it something else (``page token``, ``public key``).
_NOT_CREDENTIAL = frozenset({"public", "publishable", "page", "next", "continuation", "cursor"})
# Words before "key" that make it a database or data-structure key, not a credential.
_NOT_CREDENTIAL_KEYS = _NOT_CREDENTIAL | frozenset({
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
}) | DESCRIPTOR_WORDS
_PROSE_STRIP = "\"'`([{<"
_HEX_RE = re.compile(r"[0-9a-fA-F]+")
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


_PROSE_CANDIDATE = re.compile(r"[A-Za-z0-9+/=_\-.~%]{16}")


def prose_secret(threshold: float) -> Locator:
    """``the bot token for the alerts bot: X``, ``my key is X``: a secret noun, words, a value.

    The value is the first word after the noun, on its line and within 160 characters,
    that looks random (the same test as the generic detector), unless a word such as
    ``id``, ``hash`` or ``fingerprint`` comes first. A word before the noun may say it is
    no credential: ``page``/``public``/``cursor`` for any noun, and data-structure words
    (``primary``, ``cache``, ``deploy``, ``registry``...) before ``key``. Git SHAs and
    digests (40/64 hex), short hex key ids and bare UUIDs are not taken from prose (only
    after "api key"/"api token").
    """
    def locate(m: re.Match[str]) -> tuple[int, int] | None:
        text = m.string
        if not word_start(m):
            return None
        before = text[max(0, m.start() - 24):m.start()].lower()
        previous = re.findall(r"[a-z0-9]+", before)
        noun = m.group(0).lower()
        stop = _NOT_CREDENTIAL_KEYS if re.search(r"\bkeys?\b", noun) else _NOT_CREDENTIAL
        if previous and previous[-1] in stop:
            return None
        pos, line_end = m.end(), text.find("\n", m.end())
        line_end = len(text) if line_end < 0 else line_end
        limit = min(line_end, pos + 160)
        quoted_key = _QUOTED_KEY.match(text, pos) if m.start() > 0 and \
            text[m.start() - 1] in "\"'" else None
        if quoted_key is not None:
            # a mapping's key ("key": "k", "lg": 1, "ns": ["5f7c..."]): its value is what
            # follows the colon, never an entry after it. A string is read to its closing
            # quote (a sentence in it too: "the new one is X"), an object or a list to the
            # end of the window ({"value": X}), a bare value (a number, true) alone
            value_at = quoted_key.end()
            opener = text[value_at:value_at + 1]
            pos = value_at - 1  # a word of the value never starts the window
            if opener and opener in "\"'":
                close = text.find(opener, value_at + 1, limit)
                limit = close if close >= 0 else limit
            elif not opener or opener not in "{[":
                value_word = re.compile(r"\S+").search(text, value_at, limit)
                limit = value_word.end() if value_word is not None else value_at
        if _PROSE_CANDIDATE.search(text, pos, limit) is None:
            return None  # nothing long enough to be a secret follows
        for word in re.finditer(r"\S+", text[pos:limit]):
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
            if word.start() > 0 and looks_random(value, threshold, quoted=quoted) and \
                    not is_wordy(value):
                hexlike = _HEX_RE.fullmatch(value) is not None
                if hexlike and (len(value) <= 20 or len(value) in (40, 64)):
                    return None
                if _UUID_RE.fullmatch(value) and (not previous or previous[-1] != "api"):
                    return None
                return start, end
            if word.start() > 80 or (raw.endswith((".", ";")) and len(raw) > 1 and
                                     not looks_random(raw[:-1], threshold)):
                return None  # the sentence ended
        return None

    return locate


#: The rest of a quoted mapping key after its noun: the closing quote and the colon.
_QUOTED_KEY = re.compile(r"[\"']\s*:\s*")


def word_start(m: re.Match[str]) -> bool:
    return m.start() == 0 or not (m.string[m.start() - 1].isalnum() or
                                  m.string[m.start() - 1] == "_")


__all__ = [
    "SEP",
    "VALUE",
    "Locator",
    "azure_bare_key",
    "basic_auth",
    "bearer_locator",
    "cli_password",
    "connection_password",
    "discord_bot",
    "encoded_private_key",
    "flag_secret",
    "generic_locator",
    "jwt",
    "mixed_token",
    "mysql_password",
    "not_placeholder",
    "password_assignment",
    "password_prose",
    "password_value",
    "prose_secret",
    "sas_signature",
    "sentry_dsn",
    "telegram",
    "terraform_variable",
    "tool_password",
    "url_password",
    "word_start",
]
