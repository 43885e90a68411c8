"""Screening of non-fact writes (episodes, checkpoints, scratch) for secrets and injections.

Durable facts go through the full write policy (:mod:`memstrata.policy`).
Everything else an agent writes is still screened so that no write path can
store a raw secret: secrets are redacted in place (the report names the
detector, never the value), and text from ``tool``/``agent`` actors that reads
as an instruction to the agent is flagged ``untrusted``/``quarantined`` so
recall and context label it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .episodes import EpisodeInput

UNTRUSTED = frozenset({"tool", "agent"})


def redact_secrets(text: str) -> tuple[str, list[str]]:
    """``text`` with every secret replaced, and the detectors that fired."""
    from .sensitivity import redact, scan

    report = scan(text)
    if not report.has_secret:
        return text, []
    return redact(text, report), sorted({f.detector for f in report.secrets})


def screen_episode(item: EpisodeInput) -> EpisodeInput:
    """Redact secrets and flag injected instructions in an episode before it is stored."""
    from .injection import detect_injection

    flags = list(item.flags)
    updates: dict[str, object] = {}
    for field in ("text", "evidence", "outcome"):
        value = getattr(item, field)
        if value:
            clean, detectors = redact_secrets(value)
            if detectors:
                updates[field] = clean
                flags += [f"redacted:{d}" for d in detectors]
    if item.actor in UNTRUSTED:
        found = detect_injection(str(updates.get("text", item.text)))
        if found:
            flags += ["untrusted", "quarantined", *sorted({f"injection:{f.rule}" for f in found})]
    if flags != list(item.flags):
        updates["flags"] = sorted(set(flags))
    return item.model_copy(update=updates) if updates else item


__all__ = ["redact_secrets", "screen_episode"]
