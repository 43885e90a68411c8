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
  ``secret``, ``credential``) is followed on its line (within 160 characters)
  by a random value (``the bot token for the alerts bot: X``, ``my bearer token is X``), unless
  a describing word (``id``, ``hash``, ``fingerprint``...) comes first or the
  noun is a data key (``primary key``, ``cache key``). Git SHAs and digests
  (40/64 hex), short hex key ids and UUIDs are not taken from prose.
* Passwords (``password=...``, ``"password": "..."``, ``the password is X``,
  ``docker login -p X``, ``redis-cli -a X``, ``curl -u user:X``) need no
  entropy: ``hunter2`` is a password. Words (``required``), code
  (``getpass()``, ``self.password``, ``db_password``) and placeholders are not.
* Sentence punctuation after a bare value is not part of it (``the password
  is Winter2024!`` redacts ``Winter2024``); quote a value to keep it whole.
  So is ``with password X``; ``PIN is 4821`` is a PIN. A key split by an
  invisible character or written in full-width letters is found in the folded
  text (``visible.folded``) and redacted in the text itself.

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

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError
from . import secret_locators as loc
from .secret_values import (
    iban_valid,
    is_placeholder,
    luhn_valid,
    shannon_entropy,
)
from .visible import folded

Kind = Literal["secret", "pii"]

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
    locate: loc.Locator | None = None
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


def _at_word_start(locate: loc.Locator) -> loc.Locator:
    def wrapped(m: re.Match[str]) -> tuple[int, int] | None:
        return locate(m) if loc.word_start(m) else None

    return wrapped


_DIGITS = tuple("0123456789")


def _builtin_detectors(threshold: float) -> list[Detector]:
    d, rx = Detector, re.compile
    g = functools.partial(Detector, long_token=True)
    v = 100  # vendor formats: the most specific
    ph, mixed, gen = loc.not_placeholder, loc.mixed_token, loc.generated_token
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
        # memstrata's own service keys (msk.<tenant, base64url>.<key id>.<secret>): one in
        # memory would let any reader of it call the service as that key
        g("memstrata_api_key", "secret", _tok(
            r"msk\.", r"[A-Za-z0-9_\-]{1,200}\.[0-9a-z]{26}\.[A-Za-z0-9_\-]{43}"), ph, v,
          ("msk.",)),
        g("anthropic_api_key", "secret", _tok(
            "sk-ant-", r"(?:api|admin|oat|ort|sid)\d{2}-[A-Za-z0-9_\-]{32,}"), ph, v, ("sk-ant-",)),
        g("openai_api_key", "secret", _tok(
            "sk-", r"(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{40,}"
            r"|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|(?!ant-)[A-Za-z0-9]{32,})"), mixed, v - 1,
          ("sk-",)),
        g("stripe_secret_key", "secret", rx(
            r"[sr](?<!" + _PB + r"[sr])k_(?:live|test)_[A-Za-z0-9]{20,}" + _R), gen, v,
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
        g("npm_token", "secret", _tok("npm_", r"[A-Za-z0-9]{36}"), gen, v, ("npm_",)),
        g("pypi_token", "secret", _tok(
            "pypi-", r"AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{50,}"), ph, v,
          ("pypi-",)),
        g("huggingface_token", "secret", _tok("hf_", r"[A-Za-z0-9]{34,40}"), gen, v, ("hf_",)),
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
          loc.telegram, v, (":aa",)),
        g("mailgun_api_key", "secret", _tok("key-", r"[0-9a-f]{32}"), ph, v, ("key-",)),
        d("azure_storage_key", "secret", rx(
            r"[AaSs](?i:ccountKey|haredAccessKey)\s*=\s*(?P<secret>[A-Za-z0-9+/]{30,100}={0,2})"),
          ph, v, ("accountkey", "sharedaccesskey")),
        # starts at the padding (a literal) and looks back over the 86 key characters
        d("azure_storage_key", "secret", rx(r"==(?<=[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])"),
          loc.azure_bare_key, v - 5, ("==",)),
        d("azure_sas_token", "secret", rx(
            r"sig=(?P<secret>[A-Za-z0-9%+/]{30,200}={0,2})(?![A-Za-z0-9%+/=])"), loc.sas_signature,
          v, ("sig=",)),
        d("azure_client_secret", "secret", rx(
            r"[A-Za-z0-9_~.\-](?<![A-Za-z0-9_~.\-][A-Za-z0-9_~.\-])[A-Za-z0-9_~.\-]{2}\dQ~"
            r"[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])"), mixed, v, ("q~",)),
        # starts at the first dot (a literal the engine can skip to); the locator walks back
        g("discord_bot_token", "secret", rx(
            r"\.(?<=[A-Za-z0-9_\-]{23}\.)[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}" + _R),
          loc.discord_bot, v, (".",)),
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
          loc.sentry_dsn, v, ("sentry",)),
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
          loc.encoded_private_key, v, ("ls0tls1crudjti",)),
        d("jwt", "secret", rx(
            r"eyJ(?<!" + _PB + r"eyJ)[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
          loc.jwt, 90, ("eyj",)),
        d("basic_auth", "secret", rx(
            r"Basic(?<!\wBasic)\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"),
          loc.basic_auth, 85, ("basic",)),
        d("basic_auth", "secret", rx(
            r"\"auth\"\s*:\s*\"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})\""), loc.basic_auth, 85,
          ('"auth"',)),
        d("basic_auth", "secret", rx(
            r"(?:curl|wget|http)\b[^\n|;&]{0,300}?[ \t](?:-u|--user)(?:[ \t]+|=)[\"']?"
            r"[^\s:'\"]{1,200}:(?P<secret>[^\s'\"]{1,400})"), loc.cli_password, 85, ("-u",)),
        d("url_credentials", "secret", rx(
            r"://[^\s:/@'\"<>]*:(?P<secret>[^\s@/'\"<>]+)@(?=[^\s/@'\"<>]*[A-Za-z0-9])"),
          loc.url_password, 80, ("://",)),
        d("connection_string_password", "secret", rx(
            r"[Pp](?i:assword|wd)\s*=\s*(?P<secret>[^;\"'\r\n]+)"),
          _at_word_start(loc.connection_password), 75, ("password", "pwd")),
        d("bearer_token", "secret", rx(
            r"[BbAa](?i:earer(?:[ \t]+token)?(?:[ \t]*[:=]|[ \t]+is)?"
            r"|uthorization\s*[:=]\s*[\"']?(?:token|bot|ssws))\s+"
            r"(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)"),
          _at_word_start(loc.bearer_locator(threshold)),
          70, ("bearer", "authorization")),
        d("password_assignment", "secret", rx(
            r"[Pp_](?i:assword|asswd|assphrase|wd|pass)(?P<key>[A-Za-z0-9_\-]*)" + loc.SEP
            + loc.VALUE),
          loc.password_assignment, 60, ("pass", "pwd")),
        d("password_assignment", "secret", rx(
            r"[Pp](?i:assword|asscode|assphrase)\s+(?:is|was)\s+" + loc.VALUE),
          _at_word_start(loc.password_prose), 60, ("pass",)),
        # `ssh root@host with password X`, `log in using the passphrase X`
        d("password_assignment", "secret", rx(
            r"[WwUu](?i:ith|sing)\s+(?:(?i:the|a|its|their|his|her|my)\s+)?"
            r"(?i:password|passcode|passphrase)\s+" + loc.VALUE),
          _at_word_start(loc.password_prose), 60, ("pass",)),
        # a card's or a phone's PIN, given as a number
        d("pin_code", "secret", rx(
            r"[Pp](?<![A-Za-z0-9][Pp])(?i:IN)(?:[ \t]+(?i:code|number))?(?:[ \t]+(?i:is|was)"
            r"|[ \t]*[:=])"
            r"[ \t]*(?P<secret>\d{4,8})(?![\d.,:/-]\d)(?!\d)"), None, 60, ("pin",)),
        # command-line flags: `--password hunter2`, `--db-password=...` is covered above
        d("password_assignment", "secret", rx(
            r"--(?:[a-z]+-)*(?i:password|passwd|pass|pwd)[ \t]+" + loc.VALUE),
          loc.password_value, 60,
          ("--",)),
        # mysql/mysqldump/mysqladmin take the password glued to -p
        d("password_assignment", "secret", rx(
            r"mysql(?:dump|admin|import|show)?\b[^\n|;&]{0,300}?[ \t]-p"
            r"(?P<secret>[^\s'\"-][^\s'\"]{0,400}|'[^'\n]{1,400}'|\"[^\"\n]{1,400}\")"),
          loc.mysql_password, 60, ("mysql",)),
        # `redis-cli -a X`, `docker login -p X`, `sshpass -p X`: the flag, then the tool before it
        d("password_assignment", "secret", rx(
            r"[ \t]-(?:a|p|-pass(?:word)?)(?:[ \t]+|=)(?P<secret>[^\s'\"-][^\s'\"]{0,400}"
            r"|'[^'\n]{1,400}'|\"[^\"\n]{1,400}\")"), loc.tool_password, 60, ("-a", "-p")),
        d("generic_secret", "secret", rx(
            r"[SsTtKkCcPp](?i:ecret|oken|ey|redential|assphrase)(?P<key>[A-Za-z0-9_\-]*)" + loc.SEP
            + loc.VALUE), loc.generic_locator(threshold), 50,
          ("secret", "token", "key", "credential", "passphrase")),
        d("generic_secret", "secret", rx(
            r"--(?P<key>(?:[a-z0-9]+-)*(?:key|token|secret|apikey|credentials?))[ \t]+"
            + loc.VALUE),
          loc.flag_secret(threshold), 50, ("--",)),
        d("generic_secret", "secret", rx(
            r"variable\s+\"(?P<name>[\w\-]+)\"\s*\{[^}]{0,300}?\bdefault\s*=\s*"
            r"\"(?P<secret>[^\"\n]{1,400})\""), loc.terraform_variable(threshold), 55,
          ("variable",)),
        d("secret_in_prose", "secret", rx(
            r"[TtKkSsCc](?i:oken|ey|ecret|redentials?)(?=[\s:=;,)\"'])"),
          loc.prose_secret(threshold), 45, ("token", "key", "secret", "credential")),
        # --- personal data
        d("iban", "pii", rx(
            r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?"
            r"(?![A-Za-z0-9])"), loc.iban, 40, _DIGITS),
        d("payment_card", "pii", rx(r"\d(?<![\w\-.+]\d)(?:[ \-]?\d){12,18}(?!\w)"), loc.card, 35,
          _DIGITS),
        d("email", "pii", rx(
            r"@(?<=[A-Za-z0-9_%+\-]@)(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+"
            r"(?P<tld>[A-Za-z]{2,24})(?![A-Za-z0-9\-]|\.[A-Za-z0-9]|:[\w~/])"), loc.email, 30,
          ("@",)),
        d("phone", "pii", rx(
            r"\+(?<![\w+.\-/]\+)(?:\d{1,3}(?:[ .\-]\(?\d{1,8}\)?|[ ]?\(\d{1,5}\)){1,6}|\d{8,15})"
            r"(?![\w\-]|[.+]\d)"), loc.phone, 20, ("+",)),
        d("phone", "pii", rx(
            r"[(2-9](?<![\w+.\-/(][(2-9])(?:(?<=\()[2-9]\d{2}\) ?|(?<=[2-9])\d{2}[ .\-])"
            r"[2-9]\d{2}[ .\-]\d{4}(?!\d|[.\-]\d)"), loc.phone, 20, _DIGITS),
        d("phone", "pii", rx(r"0(?<![\w.+\-/]0)\d{1,4}(?:[ .\-/]?\d{2,8}){1,4}(?!\d)"),
          loc.phone_with_context, 20, ("0",)),
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
        # each hint looked up once per text, not once per detector (measured, loaded: the
        # per-detector checks took 161 us a short text, one lookup per hint 41 us)
        self._hints = tuple(sorted({h for det in self._detectors for h in det.hints}))
        self._prefilter = prefilter
        self.entropy_threshold = entropy_threshold

    @property
    def detector_names(self) -> tuple[str, ...]:
        """Sorted names of the active detectors."""
        return tuple(sorted({det.name for det in self._detectors}))

    def scan(self, text: str) -> ScanReport:
        """Find secrets and personal data in ``text`` (and in its folded form, where it
        hides a value behind invisible characters or full-width letters:
        :func:`~memstrata.governance.visible.folded`)."""
        secrets: list[tuple[Detector, int, int]] = []
        pii: list[tuple[Detector, int, int]] = []
        self._spans(text, secrets, pii)
        refolded = folded(text)
        if refolded is not None:
            plain, where = refolded
            found: tuple[list[tuple[Detector, int, int]], ...] = ([], [])
            self._spans(plain, *found)
            for bucket, more in zip((secrets, pii), found, strict=True):
                bucket.extend((det, where[s], where[e - 1] + 1) for det, s, e in more)
        merged = _merge(secrets)
        pii = [p for p in pii if not any(p[1] < f.end and f.start < p[2] for f in merged)]
        merged.extend(_merge(pii))
        merged.sort(key=lambda f: f.start)
        return ScanReport(tuple(merged))

    def _spans(self, text: str, secrets: list[tuple[Detector, int, int]],
               pii: list[tuple[Detector, int, int]]) -> None:
        """Every detector's spans in ``text``, into ``secrets`` and ``pii``."""
        lowered = text.lower()
        long_run = _LONG_TOKEN_RUN.search(text) is not None
        present = {h for h in self._hints if h in lowered}
        for det in self._detectors:
            if not self._prefilter or ((long_run or not det.long_token) and (
                    not det.hints or not present.isdisjoint(det.hints))):
                bucket = secrets if det.kind == "secret" else pii
                bucket.extend((det, s, e) for s, e in det.spans(text))

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
