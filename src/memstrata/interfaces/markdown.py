"""The three memory files people read and edit (DESIGN §9): their format, parsing and lint.

Three files per scope:

``identity.md`` — small and stable: the identity-tier facts, one per slot::

    - **alice / role** (profile): Alice leads the docs team at Acme. — source: hr:directory

The slot's first " / " ends the subject, so a " / " inside a subject is written " \\/ " (a
``/`` between spaces, or ending the subject, gets one more backslash before it): every
subject and attribute reads back as written. A file written before reads as it did.

``working-context.md`` — one current value per field: the current standard
facts (same line format), every task's checkpoint (``## Task: NAME`` with
``- Objective: ...``, ``- Next action: ...``, ``- Notes: ...`` and
``### Plan`` / ``### Completed`` / ... lists), and ``## Pending identity
changes``: identity facts waiting for a person's approval.

``episodic.md`` — append-only, one entry per line, oldest first::

    - 2026-08-01 (ci:run/812): Deploy preview failed: stale build cache [deploy_failed]

A date or source starting with ``~`` is approximate (reconstructed by
``migrate``). A fact line's metadata may go on with ``; since DATE`` (when it became
true), ``; expires DATE`` and ``; readers a,b``; an episode line may end with
``— supersedes the YYYY-MM-DD entry`` (optionally ``(source)``: the entry it replaces),
``[event]`` and ``{readers: a,b}``. working-context.md says when its state was last
recorded (``Last updated: DATE``) and each task when its checkpoint was saved
(``- Updated: DATE (version N)``).

Lines: an entry wrapped over several lines continues on lines indented under it (they are
joined with single spaces). The prose right after a file's title is its introduction; any
other line that is not an entry, a heading or ``_none_`` is reported, with its line number
and the reason, never skipped silently.

This module is the format: entries (:class:`FactEntry`, :class:`EpisodeEntry`,
:class:`TaskEntry`, :class:`MemoryFiles`) and their rendering. Reading the files back
(parsing, :func:`~memstrata.interfaces.markdown_read.read_files`, every problem an
:class:`~memstrata.interfaces.markdown_read.Issue` with file and line) and
:func:`~memstrata.interfaces.markdown_read.lint_markdown` (format and sizes) are
:mod:`memstrata.interfaces.markdown_read`. Reading a store into files and files into a store is
:mod:`memstrata.interfaces.memory_files`; sorting a legacy MEMORY.md into the three files is
:mod:`memstrata.interfaces.migrate`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from ..errors import ValidationError

IDENTITY = "identity.md"
WORKING = "working-context.md"
EPISODIC = "episodic.md"
FILES = (IDENTITY, WORKING, EPISODIC)

#: Lint limits: identity and the working context load into every session.
IDENTITY_MAX_ENTRIES = 30
IDENTITY_MAX_TOKENS = 800
WORKING_MAX_TOKENS = 1500

IMPORT_CONFIDENCE = 0.9
APPROX = "~"
APPROX_FLAG = "approx_date"

_HEADERS = {
    IDENTITY: "# Identity\n\nWho we work for and what always applies. Small and stable: a "
              "change goes through review\n(record it under \"Pending identity changes\" in "
              "working-context.md).\n",
    WORKING: "# Working context\n\nOne current value per field: current facts, each task's "
             "checkpoint, and identity\nchanges waiting for a person.\n",
    EPISODIC: "# Episodic log\n\nAppend-only, oldest first: `YYYY-MM-DD (source): what "
              "happened`. A date or source\nstarting with ~ is approximate.\n",
}

_SINGLE = (("objective", "Objective"), ("next_action", "Next action"), ("notes", "Notes"))
_LISTS = (("constraints", "Constraints"), ("plan", "Plan"), ("completed", "Completed"),
          ("evidence", "Evidence"), ("source_refs", "Source refs"),
          ("pending_identity_changes", "Pending identity changes"))

LAST_UPDATED = "Last updated: "
#: Words that make a line read as the state of the moment rather than who someone is.
STATE_RE = re.compile(r"\b(currently|right now|at the moment|for now|this (?:week|month|"
                      r"sprint|quarter|year)|today|tomorrow|tonight|due (?:by|on|in|end|"
                      r"next|\d)|deadline|working on|in progress|until (?:next|the end))\b",
                      re.I)
SOURCE_SEP = " — source: "


def one_line(text: str) -> str:
    """Collapse whitespace runs (newlines included) to single spaces."""
    return " ".join(text.split())


#: What an episode's own text must not end with, or the parser reads it as a marker.
_MARKER_TAILS = (re.compile(r"(?<=\s)(?=\[[A-Za-z0-9_.:\-]+\]$)"),
                 re.compile(r"(?<=\s)(?=\{readers: [^{}]+\}$)"),
                 re.compile(r"(?<=\s)(?=(?:—|--|–)\s+supersedes (?:the )?\d{4}-\d{2}-\d{2} "
                            r"entry(?: \([^()]+\))?$)"))


def escape_markers(text: str) -> str:
    """``text`` with a trailing ``[word]``, ``{readers: ...}`` or supersedes phrase escaped
    by a backslash, so it reads back as text (:func:`unescape_markers`)."""
    for rule in _MARKER_TAILS:
        text = rule.sub(lambda _m: "\\", text, count=1)
    return text


def unescape_markers(text: str) -> str:
    """The inverse of :func:`escape_markers`."""
    return re.sub(r"\\(?=\[|\{readers: |(?:—|--|–)\s+supersedes )", "", text)


#: A ``/`` of a subject that a reader could take for the slot's `` / `` separator: one after
#: a space (and any backslashes), before a space or the subject's end.
_SUBJECT_SLASH = re.compile(r"(?<= )(\\*)/(?= |$)")
_ESCAPED_SLASH = re.compile(r"(?<= )\\(\\*)/(?= |$)")


def escape_subject(subject: str) -> str:
    """``subject`` as a fact line writes it: each `` / `` (with any backslashes before its
    ``/``) gets one more backslash, so the slot's first `` / `` is its separator."""
    return _SUBJECT_SLASH.sub(lambda m: "\\" + m[1] + "/", subject)


def unescape_subject(text: str) -> str:
    """The inverse of :func:`escape_subject`."""
    return _ESCAPED_SLASH.sub(lambda m: m[1] + "/", text)


def _day(value: str, where: str) -> datetime:
    try:
        return datetime.combine(date.fromisoformat(value), datetime.min.time(), tzinfo=UTC)
    except ValueError:
        raise ValidationError(f"{where}: {value!r} is not a date (YYYY-MM-DD)") from None


# -- entries ------------------------------------------------------------------

@dataclass
class FactEntry:
    """One fact line of identity.md or working-context.md."""

    subject: str
    attribute: str
    kind: str
    claim: str
    source: str
    expires: str | None = None
    readers: list[str] | None = None
    line: int = 0
    since: str | None = None

    def render(self) -> str:
        meta = [self.source]
        if self.since:
            meta.append(f"since {self.since}")
        if self.expires:
            meta.append(f"expires {self.expires}")
        if self.readers:
            meta.append("readers " + ",".join(self.readers))
        return (f"- **{escape_subject(self.subject)} / {self.attribute}** ({self.kind}): "
                f"{one_line(self.claim)}"
                f"{SOURCE_SEP}{'; '.join(one_line(m) for m in meta)}")

    @property
    def slot(self) -> tuple[str, str]:
        return (self.subject.lower(), self.attribute.lower())


@dataclass
class EpisodeEntry:
    """One line of episodic.md."""

    day: str
    source: str
    text: str
    event: str = "note"
    approx: bool = False
    readers: list[str] | None = None
    line: int = 0
    #: The entry this one replaces: its day and, when the day has several, its source.
    supersedes: tuple[str, str | None] | None = None

    def render(self) -> str:
        out = f"- {APPROX if self.approx else ''}{self.day} ({one_line(self.source)}): " \
              f"{escape_markers(one_line(self.text))}"
        if self.supersedes is not None:
            day, source = self.supersedes
            out += f" — supersedes the {day} entry" + (f" ({one_line(source)})" if source
                                                        else "")
        if self.event != "note":
            out += f" [{self.event}]"
        if self.readers:
            out += " {readers: " + ",".join(self.readers) + "}"
        return out

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.day, one_line(self.source), one_line(self.text))


@dataclass
class TaskEntry:
    """One ``## Task:`` section of working-context.md."""

    task: str
    fields: dict[str, Any] = field(default_factory=dict)
    line: int = 0
    #: When the checkpoint was saved (YYYY-MM-DD) and its version.
    updated: str | None = None
    version: int | None = None

    def render(self) -> list[str]:
        out = [f"## Task: {one_line(self.task)}", ""]
        if self.updated:
            out.append(f"- Updated: {self.updated}")
        singles = [f"- {label}: {one_line(self.fields[name])}" for name, label in _SINGLE
                   if self.fields.get(name)]
        out += singles
        for name, label in _LISTS:
            items = self.fields.get(name) or []
            if items:
                if out[-1] != "":
                    out.append("")
                out += [f"### {label}", ""] + [f"- {one_line(i)}" for i in items]
        return out


@dataclass
class MemoryFiles:
    """The parsed content of the three files."""

    identity: list[FactEntry] = field(default_factory=list)
    facts: list[FactEntry] = field(default_factory=list)
    tasks: list[TaskEntry] = field(default_factory=list)
    pending_identity: list[FactEntry] = field(default_factory=list)
    episodes: list[EpisodeEntry] = field(default_factory=list)
    #: When the working context's state was last recorded (YYYY-MM-DD).
    updated: str | None = None
    #: Keep the entries' own order (a migrated file) instead of sorting them by slot.
    ordered: bool = False

    def last_updated(self) -> str | None:
        """The newest date the working context carries: a fact's since, a task's update."""
        days = [f.since for f in self.facts if f.since] + [t.updated for t in self.tasks
                                                           if t.updated]
        return max(days) if days else self.updated

    def render(self) -> dict[str, str]:
        """The three files' text, deterministically ordered."""
        identity = [_HEADERS[IDENTITY], *_fact_block(self.identity, ordered=self.ordered)]
        updated = self.last_updated()
        working = [_HEADERS[WORKING], *([LAST_UPDATED + updated, ""] if updated else []),
                   "## Current facts", "", *_fact_block(self.facts, "", ordered=self.ordered)]
        for task in sorted(self.tasks, key=lambda t: t.task):
            working += [*task.render(), ""]
        working += ["## Pending identity changes", "", *_fact_block(self.pending_identity, "")]
        episodes = sorted(self.episodes, key=lambda e: e.day)  # stable: keeps same-day order
        episodic = [_HEADERS[EPISODIC], *(e.render() for e in episodes)]
        return {IDENTITY: _join(identity), WORKING: _join(working), EPISODIC: _join(episodic)}


def _fact_block(entries: Sequence[FactEntry], lead: str | None = None, *,
                ordered: bool = False) -> list[str]:
    chosen = list(entries) if ordered else sorted(entries, key=lambda f: (f.subject,
                                                                          f.attribute))
    lines = [f.render() for f in chosen]
    if not lines:
        lines = ["_none_"]
    if lead is None:
        return lines
    return [*lines, lead]


def _join(parts: list[str]) -> str:
    text = "\n".join(parts).rstrip("\n")
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text + "\n"


__all__ = [
    "APPROX_FLAG",
    "EPISODIC",
    "FILES",
    "IDENTITY",
    "LAST_UPDATED",
    "STATE_RE",
    "WORKING",
    "EpisodeEntry",
    "FactEntry",
    "MemoryFiles",
    "TaskEntry",
]
