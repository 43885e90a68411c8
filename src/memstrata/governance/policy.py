"""The write policy (DESIGN §5): every durable write path goes through here.

Order of the checks, each able to stop the write with a reported reason:

1. schema and size — :class:`Candidate` construction raises ValidationError;
2. provenance — no actor or no source: rejected ("if you cannot state a
   source, do not write it");
3. sensitivity — a secret is rejected (or redacted, by configuration) and is
   never stored raw; PII makes the record ``restricted`` and sends it to review;
4. trust — content from a ``tool`` or an ``agent`` inference cannot become an
   active durable fact or identity fact without a person's review; text from
   any actor that reads as an instruction to the agent is quarantined and waits
   for a person (a user-mode MCP server relays an agent's text as ``user``);
5. confidence below ``min_confidence`` — rejected;
8. identity tier — ``pending_review`` until a person approves;
9. expiry — a kind without an explicit rule gets its default recheck/TTL.

Steps 6 (dedup) and 7 (conflict → supersede) need the store and run inside
the facts layer's transaction (:mod:`memstrata.layers.facts`). The policy returns a
:class:`Verdict`; it never writes and never logs the text it judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import field_validator

from ..calls import checked_calls
from ..errors import ValidationError
from ..inputs import MAX_SOURCE, clean_text, unit_interval
from ..models import (
    DEFAULT_CONFIDENCE,
    Actor,
    ClaimText,
    Confidence,
    FactKind,
    OptionalLongText,
    Readers,
    Scope,
    Sensitivity,
    SlotText,
    Tier,
    UTCDateTime,
    _Model,
)

DAY = timedelta(days=1)

#: Kinds whose truth drifts get a hard expiry; every kind gets a recheck date.
DEFAULT_EXPIRY: dict[str, timedelta] = {"system_fact": 180 * DAY, "decision": 365 * DAY}
DEFAULT_RECHECK: dict[str, timedelta] = {
    "preference": 365 * DAY,
    "profile": 365 * DAY,
    "relationship": 365 * DAY,
    "constraint": 180 * DAY,
    "system_fact": 30 * DAY,
    "decision": 90 * DAY,
    "lesson": 180 * DAY,
}
#: Actors whose content is untrusted by default: a tool's output (web pages, files, API
#: payloads) and an agent's inference. The one definition; configurable per policy.
UNTRUSTED_ACTORS = frozenset({"tool", "agent"})


def trust_flags(text: str, actor: str | None,
                untrusted: frozenset[str] = UNTRUSTED_ACTORS) -> tuple[list[str], list[str]]:
    """The one trust rule for a stored text: ``(flags, injection_rules)``.

    Content from an untrusted actor is always ``untrusted`` (a person's confirmation is
    what makes it trusted, not the detector's silence); text from any actor that reads as
    an instruction to the agent is ``untrusted`` + ``quarantined`` + ``injection:RULE``.
    """
    from .injection import detect_injection

    rules = sorted({f.rule for f in detect_injection(text)}) if text else []
    flags = ["untrusted"] if actor in untrusted or rules else []
    if rules:
        flags += ["quarantined", *(f"injection:{r}" for r in rules)]
    return flags, rules


class Candidate(_Model):
    """A proposed fact, validated but not yet judged or stored."""

    scope: Scope
    kind: FactKind
    subject: SlotText
    attribute: SlotText
    claim: ClaimText
    actor: Actor | None
    source: str | None
    confidence: Confidence = DEFAULT_CONFIDENCE
    tier: Tier = "standard"
    sensitivity: Sensitivity = "internal"
    evidence: OptionalLongText = None
    valid_from: UTCDateTime = None
    expires_at: UTCDateTime = None
    recheck_after: UTCDateTime = None
    readers: Readers = None
    reason: OptionalLongText = None
    #: A caller's reason to have a person look first (an extraction judge found a possible
    #: contradiction it could not settle): the candidate waits for review with it.
    review: OptionalLongText = None

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, v: Any) -> str | None:
        # a missing source is the policy's to report (step 2), not a schema error
        if v is None:
            return None
        return clean_text(v, field="source", max_len=MAX_SOURCE, allow_empty=True) or None


Action = Literal["store", "pending", "reject"]


@dataclass(frozen=True)
class Verdict:
    """What the policy decided for one candidate, before dedup and conflict."""

    action: Action
    candidate: Candidate
    reason: str
    detectors: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()


@dataclass
class PolicyConfig:
    """Tunable thresholds and rules of the write policy."""

    min_confidence: float = 0.7
    secrets: Literal["reject", "redact"] = "reject"
    pii_to_review: bool = True
    untrusted_actors: frozenset[str] = UNTRUSTED_ACTORS
    default_expiry: dict[str, timedelta] = field(default_factory=lambda: dict(DEFAULT_EXPIRY))
    default_recheck: dict[str, timedelta] = field(default_factory=lambda: dict(DEFAULT_RECHECK))
    #: A fact of another slot this near a proposal (cosine) is named in its result as a
    #: possible duplicate for a person to merge; never merged or dropped by itself.
    dedup_cosine: float = 0.9

    def __post_init__(self) -> None:
        """Checked as the config file's values are (a NaN or a negative threshold would turn
        the confidence check off; a string would fail at the first write)."""
        try:
            self.min_confidence = unit_interval(self.min_confidence, "min_confidence")
            self.dedup_cosine = unit_interval(self.dedup_cosine, "dedup_cosine")
        except ValueError as exc:
            raise ValidationError(str(exc), hint="e.g. PolicyConfig(min_confidence=0.7)"
                                  ) from None
        if self.secrets not in ("reject", "redact"):
            raise ValidationError(f"secrets must be 'reject' or 'redact', got "
                                  f"{self.secrets!r}", hint="secrets='reject' (the default)")
        if not isinstance(self.pii_to_review, bool):
            raise ValidationError("pii_to_review must be True or False",
                                  hint="pii_to_review=True (the default)")
        if isinstance(self.untrusted_actors, str) or not all(
                isinstance(a, str) for a in self.untrusted_actors):
            raise ValidationError("untrusted_actors must be a set of actor names",
                                  hint="e.g. frozenset({'tool', 'agent'})")
        self.untrusted_actors = frozenset(self.untrusted_actors)


@checked_calls
class WritePolicy:
    """Judges candidates; shared by the API, CLI, MCP server, extraction and import."""

    def __init__(self, config: PolicyConfig | None = None) -> None:
        self.config = config or PolicyConfig()

    def is_untrusted(self, actor: str | None) -> bool:
        """Is content from this actor untrusted (``PolicyConfig.untrusted_actors``)?"""
        return actor in self.config.untrusted_actors

    def judge(self, cand: Candidate, now: datetime) -> Verdict:
        cfg = self.config
        # 2. provenance
        if not cand.actor or not cand.source:
            missing = "actor" if not cand.actor else "source"
            return Verdict("reject", cand, f"missing provenance: no {missing} "
                           "(if you cannot state a source, do not write it)")
        # 3. sensitivity: secrets never stored raw; PII restricted + review
        cand, verdict = self._sensitivity(cand)
        if verdict is not None:
            return verdict
        flags: list[str] = []
        detectors: list[str] = []
        pending_reasons: list[str] = []
        if cand.sensitivity == "restricted" and cfg.pii_to_review:
            flags.append("pii")
            pending_reasons.append("contains personal data: restricted, needs review")
            detectors.extend(self._pii_detectors(cand.claim))
        # 4. trust
        trust, rules = trust_flags(cand.claim, cand.actor, cfg.untrusted_actors)
        flags += trust
        detectors += [f"injection:{r}" for r in rules]
        if rules:
            pending_reasons.append(
                f"quarantined: {cand.actor} content reads as an instruction to the agent")
        elif trust:
            pending_reasons.append(f"{cand.actor} content needs a person's review")
        # 5. confidence
        if cand.confidence < cfg.min_confidence:
            return Verdict("reject", cand, f"confidence {cand.confidence:.2f} is below the "
                           f"threshold {cfg.min_confidence:.2f}", tuple(detectors), tuple(flags))
        if cand.review:
            flags.append("possible_conflict")
            pending_reasons.append(cand.review)
        # 8. identity tier
        if cand.tier == "identity":
            pending_reasons.append("identity facts wait for a person's approval")
        # 9. expiry rules
        updates: dict[str, Any] = {}
        if cand.expires_at is None and cand.kind in cfg.default_expiry:
            updates["expires_at"] = now + cfg.default_expiry[cand.kind]
        if cand.recheck_after is None and cand.kind in cfg.default_recheck:
            updates["recheck_after"] = now + cfg.default_recheck[cand.kind]
        if cand.expires_at is not None and cand.expires_at <= now:
            return Verdict("reject", cand, "expires_at is already in the past")
        if updates:
            cand = cand.model_copy(update=updates)
        if pending_reasons:
            return Verdict("pending", cand, "; ".join(pending_reasons), tuple(detectors),
                           tuple(flags))
        return Verdict("store", cand, "passed the write policy", tuple(detectors), tuple(flags))

    def _sensitivity(self, cand: Candidate) -> tuple[Candidate, Verdict | None]:
        from .sensitivity import redact, scan

        texts = {"claim": cand.claim, "subject": cand.subject, "attribute": cand.attribute,
                 "evidence": cand.evidence or "", "source": cand.source or "",
                 "reason": cand.reason or "", "review": cand.review or ""}
        reports = {k: scan(v) for k, v in texts.items() if v}
        secret_detectors = sorted({f.detector for r in reports.values() for f in r.secrets})
        if secret_detectors:
            if self.config.secrets == "reject" or any(
                reports[k].has_secret for k in ("subject", "attribute") if k in reports
            ):
                return cand, Verdict(
                    "reject", cand,
                    "contains a secret (" + ", ".join(secret_detectors) + "): secrets are "
                    "never stored; keep them in a secret manager and store a reference",
                    tuple(f"secret:{d}" for d in secret_detectors),
                )
            update: dict[str, Any] = {
                k: redact(texts[k], reports[k])
                for k in ("claim", "evidence", "source", "reason", "review")
                if k in reports and reports[k].has_secret
            }
            cand = cand.model_copy(update=update)
        if any(r.has_pii for r in reports.values()) and cand.sensitivity != "restricted":
            cand = cand.model_copy(update={"sensitivity": "restricted"})
        return cand, None

    @staticmethod
    def _pii_detectors(text: str) -> list[str]:
        from .sensitivity import scan

        return sorted({f"pii:{f.detector}" for f in scan(text).pii})


def normalise_claim(text: str) -> str:
    """The form two claims are compared in for exact-duplicate detection."""
    text = re.sub(r"\s+", " ", text.strip().lower())
    return text.rstrip(" .!;")


def with_reason(verdict: Verdict, reason: str) -> Verdict:
    return replace(verdict, reason=reason)


__all__ = [
    "DEFAULT_EXPIRY",
    "DEFAULT_RECHECK",
    "Candidate",
    "PolicyConfig",
    "Verdict",
    "WritePolicy",
    "normalise_claim",
]
