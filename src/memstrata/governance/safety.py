"""Screening of non-fact writes (episodes, checkpoints, scratch) for secrets and injections;
who a write is attributed to (:func:`write_actor`) and who is a person (:func:`person_arg`).

Durable facts go through the full write policy (:mod:`memstrata.governance.policy`).
Everything else an agent writes is still screened so that no write path can
store a raw secret: secrets are redacted in place (the report names the
detector, never the value), and the trust rule of the write policy
(:func:`memstrata.governance.policy.trust_flags`) labels the record: content from
``tool``/``agent`` actors is ``untrusted``, and text from any actor that reads as
an instruction to the agent is ``quarantined`` too, so recall and context label it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from .policy import UNTRUSTED_ACTORS, trust_flags
from .visible import shown


def redact_secrets(text: str) -> tuple[str, list[str]]:
    """``text`` with every secret replaced, and the detectors that fired."""
    from .sensitivity import redact, scan

    report = scan(text)
    if not report.has_secret:
        return text, []
    return redact(text, report), sorted({f.detector for f in report.secrets})


def refuse_secret(text: str, field: str) -> str:
    """``text`` unchanged when it holds no secret, else :class:`ValidationError`.

    The rule for identifiers (ledger keys, scratch keys, task names): they are stored,
    listed and matched as they are, so a secret in one is refused rather than redacted (a
    redacted key would silently merge two different keys into one).
    """
    from ..errors import ValidationError
    from .sensitivity import scan

    report = scan(text)
    if report.has_secret:
        kinds = ", ".join(sorted({f.detector for f in report.secrets}))
        raise ValidationError(f"{field} contains a secret ({kinds}); nothing was stored",
                              hint=f"use an id or a name for the {field}, never a credential")
    return text


#: Actor names that are a program, never a person: none of them approves a fact, activates
#: a procedure or changes who someone is (an identity fact).
MACHINE_ACTORS = frozenset({"agent", "tool", "system", "import"})


def is_machine(name: str | None) -> bool:
    """Whether ``name`` is a program's (:data:`MACHINE_ACTORS`, alone or before a ``:``,
    any case), not a person's: read as it shows (:func:`~.visible.shown`: without hidden
    characters, full-width or look-alike letters read as Latin) and without spaces
    (``agent :x``, ``ａｇｅｎｔ``, ``аgent`` with a Cyrillic ``а``, ``tool`` with a soft
    hyphen are programs too)."""
    if name is None:
        return False
    return "".join(shown(name).split()).lower().partition(":")[0] in MACHINE_ACTORS


def person_arg(value: Any, field: str, *, act: str, max_len: int = 128) -> str:
    """The name of the person who does something only a person does: an identifier (no
    secret in it: :func:`identifier_arg`), never a program's actor name
    (:func:`is_machine`: AccessDenied saying ``act``)."""
    from ..errors import AccessDenied, ValidationError

    if value is None:
        raise ValidationError(f"{field}= must name the person", hint=f"pass {field}='alice'")
    who = identifier_arg(value, field, max_len=max_len)
    if is_machine(who):
        raise AccessDenied(f"{field}={who!r}: {act}", hint=f"pass {field}=<the person's name>")
    return who


def screened_arg(value: Any, field: str, *, max_len: int) -> str:
    """A stored free-text argument (reasons, notes, outcomes, labels): the text rules of
    :func:`memstrata.inputs.text_arg`, then its secrets redacted."""
    from ..inputs import text_arg

    return redact_secrets(text_arg(value, field, max_len=max_len))[0]


def identifier_arg(value: Any, field: str, *, max_len: int, hint: str | None = None) -> str:
    """A stored identifier argument (keys, task names, run ids): the text rules of
    :func:`memstrata.inputs.text_arg`, and no secret in it (:func:`refuse_secret`)."""
    from ..inputs import text_arg

    return refuse_secret(text_arg(value, field, max_len=max_len, hint=hint), field)


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
    text) and the flags to add (``redacted:DETECTOR``, and the trust flags of
    ``instruction_field``: see :func:`~memstrata.governance.policy.trust_flags`). The
    caller applies both.
    """
    updates: dict[str, str] = {}
    flags: list[str] = []
    for name, value in texts.items():
        if value:
            clean, detectors = redact_secrets(value)
            if detectors:
                updates[name] = clean
                flags += [f"redacted:{d}" for d in detectors]
    text = updates.get(instruction_field, texts.get(instruction_field)) or ""
    flags += trust_flags(text, actor, frozenset(untrusted))[0]
    return updates, flags


#: A source that names what was read, not who said it: a URL (``https://``, ``www.``, a
#: domain with a path, inside ``<...>`` or a Markdown link), a path (``/``, ``~/``, ``./``,
#: ``C:\`` or ``C:/``, ``\\server\share``), a remote path as ssh, scp and git write it
#: (``git@github.com:acme/infra.git``, ``alice@build01:/var/log``, ``build01:/var/log``),
#: a file name, or a tool's prefix.
_READ_SOURCE = re.compile(
    r"^\s*[<\[(]?\s*(?:[a-z][a-z0-9+.-]*://|(?:tool|web|url|file|email|mail|api|mcp|page|doc"
    r"|search)s?:|[~.]?/|[a-z]:[\\/]|\\\\|www\.|[a-z0-9-]+(?:\.[a-z0-9-]+)+/"
    r"|[\w.-]+@[\w.-]+:|[\w.-]+:~?/)"
    r"|\]\(\s*[a-z][a-z0-9+.-]*://"
    r"|^\s*[\w .-]+\.(?:txt|md|pdf|docx?|csv|tsv|json|ya?ml|html?|log|xlsx?|pptx?|rtf|xml|eml"
    r"|ipynb|py|js|ts)\s*$", re.IGNORECASE)


def write_actor(actor: str, origin: str | None, source: str) -> str:
    """Who a tool write is attributed to: the dispatcher's ``actor``, unless the call says
    the words are a tool's or the agent's (``origin``), or, for a ``user`` dispatcher, the
    source is a URL, a path or a tool (what the agent read, not what the person said).
    Trust is only ever lowered: ``origin="user"`` from an agent dispatcher stays ``agent``."""
    if actor != "user":
        return "tool" if origin == "tool" else actor
    if origin in ("tool", "agent"):
        return origin
    return "tool" if _READ_SOURCE.search(shown(source)) else actor  # "https\u200b://" too


__all__ = ["MACHINE_ACTORS", "identifier_arg", "is_machine", "person_arg", "redact_secrets",
           "redact_value", "refuse_secret", "screen_record", "screened_arg", "write_actor"]
