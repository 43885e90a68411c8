"""The built-in detectors of :mod:`memstrata.governance.sensitivity`: what a
:class:`Detector` is (a named pattern, the check that turns a match into a span, its
priority and its pre-filter) and the table of them (vendor token formats, generic
``key = value`` and prose secrets, personal data), built for an entropy threshold.

Every pattern starts with a literal or a character class, never with a look-behind or a
case-insensitive group: the regex engine can then skip ahead in C. Boundary checks come
right after the first character or in the locator (:mod:`.secret_locators`,
:mod:`.pii_locators`). With the
``hints`` pre-filter, ordinary prose skips most detectors (``benchmarks/scan_speed.py``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from . import pii_locators as pii
from . import secret_locators as loc

Kind = Literal["secret", "pii"]

DEFAULT_ENTROPY_THRESHOLD = 3.0
"""Minimum Shannon entropy (bits per character) of a generic secret value."""


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
_MONTH = (r"(?i:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
          r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
#: A whole date: 1987-03-14, 14/03/1987, 3.14.87, 14 March 1987, 14th of March, 1987,
#: March 14, 1987 (one alternative per shape, no repetition inside another).
_DATE = (r"\d{4}[./\-]\d{1,2}[./\-]\d{1,2}|\d{1,2}[./\-]\d{1,2}[./\-]\d{2,4}"
         r"|\d{1,2}(?i:st|nd|rd|th)?[ \t]+(?:(?i:of)[ \t]+)?" + _MONTH + r"\.?,?[ \t]+\d{4}"
         r"|" + _MONTH + r"\.?[ \t]+\d{1,2}(?i:st|nd|rd|th)?,?[ \t]+\d{4}")


def builtin_detectors(threshold: float) -> list[Detector]:
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
        # memory would let any reader of it call the service as that key. A tenant name is
        # up to 128 characters of any script: 683 as base64url
        g("memstrata_api_key", "secret", _tok(
            r"msk\.", r"[A-Za-z0-9_\-]{1,700}\.[0-9a-z]{26}\.[A-Za-z0-9_\-]{43}"), ph, v,
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
            r"(?![A-Za-z0-9])"), pii.iban, 40, _DIGITS),
        d("payment_card", "pii", rx(r"\d(?<![\w\-.+]\d)(?:[ \-]?\d){12,18}(?!\w)"), pii.card, 35,
          _DIGITS),
        d("email", "pii", rx(
            r"@(?<=[A-Za-z0-9_%+\-]@)(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+"
            r"(?P<tld>[A-Za-z]{2,24})(?![A-Za-z0-9\-]|\.[A-Za-z0-9]|:[\w~/])"), pii.email, 30,
          ("@",)),
        d("phone", "pii", rx(
            r"\+(?<![\w+.\-/]\+)(?:\d{1,3}(?:[ .\-]\(?\d{1,8}\)?|[ ]?\(\d{1,5}\)){1,6}|\d{8,15})"
            r"(?![\w\-]|[.+]\d)"), pii.phone, 20, ("+",)),
        d("phone", "pii", rx(
            r"[(2-9](?<![\w+.\-/(][(2-9])(?:(?<=\()[2-9]\d{2}\) ?|(?<=[2-9])\d{2}[ .\-])"
            r"[2-9]\d{2}[ .\-]\d{4}(?!\d|[.\-]\d)"), pii.phone, 20, _DIGITS),
        d("phone", "pii", rx(r"0(?<![\w.+\-/]0)\d{1,4}(?:[ .\-/]?\d{2,8}){1,4}(?!\d)"),
          pii.phone_with_context, 20, ("0",)),
        # A US Social Security number: the 3-2-4 dashed shape on its own (validity rules
        # in the locator; it starts at the first dash, rarer than a digit, and looks back
        # over the area number), or nine digits right after the words that name one. Each
        # hint costs every text a lookup (about 2 us per 4,000 characters): the rare
        # spellings ("SS#", "D.O.B.") have none of their own.
        d("us_ssn", "pii", rx(r"-(?<=[0-8]\d\d-)(?<![\w\-.+/][0-8]\d\d-)\d{2}-\d{4}"
                              r"(?![\w\-]|[.,/]\d)"), pii.us_ssn, 25, ("-",)),
        d("us_ssn", "pii", rx(
            r"[Ss](?<![A-Za-z][Ss])(?i:sn|ocial[ \t]+security(?:[ \t]+(?:number|no\.?|num))?"
            r"|s[ \t]?#)[^\d\n]{0,24}?(?P<secret>\d{3}[ \-]?\d{2}[ \-]?\d{4})(?![\d\-])"),
          pii.ssn_with_context, 26, ("ssn", "social security")),
        # A passport number, only right after the word (no shape of its own is specific).
        d("passport_number", "pii", rx(
            r"[Pp](?<![A-Za-z][Pp])(?i:assport)(?:[ \t]+(?i:number|no\.?|num|#|id))?"
            r"[ \t]*(?:[:#=][ \t]*)?(?:(?i:is|was)[ \t]+)?(?P<secret>[A-Z0-9]{6,9})"
            r"(?![A-Za-z0-9])"), pii.passport_number, 25, ("passport",)),
        # A date of birth: a whole date right after "born (on)", "date of birth", "DOB",
        # "birthday" (the date is checked in the locator).
        d("date_of_birth", "pii", rx(
            r"[BbDd](?<![A-Za-z][BbDd])(?i:orn(?:[ \t]+on)?|irth[ \t]?date|irthday|ate[ \t]+of"
            r"[ \t]+birth|\.?o\.?b\.?)[ \t]*(?:[:=,\-][ \t]*)?(?:(?i:is|was|on)[ \t]+)?"
            r"(?:(?i:the)[ \t]+)?(?P<secret>" + _DATE + r")(?!\w)"),
          pii.date_of_birth, 25, ("born", "birth", "dob")),
    ]


BUILTIN_DETECTORS: tuple[str, ...] = tuple(
    sorted({det.name for det in builtin_detectors(DEFAULT_ENTROPY_THRESHOLD)})
)
"""Names of the built-in detectors (usable in ``disabled``)."""


__all__ = ["BUILTIN_DETECTORS", "DEFAULT_ENTROPY_THRESHOLD", "Detector", "Kind",
           "builtin_detectors"]
