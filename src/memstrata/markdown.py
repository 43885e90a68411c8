"""Files people can read (DESIGN §9): export, import, migrate and lint Markdown memory.

Three files per scope:

``identity.md`` — small and stable: the identity-tier facts, one per slot::

    - **alice / role** (profile): Alice leads the docs team at Acme. — source: hr:directory

``working-context.md`` — one current value per field: the current standard
facts (same line format), every task's checkpoint (``## Task: NAME`` with
``- Objective: ...``, ``- Next action: ...``, ``- Notes: ...`` and
``### Plan`` / ``### Completed`` / ... lists), and ``## Pending identity
changes``: identity facts waiting for a person's approval.

``episodic.md`` — append-only, one entry per line, oldest first::

    - 2026-08-01 (ci:run/812): Deploy preview failed: stale build cache [deploy_failed]

A date or source starting with ``~`` is approximate (reconstructed by
``migrate``). A fact line may end its metadata with ``; expires DATE`` and
``; readers a,b``; an episode line may end with ``[event]`` and
``{readers: a,b}``.

Contract:
- ``export_markdown`` writes the records of *exactly* the given scope (what
  a principal may read; current facts only, unexpired episodes), sorted
  deterministically, so export → import into a fresh store → export gives
  byte-identical files (``import_markdown(..., trust=True)``). Whitespace
  inside a value is collapsed to single spaces.
- ``import_markdown`` parses every file first (a format error writes
  nothing), then writes through the library: facts through the write policy
  with actor ``import`` (secrets are refused, PII goes to review). Identity
  entries always arrive as *pending review*; only with ``trust=True`` — a
  person on the command line vouching for the files — are they (and any
  other entry the policy held back) approved, with that person as reviewer.
  Entries of "Pending identity changes" stay pending. Re-importing is
  idempotent: equal facts are duplicates, existing episodes and unchanged
  checkpoints are skipped.
- ``lint_markdown`` checks format and sizes. Sorting a legacy MEMORY.md into
  the three files lives in :mod:`memstrata.migrate`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import Conflict, ValidationError
from .models import CHECKPOINT_FIELDS, FACT_KINDS, Scope, make_scope

if TYPE_CHECKING:
    from .memory import Memory

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
_TITLES = {name: text.splitlines()[0] for name, text in _HEADERS.items()}

_SINGLE = (("objective", "Objective"), ("next_action", "Next action"), ("notes", "Notes"))
_LISTS = (("constraints", "Constraints"), ("plan", "Plan"), ("completed", "Completed"),
          ("evidence", "Evidence"), ("source_refs", "Source refs"),
          ("pending_identity_changes", "Pending identity changes"))
_SINGLE_BY_LABEL = {label.lower(): name for name, label in _SINGLE}
_LIST_BY_LABEL = {label.lower(): name for name, label in _LISTS}

_FACT_RE = re.compile(r"^- \*\*(?P<slot>.+?)\*\* \((?P<kind>[a-z_]+)\): (?P<rest>.+)$")
_EPISODE_RE = re.compile(r"^(?:- )?(?P<approx>~?)(?P<date>\d{4}-\d{2}-\d{2}) \((?P<source>.+?)\): "
                         r"(?P<text>.+)$")
_EVENT_RE = re.compile(r"^(?P<text>.*\S) \[(?P<event>[A-Za-z0-9_.:\-]+)\]$")
_READERS_RE = re.compile(r"^(?P<text>.*\S) \{readers: (?P<readers>[^{}]+)\}$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
SOURCE_SEP = " — source: "


def one_line(text: str) -> str:
    """Collapse whitespace runs (newlines included) to single spaces."""
    return " ".join(text.split())


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

    def render(self) -> str:
        meta = [self.source]
        if self.expires:
            meta.append(f"expires {self.expires}")
        if self.readers:
            meta.append("readers " + ",".join(self.readers))
        return (f"- **{self.subject} / {self.attribute}** ({self.kind}): {one_line(self.claim)}"
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

    def render(self) -> str:
        out = f"- {APPROX if self.approx else ''}{self.day} ({one_line(self.source)}): " \
              f"{one_line(self.text)}"
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

    def render(self) -> list[str]:
        out = [f"## Task: {one_line(self.task)}", ""]
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

    def render(self) -> dict[str, str]:
        """The three files' text, deterministically ordered."""
        identity = [_HEADERS[IDENTITY], *_fact_block(self.identity)]
        working = [_HEADERS[WORKING], "## Current facts", "", *_fact_block(self.facts, "")]
        for task in sorted(self.tasks, key=lambda t: t.task):
            working += [*task.render(), ""]
        working += ["## Pending identity changes", "", *_fact_block(self.pending_identity, "")]
        episodes = sorted(self.episodes, key=lambda e: e.day)  # stable: keeps same-day order
        episodic = [_HEADERS[EPISODIC], *(e.render() for e in episodes)]
        return {IDENTITY: _join(identity), WORKING: _join(working), EPISODIC: _join(episodic)}


def _fact_block(entries: Sequence[FactEntry], lead: str | None = None) -> list[str]:
    lines = [f.render() for f in sorted(entries, key=lambda f: (f.subject, f.attribute))]
    if not lines:
        lines = ["_none_"]
    if lead is None:
        return lines
    return [*lines, lead]


def _join(parts: list[str]) -> str:
    text = "\n".join(parts).rstrip("\n")
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text + "\n"


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


def parse_fact(text: str, file: str, line: int, issues: list[Issue]) -> FactEntry | None:
    m = _FACT_RE.match(text)
    if m is None:
        issues.append(Issue(file, line, "not a fact line: expected "
                                         "'- **subject / attribute** (kind): claim — source: S'"))
        return None
    subject, sep, attribute = m["slot"].partition(" / ")
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
    expires = None
    readers = None
    while len(parts) > 1:
        last = parts[-1]
        if last.startswith("expires ") and _DATE_RE.match(last[8:]):
            expires = last[8:]
        elif last.startswith("readers ") and last[8:].strip():
            readers = sorted(r.strip() for r in last[8:].split(",") if r.strip())
        else:
            break
        parts.pop()
    source = "; ".join(parts).strip()
    if not source:
        issues.append(Issue(file, line, "empty source"))
        return None
    return FactEntry(subject=subject.strip(), attribute=attribute.strip(), kind=m["kind"],
                     claim=claim.strip(), source=source, expires=expires, readers=readers,
                     line=line)


def parse_episode(text: str, file: str, line: int, issues: list[Issue]) -> EpisodeEntry | None:
    m = _EPISODE_RE.match(text)
    if m is None:
        issues.append(Issue(file, line, "not an episode line: expected "
                                        "'- YYYY-MM-DD (source): what happened'"))
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
    event = "note"
    em = _EVENT_RE.match(body)
    if em is not None:
        body, event = em["text"], em["event"]
    return EpisodeEntry(day=m["date"], source=m["source"].strip(), text=body, event=event,
                        approx=bool(m["approx"]), readers=readers, line=line)


def _content_lines(text: str) -> list[tuple[int, str]]:
    return [(n, ln.rstrip()) for n, ln in enumerate(text.splitlines(), 1)]


def parse_identity(text: str, issues: list[Issue], file: str = IDENTITY) -> list[FactEntry]:
    out = []
    for n, ln in _content_lines(text):
        if ln.startswith("- "):
            entry = parse_fact(ln, file, n, issues)
            if entry is not None:
                out.append(entry)
        elif ln.startswith("#") and ln != _TITLES[IDENTITY]:
            issues.append(Issue(file, n, f"unexpected heading {ln!r}: identity.md holds "
                                         "one list of facts", "warning"))
    return out


def parse_working(text: str, issues: list[Issue], file: str = WORKING
                  ) -> tuple[list[FactEntry], list[TaskEntry], list[FactEntry]]:
    facts: list[FactEntry] = []
    tasks: list[TaskEntry] = []
    pending: list[FactEntry] = []
    section: str | None = None
    task: TaskEntry | None = None
    list_field: str | None = None
    for n, ln in _content_lines(text):
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
                    task.fields[list_field].append(ln[2:].strip())
                    continue
                label, sep, value = ln[2:].partition(": ")
                name = _SINGLE_BY_LABEL.get(label.strip().lower())
                if not sep or name is None:
                    issues.append(Issue(file, n, "expected '- Objective: ...', '- Next action: "
                                                 "...' or '- Notes: ...' before the lists"))
                elif name in task.fields:
                    issues.append(Issue(file, n, f"{label} given twice (one current value "
                                                 "per field)"))
                else:
                    task.fields[name] = value.strip()
            else:
                issues.append(Issue(file, n, "entry outside a known section"))
        elif ln.startswith("#") and ln != _TITLES[WORKING]:
            issues.append(Issue(file, n, f"unexpected heading {ln!r}", "warning"))
    return facts, tasks, pending


def parse_episodic(text: str, issues: list[Issue], file: str = EPISODIC) -> list[EpisodeEntry]:
    out = []
    for n, ln in _content_lines(text):
        if ln.startswith("- ") or _EPISODE_RE.match(ln):
            entry = parse_episode(ln, file, n, issues)
            if entry is not None:
                out.append(entry)
        elif ln.startswith("#") and ln != _TITLES[EPISODIC]:
            issues.append(Issue(file, n, f"unexpected heading {ln!r}", "warning"))
    return out


def read_files(directory: Path, issues: list[Issue]) -> MemoryFiles:
    """Parse whichever of the three files exist in ``directory``."""
    files = MemoryFiles()
    path = directory / IDENTITY
    if path.exists():
        files.identity = parse_identity(path.read_text(encoding="utf-8"), issues)
    path = directory / WORKING
    if path.exists():
        files.facts, files.tasks, files.pending_identity = parse_working(
            path.read_text(encoding="utf-8"), issues)
    path = directory / EPISODIC
    if path.exists():
        files.episodes = parse_episodic(path.read_text(encoding="utf-8"), issues)
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


# -- export -------------------------------------------------------------------

@dataclass
class ExportReport:
    """What an export wrote."""

    directory: Path
    counts: dict[str, int]
    files: list[Path]


def _fact_entry(f: Any) -> FactEntry:
    return FactEntry(subject=f.subject, attribute=f.attribute, kind=f.kind, claim=f.claim,
                     source=f.provenance.source,
                     expires=f.expires_at.date().isoformat() if f.expires_at else None,
                     readers=sorted(f.readers) if f.readers else None)


def collect(mem: Memory, scope: Scope | dict[str, Any], *, principal: str | None = None
            ) -> MemoryFiles:
    """The scope's memory as file entries (exactly this scope, readable by the principal)."""
    from .episodes import episode_from_row

    scope = make_scope(scope)
    current = [f for f in mem.facts.current(scope, limit=100_000, principal=principal)
               if f.scope == scope]
    pending = [f for f in mem.review.pending(scope, principal=principal, limit=100_000)
               if f.scope == scope and f.tier == "identity"]
    files = MemoryFiles(
        identity=[_fact_entry(f) for f in current if f.tier == "identity"],
        facts=[_fact_entry(f) for f in current if f.tier != "identity"],
        pending_identity=[_fact_entry(f) for f in pending],
    )
    for task in mem.checkpoints.tasks(scope):
        cp = mem.checkpoints.current(scope, task)
        if cp is not None:
            files.tasks.append(TaskEntry(task=task, fields={
                name: getattr(cp, name) for name in CHECKPOINT_FIELDS}))
    where, params = mem.episodes.filter_sql(scope, principal)
    with mem.db.transaction(scope.tenant, write=False) as tx:
        rows = tx.all(f"SELECT r.* FROM episodes r WHERE {where} AND r.scope_key = ?",
                      [*params, scope.key])
    episodes = [episode_from_row(r) for r in rows]
    episodes.sort(key=lambda e: (e.observed_at, e.created_at, e.id))
    files.episodes = [
        EpisodeEntry(day=e.observed_at.date().isoformat(), source=e.provenance.source,
                     text=e.text + (f" (outcome: {e.outcome})" if e.outcome else ""),
                     event=e.event, approx=APPROX_FLAG in e.flags,
                     readers=sorted(e.readers) if e.readers else None)
        for e in episodes
    ]
    return files


def write_files(directory: Path, texts: dict[str, str], *, overwrite: bool = False) -> list[Path]:
    """Write the files atomically; refuses to replace different content unless ``overwrite``."""
    directory.mkdir(parents=True, exist_ok=True)
    if not overwrite:
        changed = [n for n, t in texts.items()
                   if (directory / n).exists() and (directory / n).read_text("utf-8") != t]
        if changed:
            raise Conflict(f"{', '.join(changed)} in {directory} differ from what would be "
                           "written", hint="import your edits first, or overwrite (--force)")
    out = []
    for name, text in texts.items():
        path = directory / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8", newline="\n")
        tmp.replace(path)
        out.append(path)
    return out


def export_markdown(mem: Memory, scope: Scope | dict[str, Any], directory: str | Path, *,
                    principal: str | None = None, overwrite: bool = False) -> ExportReport:
    """Write identity.md, working-context.md and episodic.md for exactly ``scope``."""
    files = collect(mem, scope, principal=principal)
    written = write_files(Path(directory), files.render(), overwrite=overwrite)
    counts = {"identity": len(files.identity), "facts": len(files.facts),
              "tasks": len(files.tasks), "pending_identity": len(files.pending_identity),
              "episodes": len(files.episodes)}
    return ExportReport(directory=Path(directory), counts=counts, files=written)


# -- import -------------------------------------------------------------------

@dataclass
class ImportReport:
    """What an import did, entry by entry."""

    counts: dict[str, int] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n


Progress = Callable[[int, int], None]


def import_markdown(mem: Memory, scope: Scope | dict[str, Any], directory: str | Path, *,
                    trust: bool = False, reviewer: str | None = None,
                    progress: Progress | None = None) -> ImportReport:
    """Read the three files into ``scope`` through the write policy (see module docstring)."""
    scope = make_scope(scope)
    directory = Path(directory)
    if not any((directory / n).exists() for n in FILES):
        raise ValidationError(f"no memory files in {directory}",
                              hint=f"expected {', '.join(FILES)} (memstrata export --markdown)")
    if trust and not reviewer:
        raise ValidationError("a trusted import needs the reviewer's name",
                              hint="pass reviewer= (--reviewer NAME)")
    issues: list[Issue] = []
    files = read_files(directory, issues)
    errors = [i for i in issues if i.severity == "error"]
    if errors:
        raise ValidationError(f"{len(errors)} format error(s) in {directory}; nothing imported",
                              hint="; ".join(str(i) for i in errors[:5]),
                              problems=[str(i) for i in errors])
    report = ImportReport()
    total = (len(files.identity) + len(files.facts) + len(files.pending_identity)
             + len(files.tasks) + (1 if files.episodes else 0))
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    groups = ((IDENTITY, files.identity, "identity", True),
              (WORKING, files.facts, "standard", True),
              (WORKING, files.pending_identity, "identity", False))
    for fname, entries, tier, approvable in groups:
        for e in entries:
            _import_fact(mem, scope, e, fname, tier, report,
                         reviewer=reviewer if trust and approvable else None)
            tick()
    for t in files.tasks:
        _import_task(mem, scope, t, report)
        tick()
    if files.episodes:
        _import_episodes(mem, scope, files.episodes, report)
        tick()
    return report


def _import_fact(mem: Memory, scope: Scope, e: FactEntry, fname: str, tier: str,
                 report: ImportReport, *, reviewer: str | None) -> None:
    res = mem.facts.propose(
        scope, claim=e.claim, kind=e.kind, subject=e.subject, attribute=e.attribute,
        actor="import", source=e.source, confidence=IMPORT_CONFIDENCE, tier=tier,
        evidence=f"imported from {fname}:{e.line}",
        expires_at=_day(e.expires, f"{fname}:{e.line}") if e.expires else None,
        readers=e.readers)
    if res.status == "rejected":
        report.add("rejected")
        report.rejected.append(f"{fname}:{e.line}: {res.reason}")
        return
    assert res.record is not None
    waiting = res.status == "pending" or (res.status == "duplicate"
                                          and res.record.status == "pending_review")
    if waiting and reviewer is not None:
        mem.review.approve(res.record.id, reviewer=reviewer, tenant=scope.tenant)
        report.add("approved")
        return
    if res.status == "pending":
        report.pending.append(f"{res.record.ref} ({fname}:{e.line}): {res.reason}")
    report.add(res.status)


def _import_task(mem: Memory, scope: Scope, t: TaskEntry, report: ImportReport) -> None:
    fields = {name: t.fields.get(name, [] if name in dict(_LISTS) else None)
              for name in CHECKPOINT_FIELDS}
    cp = mem.checkpoints.current(scope, t.task)
    if cp is not None and all(
        (getattr(cp, n) or None) == (fields[n] or None) for n in CHECKPOINT_FIELDS
    ):
        report.add("checkpoints_unchanged")
        return
    mem.checkpoints.save(scope, t.task, updated_by="import", **fields)
    report.add("checkpoints")


def _import_episodes(mem: Memory, scope: Scope, entries: list[EpisodeEntry],
                     report: ImportReport) -> None:
    existing = {e.key for e in collect_episode_keys(mem, scope)}
    batch = []
    for e in entries:
        if e.key in existing:
            report.add("episodes_existing")
            continue
        existing.add(e.key)
        batch.append({"scope": scope, "text": e.text, "event": e.event, "actor": "import",
                      "source": e.source, "observed_at": _day(e.day, f"{EPISODIC}:{e.line}"),
                      "readers": e.readers, "flags": [APPROX_FLAG] if e.approx else []})
    for start in range(0, len(batch), 500):
        mem.episodes.append_many(batch[start:start + 500])
    report.add("episodes", len(batch))


def collect_episode_keys(mem: Memory, scope: Scope) -> list[EpisodeEntry]:
    """The episodes already in exactly ``scope`` that its user may read, as entries."""
    return collect(mem, scope).episodes


# -- lint ---------------------------------------------------------------------

def lint_markdown(directory: str | Path, *, identity_max_entries: int = IDENTITY_MAX_ENTRIES,
                  identity_max_tokens: int = IDENTITY_MAX_TOKENS,
                  working_max_tokens: int = WORKING_MAX_TOKENS) -> list[Issue]:
    """Check format and sizes of the three files; returns the issues (empty = clean)."""
    from .sensitivity import scan
    from .tokens import count_tokens

    directory = Path(directory)
    issues: list[Issue] = []
    for name in FILES:
        path = directory / name
        if not path.exists():
            issues.append(Issue(name, 0, "file is missing"))
            continue
        text = path.read_text(encoding="utf-8")
        first = text.splitlines()[0] if text else ""
        if first != _TITLES[name]:
            issues.append(Issue(name, 1, f"the first line should be {_TITLES[name]!r}"))
        for n, ln in _content_lines(text):
            found = scan(ln)
            if found.has_secret:
                issues.append(Issue(name, n, "contains a secret (" + ", ".join(
                    sorted({f.detector for f in found.secrets})) + "): remove it"))
    files = read_files(directory, issues)
    path = directory / IDENTITY
    if path.exists():
        tokens = count_tokens(path.read_text(encoding="utf-8"))
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
        tokens = count_tokens(path.read_text(encoding="utf-8"))
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

__all__ = [
    "EPISODIC",
    "FILES",
    "IDENTITY",
    "WORKING",
    "EpisodeEntry",
    "ExportReport",
    "FactEntry",
    "ImportReport",
    "Issue",
    "MemoryFiles",
    "TaskEntry",
    "collect",
    "export_markdown",
    "import_markdown",
    "lint_markdown",
    "read_files",
    "write_files",
]
