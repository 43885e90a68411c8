"""Screening of non-fact writes (episodes, checkpoints, scratch) for secrets and injections.

Durable facts go through the full write policy (:mod:`memstrata.governance.policy`).
Everything else an agent writes is still screened so that no write path can
store a raw secret: secrets are redacted in place (the report names the
detector, never the value), and text from ``tool``/``agent`` actors that reads
as an instruction to the agent is flagged ``untrusted``/``quarantined`` so
recall and context label it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from .policy import UNTRUSTED_ACTORS


def redact_secrets(text: str) -> tuple[str, list[str]]:
    """``text`` with every secret replaced, and the detectors that fired."""
    from .sensitivity import redact, scan

    report = scan(text)
    if not report.has_secret:
        return text, []
    return redact(text, report), sorted({f.detector for f in report.secrets})


def redact_value(value: Any) -> Any:
    """A JSON-able ``value`` with the secrets in every string redacted (keys included), so a
    value stored as JSON text stays valid JSON and a quoted secret is found too."""
    if isinstance(value, str):
        return redact_secrets(value)[0]
    if isinstance(value, Mapping):
        return {redact_secrets(str(k))[0]: redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value


def screen_record(texts: Mapping[str, str | None], *, actor: str | None,
                  instruction_field: str = "text", untrusted: Collection[str] = UNTRUSTED_ACTORS,
                  ) -> tuple[dict[str, str], list[str]]:
    """Screen the text fields of a record before it is stored.

    Returns ``(updates, flags)``: the fields whose secrets were redacted (with their clean
    text) and the flags to add (``redacted:DETECTOR``; ``untrusted``, ``quarantined`` and
    ``injection:RULE`` when ``actor`` is one of ``untrusted`` and ``instruction_field``
    reads as an instruction to the agent). The caller applies both.
    """
    from .injection import detect_injection

    updates: dict[str, str] = {}
    flags: list[str] = []
    for name, value in texts.items():
        if value:
            clean, detectors = redact_secrets(value)
            if detectors:
                updates[name] = clean
                flags += [f"redacted:{d}" for d in detectors]
    if actor in untrusted:
        text = updates.get(instruction_field, texts.get(instruction_field)) or ""
        found = detect_injection(text)
        if found:
            flags += ["untrusted", "quarantined", *sorted({f"injection:{f.rule}" for f in found})]
    return updates, flags


__all__ = ["redact_secrets", "screen_record"]
