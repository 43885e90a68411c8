"""Reading the three memory files back (their format: :mod:`memstrata.interfaces.markdown`):
parsing each file into entries, and lint.

Contract: :func:`read_files` parses a directory's three files into
:class:`~memstrata.interfaces.markdown.MemoryFiles`, adding an :class:`Issue` (file, line,
message) for every line that is not an entry, a heading, ``_none_`` or a file's
introduction, never skipping one silently; :func:`lint_markdown` checks the format, the
sizes (identity entries and tokens, working-context tokens), one value per slot and likely
contradictions, without writing anything.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from ..models import FACT_KINDS
from ..retrieval.context import unshown
from .markdown import (
    _HEADERS,
    _LISTS,
    _SINGLE,
    EPISODIC,
    FILES,
    IDENTITY,
    IDENTITY_MAX_ENTRIES,
    IDENTITY_MAX_TOKENS,
    LAST_UPDATED,
    SOURCE_SEP,
    STATE_RE,
    WORKING,
    WORKING_MAX_TOKENS,
    EpisodeEntry,
    FactEntry,
    MemoryFiles,
    TaskEntry,
    unescape_markers,
    unescape_subject,
)

_TITLES = {name: text.splitlines()[0] for name, text in _HEADERS.items()}
_SINGLE_BY_LABEL = {label.lower(): name for name, label in _SINGLE}
_LIST_BY_LABEL = {label.lower(): name for name, label in _LISTS}
_FACT_RE = re.compile(r"^- \*\*(?P<slot>.+?)\*\* \((?P<kind>[a-z_]+)\): (?P<rest>.+)$")
_EPISODE_RE = re.compile(r"^(?:- )?(?P<approx>~?)(?P<date>\d{4}-\d{2}-\d{2}) \((?P<source>.+?)\): "
                         r"(?P<text>.+)$")
_EVENT_RE = re.compile(r"^(?P<text>.*\S) \[(?P<event>[A-Za-z0-9_.:\-]+)\]$")
_READERS_RE = re.compile(r"^(?P<text>.*\S) \{readers: (?P<readers>[^{}]+)\}$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATED_RE = re.compile(r"^(?:- )?~?\d{4}-\d{2}-\d{2}\b")
_SUPERSEDES_RE = re.compile(r"^(?P<text>.*\S)\s+(?:—|--|–)\s+supersedes (?:the )?"
                            r"(?P<day>\d{4}-\d{2}-\d{2}) entry(?: \((?P<source>[^()]+)\))?$")
_UPDATED_RE = re.compile(r"^(?P<day>\d{4}-\d{2}-\d{2})(?: \(version (?P<version>\d+)\))?$")


# -- parsing ------------------------------------------------------------------

@dataclass
class Issue:
    """One problem found in a file (lint, or a parse error on import)."""

    file: str
    line: int
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.severity}: {self.message}"


def read_text(path: Path, file: str, issues: list[Issue]) -> str:
    """The text of a memory file, each line that is not text (bytes that are not UTF-8, a
    NUL) reported with its number and left out, an empty line in its place so the numbers
    hold (before, the first bad byte stopped the import, the lint and the migration with a
    traceback, and a NUL stopped every episode of the file without a line number)."""
    lines = []
    for n, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            issues.append(Issue(file, n, f"not UTF-8 text (byte {raw[exc.start]:#04x} at "
                                         f"column {exc.start + 1}): save the file as UTF-8"))
            line = ""
        if "\x00" in line:
            issues.append(Issue(file, n, "contains a NUL byte: remove it"))
            line = ""
        lines.append(line)
    return "\n".join(lines)


def parse_fact(text: str, file: str, line: int, issues: list[Issue]) -> FactEntry | None:
    m = _FACT_RE.match(text)
    if m is None:
        issues.append(Issue(file, line, "not a fact line: expected "
                                         "'- **subject / attribute** (kind): claim — source: S'"))
        return None
    subject, sep, attribute = m["slot"].partition(" / ")  # a subject's own are escaped
    subject = unescape_subject(subject)
    if not sep or not subject.strip() or not attribute.strip():
        issues.append(Issue(file, line, "the slot must read 'subject / attribute'"))
        return None
    if m["kind"] not in FACT_KINDS:
        issues.append(Issue(file, line, f"unknown kind {m['kind']!r}; use one of "
                                        + ", ".join(FACT_KINDS)))
        return None
    claim, sep, meta = m["rest"].rpartition(SOURCE_SEP)
    if not sep or not claim.strip():
        issues.append(Issue(file, line, "missing ' — source: ...' (every fact needs a source)"))
        return None
    parts = meta.split("; ")
    expires = since = None
    readers = None
    while len(parts) > 1:
        last = parts[-1]
        if last.startswith("expires ") and _DATE_RE.match(last[8:]):
            expires = last[8:]
        elif last.startswith("since ") and _DATE_RE.match(last[6:]):
            since = last[6:]
        elif last.startswith("readers ") and last[8:].strip():
            readers = sorted(r.strip() for r in last[8:].split(",") if r.strip())
        else:
            break
        parts.pop()
    source = "; ".join(parts).strip()
    if not source:
        issues.append(Issue(file, line, "empty source"))
        return None
    for label, value in (("since", since), ("expires", expires)):
        if value is not None and not _valid_day(value):
            issues.append(Issue(file, line, f"{label} {value!r} is not a valid date"))
            return None
    problem = _too_long(claim.strip(), subject.strip(), attribute.strip(), source)
    if problem is None:
        problem = _bad_readers(readers)
    if problem:
        issues.append(Issue(file, line, problem))
        return None
    return FactEntry(subject=subject.strip(), attribute=attribute.strip(), kind=m["kind"],
                     claim=claim.strip(), source=source, expires=expires, readers=readers,
                     line=line, since=since)


def _valid_day(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _too_long(claim: str, subject: str, attribute: str, source: str) -> str | None:
    """Why a fact line cannot be stored as written (the store's field limits), or None."""
    from ..inputs import MAX_CLAIM, MAX_NAME, MAX_SOURCE

    for name, value, limit in (("claim", claim, MAX_CLAIM), ("subject", subject, MAX_NAME),
                               ("attribute", attribute, MAX_NAME),
                               ("source", source, MAX_SOURCE)):
        if len(value) > limit:
            return f"the {name} is {len(value)} characters; the limit is {limit}"
    return None


def _bad_readers(readers: Sequence[str] | None) -> str | None:
    """Why a readers list cannot be stored (a name the store refuses), or None."""
    from ..inputs import check_name

    for name in readers or ():
        try:
            check_name(name, "reader")
        except ValueError as exc:
            return str(exc)
    return None


def parse_episode(text: str, file: str, line: int, issues: list[Issue]) -> EpisodeEntry | None:
    m = _EPISODE_RE.match(text)
    if m is None:
        if _DATED_RE.match(text):
            reason = ("no source: every entry says where it came from — write "
                      "'- YYYY-MM-DD (source): what happened'")
        else:
            reason = ("no date: every entry is dated — write "
                      "'- YYYY-MM-DD (source): what happened'")
        issues.append(Issue(file, line, reason))
        return None
    try:
        date.fromisoformat(m["date"])
    except ValueError:
        issues.append(Issue(file, line, f"{m['date']!r} is not a valid date"))
        return None
    body = m["text"].strip()
    readers = None
    rm = _READERS_RE.match(body)
    if rm is not None:
        body = rm["text"]
        readers = sorted(r.strip() for r in rm["readers"].split(",") if r.strip())
    problem = _bad_readers(readers)
    if problem:
        issues.append(Issue(file, line, problem))
        return None
    event = "note"
    em = _EVENT_RE.match(body)
    if em is not None:
        body, event = em["text"], em["event"]
    supersedes = None
    sm = _SUPERSEDES_RE.match(body)
    if sm is not None:
        body = sm["text"]
        supersedes = (sm["day"], sm["source"].strip() if sm["source"] else None)
        if sm["day"] > m["date"]:
            issues.append(Issue(file, line, f"supersedes an entry of {sm['day']}, after its "
                                            f"own date {m['date']}"))
            return None
    body = unescape_markers(body)
    return EpisodeEntry(day=m["date"], source=m["source"].strip(), text=body, event=event,
                        approx=bool(m["approx"]), readers=readers, line=line,
                        supersedes=supersedes)


def _content_lines(text: str, file: str, issues: list[Issue]) -> list[tuple[int, str]]:
    """The file's headings and entries, numbered by their first line, wrapped entries joined.

    A line indented under an entry continues it. The prose after the title (up to the first
    heading or entry) is the file's introduction; ``_none_`` marks an empty section; a
    ``Last updated:`` line is kept for its reader. Any other line is reported."""
    out: list[list[Any]] = []
    intro = True
    continues = False
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continues = False
            continue
        if continues and raw[:1] in (" ", "\t") and not stripped.startswith("- "):
            out[-1][1] += " " + stripped
            continue
        continues = False
        if stripped.startswith("#"):
            intro = intro and n == 1
            out.append([n, stripped])
        elif stripped.startswith("- ") or _DATED_RE.match(stripped):
            intro = False
            out.append([n, stripped])
            continues = True
        elif stripped.startswith(LAST_UPDATED):
            out.append([n, stripped])
        elif stripped == "_none_" or intro:
            continue
        else:
            issues.append(Issue(file, n, f"not an entry: {stripped[:60]!r} (an entry starts "
                                         "with '- '; indent a line to continue the entry "
                                         "above it)"))
    return [(n, t) for n, t in out]


def parse_identity(text: str, issues: list[Issue], file: str = IDENTITY) -> list[FactEntry]:
    out = []
    for n, ln in _content_lines(text, file, issues):
        if ln.startswith("- "):
            entry = parse_fact(ln, file, n, issues)
            if entry is not None:
                out.append(entry)
        elif not ln.startswith("#"):
            issues.append(Issue(file, n, f"not an identity entry: {ln[:60]!r} (expected '- "
                                         "**subject / attribute** (kind): claim — source: S')"))
        elif ln != _TITLES[IDENTITY]:
            issues.append(Issue(file, n, f"unexpected heading {ln!r}: identity.md holds "
                                         "one list of facts", "warning"))
    return out


def parse_working(text: str, issues: list[Issue], file: str = WORKING
                  ) -> tuple[list[FactEntry], list[TaskEntry], list[FactEntry]]:
    facts, tasks, pending, _ = parse_working_dated(text, issues, file)
    return facts, tasks, pending


def parse_working_dated(text: str, issues: list[Issue], file: str = WORKING
                        ) -> tuple[list[FactEntry], list[TaskEntry], list[FactEntry],
                                   str | None]:
    """The working context's facts, tasks, pending identity changes and Last updated."""
    facts: list[FactEntry] = []
    tasks: list[TaskEntry] = []
    pending: list[FactEntry] = []
    updated: str | None = None
    section: str | None = None
    task: TaskEntry | None = None
    list_field: str | None = None
    for n, ln in _content_lines(text, file, issues):
        if ln.startswith(LAST_UPDATED):
            value = ln[len(LAST_UPDATED):].strip()
            if _DATE_RE.match(value):
                updated = value
            else:
                issues.append(Issue(file, n, f"Last updated {value!r} is not a date "
                                             "(YYYY-MM-DD)"))
            continue
        if ln.startswith("## "):
            title = ln[3:].strip()
            list_field = None
            task = None
            if title.lower() == "current facts":
                section = "facts"
            elif title.lower() == "pending identity changes":
                section = "pending"
            elif title.lower().startswith("task:") and title[5:].strip():
                section = "task"
                task = TaskEntry(task=title[5:].strip(), line=n)
                tasks.append(task)
            else:
                section = None
                issues.append(Issue(file, n, f"unknown section {title!r}; expected 'Current "
                                             "facts', 'Task: NAME' or 'Pending identity "
                                             "changes'"))
        elif ln.startswith("### "):
            label = ln[4:].strip().lower()
            if task is None or label not in _LIST_BY_LABEL:
                issues.append(Issue(file, n, f"unexpected subsection {ln[4:].strip()!r}"))
                list_field = None
            else:
                list_field = _LIST_BY_LABEL[label]
                task.fields.setdefault(list_field, [])
        elif ln.startswith("- "):
            if section in ("facts", "pending"):
                entry = parse_fact(ln, file, n, issues)
                if entry is not None:
                    (facts if section == "facts" else pending).append(entry)
            elif section == "task" and task is not None:
                if list_field is not None:
                    task.fields[list_field].append(unshown(ln[2:].strip()))
                    continue
                label, sep, value = ln[2:].partition(": ")
                if label.strip().lower() == "updated" and sep:
                    um = _UPDATED_RE.match(value.strip())
                    if um is None or not _valid_day(um["day"]):
                        issues.append(Issue(file, n, "expected '- Updated: YYYY-MM-DD "
                                                     "(version N)'"))
                    else:
                        task.updated = um["day"]
                        task.version = int(um["version"]) if um["version"] else None
                    continue
                name = _SINGLE_BY_LABEL.get(label.strip().lower())
                if not sep or name is None:
                    issues.append(Issue(file, n, "expected '- Objective: ...', '- Next action: "
                                                 "...' or '- Notes: ...' before the lists"))
                elif name in task.fields:
                    issues.append(Issue(file, n, f"{label} given twice (one current value "
                                                 "per field)"))
                else:  # a model's marked view written back keeps the value, not the mark
                    task.fields[name] = unshown(value.strip())
            else:
                issues.append(Issue(file, n, "entry outside a known section"))
        elif not ln.startswith("#"):
            issues.append(Issue(file, n, f"not an entry: {ln[:60]!r} (entries start with "
                                         "'- ')"))
        elif ln != _TITLES[WORKING]:
            issues.append(Issue(file, n, f"unexpected heading {ln!r}", "warning"))
    return facts, tasks, pending, updated


def parse_episodic(text: str, issues: list[Issue], file: str = EPISODIC) -> list[EpisodeEntry]:
    out = []
    for n, ln in _content_lines(text, file, issues):
        if ln.startswith("- ") or _DATED_RE.match(ln):
            entry = parse_episode(ln, file, n, issues)
            if entry is not None:
                out.append(entry)
        elif not ln.startswith("#"):
            issues.append(Issue(file, n, f"not an episode line: {ln[:60]!r}"))
        elif ln != _TITLES[EPISODIC]:
            issues.append(Issue(file, n, f"unexpected heading {ln!r}", "warning"))
    return out


def read_files(directory: Path, issues: list[Issue]) -> MemoryFiles:
    """Parse whichever of the three files exist in ``directory``."""
    files = MemoryFiles()
    path = directory / IDENTITY
    if path.exists():
        files.identity = parse_identity(read_text(path, IDENTITY, issues), issues)
    path = directory / WORKING
    if path.exists():
        files.facts, files.tasks, files.pending_identity, files.updated = parse_working_dated(
            read_text(path, WORKING, issues), issues)
    path = directory / EPISODIC
    if path.exists():
        files.episodes = parse_episodic(read_text(path, EPISODIC, issues), issues)
    _check_slots(files, issues)
    return files


def _check_slots(files: MemoryFiles, issues: list[Issue]) -> None:
    seen: dict[tuple[str, str], str] = {}
    for fname, entries in ((IDENTITY, files.identity), (WORKING, files.facts)):
        for e in entries:
            where = f"{fname}:{e.line}"
            if e.slot in seen:
                issues.append(Issue(fname, e.line, f"slot {e.subject} / {e.attribute} already "
                                                   f"has a value at {seen[e.slot]} (one "
                                                   "current value per field)"))
            else:
                seen[e.slot] = where
    names: set[str] = set()
    for t in files.tasks:
        if t.task in names:
            issues.append(Issue(WORKING, t.line, f"task {t.task!r} appears twice"))
        names.add(t.task)


# -- lint ---------------------------------------------------------------------

def lint_markdown(directory: str | Path, *, identity_max_entries: int = IDENTITY_MAX_ENTRIES,
                  identity_max_tokens: int = IDENTITY_MAX_TOKENS,
                  working_max_tokens: int = WORKING_MAX_TOKENS) -> list[Issue]:
    """Check format and sizes of the three files; returns the issues (empty = clean)."""
    from ..governance.sensitivity import scan
    from ..tokens import count_tokens

    directory = Path(directory)
    issues: list[Issue] = []
    for name in FILES:
        path = directory / name
        if not path.exists():
            issues.append(Issue(name, 0, "file is missing"))
            continue
        text = read_text(path, name, [])  # its bad lines are reported by read_files below
        first = text.splitlines()[0] if text else ""
        if first != _TITLES[name]:
            issues.append(Issue(name, 1, f"the first line should be {_TITLES[name]!r}"))
        for n, ln in enumerate(text.splitlines(), 1):
            found = scan(ln)
            if found.has_secret:
                issues.append(Issue(name, n, "contains a secret (" + ", ".join(
                    sorted({f.detector for f in found.secrets})) + "): remove it"))
            elif found.has_pii:
                issues.append(Issue(name, n, "contains personal data (" + ", ".join(
                    sorted({f.detector for f in found.pii})) + "): import restricts the entry "
                    "and sends it to review", "warning"))
    files = read_files(directory, issues)
    _lint_contradictions(files, issues)
    for fe in files.identity:
        state = STATE_RE.search(fe.claim)
        if state is not None:
            issues.append(Issue(IDENTITY, fe.line, f"reads as current state, not identity "
                                                  f"({state[0]!r}): move it to "
                                                  "working-context.md", "warning"))
    path = directory / IDENTITY
    if path.exists():
        tokens = count_tokens(read_text(path, IDENTITY, []))
        if len(files.identity) > identity_max_entries:
            issues.append(Issue(IDENTITY, 0, f"{len(files.identity)} entries; identity must "
                                             f"stay small (at most {identity_max_entries}): "
                                             "move the rest to working-context.md"))
        if tokens > identity_max_tokens:
            issues.append(Issue(IDENTITY, 0, f"{tokens} tokens; the limit is "
                                             f"{identity_max_tokens} (it loads into every "
                                             "session)"))
    path = directory / WORKING
    if path.exists():
        tokens = count_tokens(read_text(path, WORKING, []))
        if tokens > working_max_tokens:
            issues.append(Issue(WORKING, 0, f"{tokens} tokens; the limit is "
                                            f"{working_max_tokens}: retire stale facts or "
                                            "finish tasks"))
    last = ""
    for e in files.episodes:
        if e.day < last:
            issues.append(Issue(EPISODIC, e.line, f"{e.day} comes after {last}: the log is "
                                                  "append-only, oldest first"))
        last = max(last, e.day)
    return sorted(issues, key=lambda i: (FILES.index(i.file), i.line))

def _lint_contradictions(files: MemoryFiles, issues: list[Issue]) -> None:
    """Two fact lines about one subject that the offline rules find contradictory."""
    from ..extraction.judges import compare_claims, slot_key

    entries = [(IDENTITY, e) for e in files.identity] + [(WORKING, e) for e in files.facts]
    for i, (f_new, new) in enumerate(entries):
        for f_old, old in entries[:i]:
            if slot_key(old.subject, "")[0] != slot_key(new.subject, "")[0] or \
                    old.slot == new.slot:
                continue
            verdict, reason = compare_claims(old.claim, new.claim, f"{f_old}:{old.line}")
            if verdict != "coexist":
                issues.append(Issue(f_new, new.line, f"likely contradicts {f_old}:{old.line} "
                                                     f"({reason}): keep one", "warning"))


__all__ = ["Issue", "lint_markdown", "parse_episode", "parse_episodic", "parse_fact",
           "parse_identity", "parse_working", "parse_working_dated", "read_files"]
