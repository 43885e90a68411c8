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

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..errors import ConfigError
from .secret_detectors import (
    BUILTIN_DETECTORS,
    DEFAULT_ENTROPY_THRESHOLD,
    Detector,
    Kind,
    builtin_detectors,
)
from .secret_values import (
    iban_valid,
    is_placeholder,
    luhn_valid,
    shannon_entropy,
)
from .visible import folded


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
        detectors = [det for det in builtin_detectors(entropy_threshold)
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
