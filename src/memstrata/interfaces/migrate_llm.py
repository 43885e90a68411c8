"""Sorting a legacy MEMORY.md with a language model (``memstrata migrate --llm SPEC``).

Contract:
- The same lines as the rule-based sorter (:mod:`memstrata.interfaces.migrate`) are
  considered: headings give context, code blocks and lines holding a secret are skipped and
  never sent to the model. The model gets every other line, numbered, with its heading,
  and returns through structured output (:data:`SORT_SCHEMA`) where each line goes
  (identity, working, episodic or skip), and for identity lines the kind, subject and
  attribute; for working lines the checkpoint field; for episodic lines the date it reads;
  and which earlier line a line replaces.
- The model routes, it never rewrites: every entry keeps the line's own words, and its
  source (a cited one, else ``~FILE:LINE``). A date is exact only when the line itself
  states it; a date the model inferred is marked approximate (``~``).
- Every line sent must come back exactly once, and every line a reply names must have
  been sent; otherwise the reply is a :class:`~memstrata.errors.ProviderError` and nothing
  is written. A line the model replaces ("supersedes": an earlier line number) moves to
  episodic.md as history and is reported ``superseded``.
- The files go through the write policy when they are imported, like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ProviderError
from ..models import FACT_KINDS
from .markdown import APPROX, EpisodeEntry, FactEntry, MemoryFiles, TaskEntry
from .memory_files import write_files
from .migrate import BULLET, MigrationResult, Route, content_lines, find_date, slug, source_of

if TYPE_CHECKING:
    from ..providers.llm import LLMClient

FIELDS = ("objective", "next_action", "plan", "completed", "constraints")

SORT_SCHEMA: dict[str, Any] = {
    "title": "memory_file_routes",
    "type": "object",
    "properties": {
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "line": {"type": "integer"},
                    "destination": {"type": "string",
                                    "enum": ["identity", "working", "episodic", "skip"]},
                    "kind": {"type": ["string", "null"], "enum": [*FACT_KINDS, None]},
                    "subject": {"type": ["string", "null"]},
                    "attribute": {"type": ["string", "null"]},
                    "field": {"type": ["string", "null"], "enum": [*FIELDS, None]},
                    "date": {"type": ["string", "null"]},
                    "supersedes": {"type": ["integer", "null"]},
                    "reason": {"type": "string"},
                },
                "required": ["line", "destination", "kind", "subject", "attribute", "field",
                             "date", "supersedes", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["lines"],
    "additionalProperties": False,
}

SYSTEM = """You sort the lines of a person's legacy memory file (MEMORY.md) into three files:
- identity: stable facts about who they are and what always applies (preferences, role, \
rules, conventions, people, systems) - give kind (one of {kinds}), subject (the person is \
"user"; a project-wide fact is "project"; a named person or system by name) and attribute \
(a short name of the question the line answers, e.g. "preferred language", not its value);
- working: the current state of their work - give field: objective (what they are working \
on), next_action, plan (open items), completed (done items) or constraints;
- episodic: dated events, what happened - give date as YYYY-MM-DD when you can tell it;
- skip: nothing worth keeping.
When a line replaces an earlier one (an update, a switch, a newer current state), give the \
earlier line's number in supersedes. Answer for every line exactly once, by its number, \
with a one-line reason."""


def _lines(text: str) -> tuple[list[tuple[int, str, str]], list[Route]]:
    """(line, heading, text) of every content line to send; routes of what is not sent."""
    from ..governance.sensitivity import scan

    out: list[tuple[int, str, str]] = []
    skipped: list[Route] = []
    heading = ""
    for n, kind, line in content_lines(text):
        if kind == "skipped":
            skipped.append(Route(n, "", "skipped", line))
        elif kind == "heading":
            heading = line.lstrip("#").strip()
        else:
            body = BULLET.sub("", line).strip()
            report = scan(body)
            if report.has_secret:
                detectors = ", ".join(sorted({f.detector for f in report.secrets}))
                skipped.append(Route(n, "", "skipped", f"holds a secret ({detectors}): not "
                                                       "migrated, not sent to the model"))
            else:
                out.append((n, heading, body))
    return out, skipped


def migrate_with_llm(text: str, client: LLMClient, *, name: str = "MEMORY.md",
                     today: date) -> MigrationResult:
    """Sort ``text`` with ``client`` (see the module docstring)."""
    lines, skipped = _lines(text)
    result = MigrationResult(files=MemoryFiles(ordered=True, updated=today.isoformat()))
    result.routes += skipped
    if not lines:
        return result
    prompt = "\n".join(f"[L{n}] (under: {h or 'no heading'}) {t}" for n, h, t in lines)
    answer = client.complete_json(SYSTEM.format(kinds=", ".join(FACT_KINDS)), prompt,
                                  SORT_SCHEMA, max_tokens=max(1500, 90 * len(lines)))
    items = answer.get("lines") if isinstance(answer, Mapping) else None
    if not isinstance(items, list):
        raise ProviderError("the model answered without a lines list; nothing was written",
                            hint="use a model/server with structured output")
    sent = {n: (h, t) for n, h, t in lines}
    by_line: dict[int, Mapping[str, Any]] = {}
    for item in items:
        n = item.get("line") if isinstance(item, Mapping) else None
        if not isinstance(n, int) or n not in sent or n in by_line:
            raise ProviderError(f"the model routed line {n!r}, which was not sent or came "
                                "twice; nothing was written")
        by_line[n] = item
    missing = sorted(set(sent) - set(by_line))
    if missing:
        raise ProviderError(f"the model left out lines {missing}; nothing was written",
                            hint="retry, or sort without --llm")
    task = TaskEntry(task="current-work")
    last_day: date | None = None
    entries: dict[int, FactEntry | EpisodeEntry] = {}
    slots: set[tuple[str, str]] = set()
    holders: dict[str, int] = {}  # objective / next_action -> the line holding it
    replaced: list[tuple[int, int]] = []
    for n in sorted(by_line):
        item = by_line[n]
        text_ = sent[n][1]
        dest = item["destination"]
        why = str(item.get("reason") or "")[:200]
        source, body = source_of(text_, name, n)
        if dest == "identity":
            kind = item.get("kind") if item.get("kind") in FACT_KINDS else "profile"
            subject = slug(str(item.get("subject") or "user"), 3).replace("_", " ") or "user"
            attribute = slug(str(item.get("attribute") or body), 4).replace("_", " ")
            base, i = attribute, 2
            while (subject, attribute) in slots:  # one value per slot: number the others
                attribute, i = f"{base} {i}", i + 1
            slots.add((subject, attribute))
            fact = FactEntry(subject=subject, attribute=attribute, kind=str(kind), claim=body,
                             source=source, line=n)
            result.files.identity.append(fact)
            entries[n] = fact
            result.routes.append(Route(n, body, "identity",
                                       f"{kind} {subject}/{attribute} (model: {why})"))
        elif dest == "working":
            field = str(item["field"]) if item.get("field") in FIELDS else "plan"
            if field in ("objective", "next_action"):
                if field in holders:  # the most recent value wins, the earlier is history
                    replaced.append((holders[field], n))
                holders[field] = n
                task.fields[field] = body
            else:
                task.fields.setdefault(field, []).append(body)
            result.routes.append(Route(n, body, "working", f"{field} (model: {why})"))
        elif dest == "episodic":
            stated = find_date(text_, last_day or today, today)
            if stated is not None and stated[1]:
                day, approx = stated[0], False
            else:
                day, approx = _model_date(item.get("date")) or last_day or today, True
            last_day = day
            ep = EpisodeEntry(day=day.isoformat(), source=source, text=body, approx=approx,
                              line=n)
            result.files.episodes.append(ep)
            entries[n] = ep
            result.routes.append(Route(n, body, "episodic",
                                       f"{APPROX if approx else ''}{ep.day} (model: {why})"))
        else:
            result.routes.append(Route(n, body, "skipped", f"model: {why}"))
    for n in sorted(by_line):
        old = by_line[n].get("supersedes")
        if isinstance(old, int) and old < n and old in sent:
            replaced.append((old, n))
    for old, n in sorted(set(replaced)):
        _supersede(result, entries, task, holders, old, n, name)
    if task.fields:
        result.files.tasks.append(task)
    result.files.episodes.sort(key=lambda e: e.day)
    return result


def _model_date(value: Any) -> date | None:
    try:
        return date.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def _supersede(result: MigrationResult, entries: dict[int, FactEntry | EpisodeEntry],
               task: TaskEntry, holders: dict[str, int], old: int, new: int,
               name: str) -> None:
    """Line ``old`` is replaced by line ``new``: out of the current state, into history
    (a task field goes when ``old`` is still the line holding it)."""
    entry = entries.get(old)
    if isinstance(entry, FactEntry) and entry in result.files.identity:
        result.files.identity.remove(entry)
    for field_name in ("objective", "next_action"):
        if holders.get(field_name) == old:
            task.fields.pop(field_name, None)
            del holders[field_name]
    for route in result.routes:
        if route.line == old and route.destination in ("identity", "working"):
            route.destination = "superseded"
            route.note = f"superseded by line {new} (model)"
            result.files.episodes.append(EpisodeEntry(
                day=result.files.updated or date.today().isoformat(),
                source=f"{APPROX}{name}:{old}", text=f"{route.text} (superseded by line "
                                                         f"{new})", approx=True, line=old))


def migrate_file_with_llm(path: str | Path, directory: str | Path, client: LLMClient, *,
                          overwrite: bool = False, today: date | None = None
                          ) -> MigrationResult:
    """:func:`migrate_with_llm` over ``path``, written to ``directory`` (as
    :func:`memstrata.interfaces.migrate.migrate_memory_file` does)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if today is None:
        today = datetime.fromtimestamp(path.stat().st_mtime, UTC).date()
    result = migrate_with_llm(text, client, name=path.name, today=today)
    write_files(Path(directory), result.files.render(), overwrite=overwrite)
    return result


__all__ = ["SORT_SCHEMA", "migrate_file_with_llm", "migrate_with_llm"]
