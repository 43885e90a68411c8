"""Memory files to and from a store: export, import (DESIGN §9).

Contract:
- ``export_markdown`` writes the records of *exactly* the given scope (what
  a principal may read; current facts only, unexpired episodes), sorted
  deterministically, so export → import into a fresh store → export gives
  byte-identical files (``import_markdown(..., trust=True)``). Whitespace
  inside a value is collapsed to single spaces. Files that differ from what would be
  written are not replaced unless ``overwrite`` (a person's edits are never lost).
- ``import_markdown`` parses every file first (a format error writes
  nothing), then writes through the library: facts through the write policy
  with actor ``import`` (secrets are refused, PII goes to review). Identity
  entries always arrive as *pending review*; only with ``trust=True`` — a
  person on the command line vouching for the files — are they (and any
  other entry the policy held back) approved, with that person as reviewer.
  Entries of "Pending identity changes" stay pending. Re-importing is
  idempotent: equal facts are duplicates, existing episodes and unchanged
  checkpoints are skipped. Which episodes exist is decided again inside each
  batch's write transaction (:meth:`~memstrata.layers.episodes.Episodes.append_missing`),
  so two imports of the same files at once store each episode once; it sees every
  episode of exactly the scope, also one restricted to readers other than the scope's
  user (the import is the operator's act on the scope), which the report only counts.

The file format itself is :mod:`memstrata.interfaces.markdown`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Conflict, ValidationError
from ..models import CHECKPOINT_FIELDS, Checkpoint, Scope, make_scope
from ..retrieval.context import shown
from .markdown import (
    _LISTS,
    APPROX_FLAG,
    EPISODIC,
    FILES,
    IDENTITY,
    IMPORT_CONFIDENCE,
    WORKING,
    EpisodeEntry,
    FactEntry,
    MemoryFiles,
    TaskEntry,
    _day,
    one_line,
)
from .markdown_read import Issue, read_files

if TYPE_CHECKING:
    from ..memory import Memory


# -- export -------------------------------------------------------------------

@dataclass
class ExportReport:
    """What an export wrote."""

    directory: Path
    counts: dict[str, int]
    files: list[Path]


def _fact_entry(f: Any, *, dated: bool = True) -> FactEntry:
    """A fact as a file line; working-context facts say since when they hold (identity is
    stable and carries no date)."""
    since = (f.valid_from or f.created_at) if dated else None
    return FactEntry(subject=f.subject, attribute=f.attribute, kind=f.kind, claim=f.claim,
                     source=f.provenance.source,
                     expires=f.expires_at.date().isoformat() if f.expires_at else None,
                     readers=sorted(f.readers) if f.readers else None,
                     since=since.date().isoformat() if since else None)


def collect(mem: Memory, scope: Scope | dict[str, Any], *, principal: str | None = None,
            marked: bool = False) -> MemoryFiles:
    """The scope's memory as file entries (exactly this scope, readable by the principal).
    ``marked``: for a model's view (the MCP resources, the Claude memory tool), a task's
    value that reads as an instruction to the agent carries the context's
    :data:`~memstrata.retrieval.context.QUARANTINED` marker; reading a file back
    (:func:`~memstrata.interfaces.markdown_read.parse_working`) drops it."""
    scope = make_scope(scope)
    current = [f for f in mem.facts.current(scope, limit=100_000, principal=principal)
               if f.scope == scope]
    pending = [f for f in mem.review.pending(scope, principal=principal, limit=100_000)
               if f.scope == scope and f.tier == "identity"]
    files = MemoryFiles(
        identity=[_fact_entry(f, dated=False) for f in current if f.tier == "identity"],
        facts=[_fact_entry(f) for f in current if f.tier != "identity"],
        pending_identity=[_fact_entry(f, dated=False) for f in pending],
        updated=mem.clock.now().date().isoformat(),
    )
    for task in mem.checkpoints.tasks(scope):
        cp = mem.checkpoints.current(scope, task)
        if cp is not None:
            fields = {name: getattr(cp, name) for name in CHECKPOINT_FIELDS}
            if marked:
                fields = {name: ([shown(x) for x in value] if isinstance(value, list) else
                                 shown(value) if isinstance(value, str) else value)
                          for name, value in fields.items()}
            files.tasks.append(TaskEntry(
                task=task, fields=fields,
                updated=cp.updated_at.date().isoformat() if cp.updated_at else None,
                version=cp.version))
    episodes = mem.episodes.log(scope, principal=principal)
    by_id = {e.id: e for e in episodes}
    per_day: dict[str, int] = {}
    for e in episodes:
        day = e.observed_at.date().isoformat()
        per_day[day] = per_day.get(day, 0) + 1
    files.episodes = []
    for e in episodes:
        marker = None
        target = by_id.get(e.supersedes) if e.supersedes else None
        if target is not None:
            day = target.observed_at.date().isoformat()
            marker = (day, target.provenance.source if per_day[day] > 1 else None)
        files.episodes.append(EpisodeEntry(
            day=e.observed_at.date().isoformat(), source=e.provenance.source,
            text=_episode_text(e), event=e.event, approx=APPROX_FLAG in e.flags,
            readers=sorted(e.readers) if e.readers else None, supersedes=marker))
    return files


def write_files(directory: Path, texts: dict[str, str], *, overwrite: bool = False) -> list[Path]:
    """Write the files atomically; refuses to replace different content unless ``overwrite``."""
    directory.mkdir(parents=True, exist_ok=True)
    if not overwrite:
        changed = [n for n, t in texts.items()
                   if (directory / n).exists() and (directory / n).read_bytes() != t.encode()]
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
    #: Lines not taken (``skip_invalid``), each ``file:line: reason``.
    skipped: list[str] = field(default_factory=list)
    #: Things worth knowing that changed nothing (an unresolved supersedes marker).
    notes: list[str] = field(default_factory=list)

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n


Progress = Callable[[int, int], None]


def import_markdown(mem: Memory, scope: Scope | dict[str, Any], directory: str | Path, *,
                    trust: bool = False, reviewer: str | None = None,
                    progress: Progress | None = None,
                    skip_invalid: bool = False) -> ImportReport:
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
    errors = sorted((i for i in issues if i.severity == "error"),
                    key=lambda i: (FILES.index(i.file) if i.file in FILES else 9, i.line))
    if errors and not skip_invalid:
        raise ValidationError(f"{len(errors)} line(s) in {directory} cannot be imported; "
                              "nothing imported",
                              hint="; ".join(str(i) for i in errors[:3])
                                   + ("; ..." if len(errors) > 3 else "")
                                   + " — fix them, or import the rest with skip_invalid=True "
                                     "(--skip-invalid)",
                              problems=[str(i) for i in errors])
    report = ImportReport(skipped=[str(i) for i in errors])
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
        valid_from=_day(e.since, f"{fname}:{e.line}") if e.since else None,
        # a date: the end of that day (an export writes the day a fact expires on)
        expires_at=_day(e.expires, f"{fname}:{e.line}") + timedelta(days=1, seconds=-1)
        if e.expires else None,
        readers=e.readers)
    if res.status == "rejected":
        report.add("rejected")
        report.rejected.append(f"{fname}:{e.line}: {res.reason}")
        return
    assert res.record is not None
    waiting = res.status == "pending" or (res.status == "duplicate"
                                          and res.record.status == "pending_review")
    if waiting and reviewer is not None:
        mem.review.approve(res.record.id, by=reviewer, scope=scope)
        report.add("approved")
        return
    if res.status == "pending":
        report.pending.append(f"{res.record.ref} ({fname}:{e.line}): {res.reason}")
    report.add(res.status)


def checkpoint_holds(cp: Checkpoint | None, fields: Mapping[str, Any]) -> bool:
    """Does the current checkpoint ``cp`` already hold these field values (an empty value
    and a missing one alike)? Then saving them again would only add a version."""
    return cp is not None and all((getattr(cp, n) or None) == (v or None)
                                  for n, v in fields.items())


def _import_task(mem: Memory, scope: Scope, t: TaskEntry, report: ImportReport) -> None:
    fields = {name: t.fields.get(name, [] if name in dict(_LISTS) else None)
              for name in CHECKPOINT_FIELDS}
    if checkpoint_holds(mem.checkpoints.current(scope, t.task), fields):
        report.add("checkpoints_unchanged")
        return
    as_of = _day(t.updated, f"{WORKING}:{t.line}") if t.updated else None
    if as_of is not None and as_of > mem.clock.now():
        as_of = None
    mem.checkpoints.save(scope, t.task, by="import", as_of=as_of, **fields)
    report.add("checkpoints")


def _import_episodes(mem: Memory, scope: Scope, entries: list[EpisodeEntry],
                     report: ImportReport) -> None:
    """Append the entries not in the log yet, in order; a ``supersedes`` marker links the
    entry to the one it names (its day, and its source when given; the same event first)."""
    logged = mem.episodes.log(scope)
    existing = {_key(ep) for ep in logged}
    by_day: dict[str, list[tuple[str, str, str]]] = {}
    for ep in logged:
        by_day.setdefault(ep.observed_at.date().isoformat(), []).append(
            (ep.id, ep.provenance.source, ep.event))
    batch: list[tuple[EpisodeEntry, dict[str, Any]]] = []

    def flush() -> None:
        if not batch:
            return
        for start in range(0, len(batch), 500):
            chunk = batch[start:start + 500]
            # decided again where it is written: another import of these files may have
            # stored some since the log was read (each is stored once, whoever wins)
            stored = mem.episodes.append_missing([i for _, i in chunk],
                                                 [entry.key for entry, _ in chunk], _key)
            for (entry, _), (ep, new) in zip(chunk, stored, strict=True):
                report.add("episodes" if new else "episodes_existing")
                if new:
                    by_day.setdefault(entry.day, []).append((ep.id, entry.source,
                                                             entry.event))
        batch.clear()

    for e in entries:
        if e.key in existing:
            report.add("episodes_existing")
            continue
        existing.add(e.key)
        item: dict[str, Any] = {
            "scope": scope, "text": e.text, "event": e.event, "actor": "import",
            "source": e.source, "observed_at": _day(e.day, f"{EPISODIC}:{e.line}"),
            "readers": e.readers, "flags": [APPROX_FLAG] if e.approx else []}
        if e.supersedes is None:
            batch.append((e, item))
            continue
        flush()
        day, source = e.supersedes
        found = [c for c in by_day.get(day, []) if source is None or c[1] == source]
        found = [c for c in found if c[2] == e.event] or found
        if found:
            item["supersedes"] = found[-1][0]
        else:
            report.notes.append(f"{EPISODIC}:{e.line}: supersedes the {day} entry, which is not "
                                "in the log; imported without the link")
        batch.append((e, item))
        flush()
    flush()


def _episode_text(e: Any) -> str:
    """An episode's text as the file writes it (its outcome in parentheses)."""
    return str(e.text) + (f" (outcome: {e.outcome})" if e.outcome else "")


def _key(e: Any) -> tuple[str, str, str]:
    """What an :attr:`EpisodeEntry.key` of this stored episode would be."""
    return (e.observed_at.date().isoformat(), one_line(e.provenance.source),
            one_line(_episode_text(e)))


__all__ = ["ExportReport", "ImportReport", "checkpoint_holds", "collect", "export_markdown",
           "import_markdown", "write_files"]
