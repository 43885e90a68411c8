"""A backend for Claude's memory tool (``memory_20250818``) on memstrata's layers.

Claude sees a ``/memories`` directory; behind it nothing is a file. Each path is a view
rendered from the store for one fixed scope (the three memory files of
:mod:`memstrata.interfaces.markdown`), and each command an agent issues becomes a governed
write through the library:

- ``/memories/identity.md`` — identity facts. A line the agent adds or changes becomes a
  *pending* identity proposal (a person approves it: ``memstrata review``); removing a line
  is refused (only a person changes identity).
- ``/memories/working-context.md`` — current facts, each task's checkpoint and the identity
  changes waiting for a person, one current value per field. Writing it overwrites, and
  the edit is what changed against its base (below): a ``## Task:`` section saves that task's
  checkpoint (a removed field line clears the field); a removed section closes the task, as
  the ``close_task`` tool does (its history stays; writing the section again reopens it).
  A new or changed fact line goes through the write policy (an agent's claim waits for
  review); a removed one retires the fact as the ``retire_fact`` tool would for this actor
  (:class:`~memstrata.interfaces.tools.ToolDispatcher`: a model never retires an identity
  fact, and the view holds only this scope's own facts, so one shared beyond it is never
  reached). A line added under "Pending identity changes" is an identity proposal; a removed
  one stays (only a person approves or rejects it: ``memstrata review``), and the reply says
  so (an ``Error:`` when that was all the edit did). Every change is checked (line format,
  claims, names, field sizes) before the first write, so a refused edit writes nothing; a
  write that still fails mid-way is an ``Error:`` that names what was written before it. An
  edit that changes nothing says so.
- ``/memories/episodic.md`` — the episodic log, append-only. Lines added at the end become
  episodes (each dated and sourced: ``- YYYY-MM-DD (source): what happened``, or refused
  with the reason); changing or deleting an existing line is refused.
- ``view`` of ``/memories`` lists the files; ``delete`` and ``rename`` are refused (the
  files are views, and the log is append-only); a path outside ``/memories`` or with
  ``..`` is refused; text carrying a secret is refused before anything is written.

Only what the model was shown can be removed. An edit of identity.md or
working-context.md is compared with its *base*, what the model was shown of the file: for
``str_replace`` and ``insert`` the file as it stands (the edit applies to it, so what it
removes it names); for ``create`` what this tool last showed the model of that path: its
last whole ``view`` (a ``view_range`` records nothing), carried forward by each later write
through this tool (an entry the write changed is known as written, one it removed is gone,
one it left alone stays as last shown, or unseen). An entry is removed only when it is in
the base, missing from the new text, and still stands as shown: a fact line whose current
claim, or a task whose fields, changed since are kept, and so is every entry the model was
not shown (added since its view; with no view of the file, every entry: a ``create`` then
removes nothing); the reply names what it kept. A line left as the base has it writes
nothing, even if the store changed since (no older value is written back), and a task
section saves only the fields it changed against the base.

Every reply is text for the model; a refusal starts with ``Error:`` and says why. The SDK
hands the model's input over unchecked, so each command's fields are checked first: an
input that is not an object, an unknown command, or a field missing or of the wrong type
(``path``, ``file_text``, ``old_str``, ``new_str``, ``insert_text``, ``old_path`` and
``new_path`` are strings, ``insert_line`` an integer, ``view_range`` two line numbers
``[first, last]``, ``-1`` for the end) is an ``Error:`` reply naming the field, and nothing
is written. One tool runs one write at a time (an edit is read, compared and written as one
step).

:class:`MemstrataMemoryTool` subclasses the Anthropic SDK's ``BetaAbstractMemoryTool`` (``pip
install 'memstrata[anthropic]'``), so ``Anthropic().beta.messages.tool_runner(tools=[tool])``
drives it; :class:`AsyncMemstrataMemoryTool` subclasses ``BetaAsyncAbstractMemoryTool`` for
``AsyncAnthropic()``'s runner and runs each command of a :class:`MemstrataMemoryTool` in a
worker thread (``anyio.to_thread``: the store's calls block), so both give the same replies
and writes.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..errors import ConfigError, MemstrataError

try:
    from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool
    from anyio import to_thread  # the SDK's own dependency: its async tools run on it
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigError("the Claude memory tool backend needs the anthropic SDK",
                      hint="pip install 'memstrata[anthropic]'") from exc


from ..governance.policy import Candidate
from ..governance.safety import write_actor
from ..governance.sensitivity import scan
from ..inputs import MAX_NAME, text_arg
from ..layers.checkpoints import clean_fields, task_arg
from ..models import Fact, Scope, build, make_scope
from .markdown import EPISODIC, IDENTITY, WORKING, FactEntry, TaskEntry, one_line
from .markdown_read import Issue, parse_episodic, parse_identity, parse_working
from .memory_files import checkpoint_holds, collect
from .tools import ToolDispatcher

if TYPE_CHECKING:
    from anthropic.lib.tools import BetaFunctionToolResultType
    from anthropic.types.beta import (
        BetaMemoryTool20250818Command,
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818DeleteCommand,
        BetaMemoryTool20250818InsertCommand,
        BetaMemoryTool20250818RenameCommand,
        BetaMemoryTool20250818StrReplaceCommand,
        BetaMemoryTool20250818ViewCommand,
    )

    from ..memory import Memory

ROOT = "/memories"
FILES = (IDENTITY, WORKING, EPISODIC)
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
#: What each string field holds, for the refusal that names it.
_FIELDS = {"path": "a path such as /memories/episodic.md",
           "file_text": "the whole text of the file",
           "old_str": "the text to replace, occurring once in the file",
           "new_str": "the text that replaces old_str; '' removes it",
           "insert_text": "the text to insert",
           "old_path": "the path to rename", "new_path": "the new path"}


def _text(command: Any, field: str) -> str:
    """The string field ``field`` of a command, or ValueError naming it."""
    value = getattr(command, field, None)
    if isinstance(value, str):
        return value
    what = "is missing" if value is None else f"must be a string, not {type(value).__name__}"
    raise ValueError(f"{field} {what}: the {getattr(command, 'command', '')} command takes "
                     f"{field} ({_FIELDS[field]})")


def _line(command: Any) -> int:
    """``insert_line`` (an ``int``, not a bool), or ValueError naming it."""
    value = getattr(command, "insert_line", None)
    if isinstance(value, bool) or not isinstance(value, int):
        what = "is missing" if value is None else f"must be an integer, not {value!r}"
        raise ValueError(f"insert_line {what}: the insert command takes insert_line (the "
                         "number of the line the text goes after; 0 puts it first)")
    return value


def _range(command: Any) -> tuple[int, int] | None:
    """``view_range`` as (first, last), -1 meaning the last line; None when absent."""
    value = getattr(command, "view_range", None)
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 2 or \
            any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise ValueError(f"view_range must be two line numbers [first, last], not {value!r} "
                         "(e.g. [1, 20]; [5, -1] reads from line 5 to the end)")
    first, last = value
    if first < 1 or (last != -1 and last < first):
        raise ValueError(f"view_range {[first, last]} is no range of lines: the first line is "
                         "1 or more, the last is at least the first (or -1: to the end)")
    return first, last


def _claim(entry: FactEntry) -> str:
    return one_line(entry.claim)


def _given(task: TaskEntry) -> dict[str, Any]:
    """A section's field values, an empty one left out (as the view renders it)."""
    return {name: value for name, value in task.fields.items() if value}


def _changed(entry: FactEntry, was: FactEntry | None) -> bool:
    """Does a fact line say something other than ``was`` (the line of its slot, if any)?"""
    return was is None or _claim(was) != _claim(entry)


@dataclass
class _Entries:
    """A memory file's entries as an edit compares them: fact lines by slot, ``## Task:``
    sections by name, pending identity lines by slot and claim."""

    facts: dict[tuple[str, str], FactEntry] = field(default_factory=dict)
    tasks: dict[str, TaskEntry] = field(default_factory=dict)
    pending: dict[tuple[tuple[str, str], str], FactEntry] = field(default_factory=dict)

    @classmethod
    def of(cls, name: str, text: str, *, strict: bool = True) -> _Entries:
        """The entries of ``text`` (identity.md or working-context.md); a line that does not
        parse is a ValueError naming it (``strict``: the model's text; the store's own view
        is read as it is)."""
        issues: list[Issue] = []
        if name == IDENTITY:
            entries = cls(facts={e.slot: e for e in parse_identity(text, issues)})
        else:
            facts, tasks, pending = parse_working(text, issues)
            entries = cls({e.slot: e for e in facts}, {t.task: t for t in tasks},
                          {(e.slot, _claim(e)): e for e in pending})
        errors = [i for i in issues if i.severity == "error"]
        if errors and strict:
            raise ValueError("; ".join(f"line {i.line}: {i.message}" for i in errors))
        return entries


def _task_fields(task: TaskEntry, seen: TaskEntry | None) -> dict[str, Any]:
    """The checkpoint fields a ``## Task:`` section changes against the section the model was
    shown (every field it gives, for a task it was not shown): each changed value, and an
    empty one for each field whose lines were removed."""
    given = _given(task)
    if seen is None:
        return given
    shown = _given(seen)
    fields = {name: value for name, value in given.items() if shown.get(name) != value}
    for name, value in shown.items():
        if name not in given:
            fields[name] = [] if isinstance(value, list) else None
    return fields


def _carry(seen: _Entries, before: _Entries, after: _Entries) -> _Entries:
    """What the model was shown of a file once it edited ``before`` into ``after``: ``seen``
    with that edit's changes. An entry the edit left alone stays as the model last saw it
    (or unseen, when it never saw it)."""
    facts = dict(seen.facts)
    for slot in before.facts.keys() | after.facts.keys():
        if slot not in after.facts:
            facts.pop(slot, None)
        elif slot not in before.facts or _claim(before.facts[slot]) != _claim(after.facts[slot]):
            facts[slot] = after.facts[slot]
    tasks = dict(seen.tasks)
    for name in before.tasks.keys() | after.tasks.keys():
        if name not in after.tasks:
            tasks.pop(name, None)
        elif name not in before.tasks:
            tasks[name] = after.tasks[name]
        else:
            changed = _task_fields(after.tasks[name], before.tasks[name])
            if changed:
                known = {**(_given(tasks[name]) if name in tasks else {}), **changed}
                tasks[name] = TaskEntry(task=name, fields={n: v for n, v in known.items() if v})
    pending = {key: e for key, e in seen.pending.items()
               if key in after.pending or key not in before.pending}
    pending.update({key: e for key, e in after.pending.items() if key not in before.pending})
    return _Entries(facts, tasks, pending)


class MemstrataMemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool over one memstrata scope (see the module docstring).

    ``actor``: who the model's writes are attributed to, as for the tools
    (:class:`~memstrata.interfaces.tools.ToolDispatcher`: ``agent``, ``user``, ``tool``,
    ``system`` or ``import``; another is a ValidationError). ``source``: the provenance of a
    line that names none, and who saves the checkpoints."""

    def __init__(self, mem: Memory, scope: Scope | dict[str, Any], *, actor: str = "agent",
                 source: str = "claude-memory", **options: Any) -> None:
        super().__init__(**options)
        self.mem = mem
        self.scope = make_scope(scope)
        self.actor = actor
        self.source = source
        # retirements go through the retire_fact tool: its rules, for a model's calls
        self._tools = ToolDispatcher(mem, self.scope, actor=actor)
        self._lock = threading.Lock()
        #: What the model was last shown of identity.md and working-context.md: the base a
        #: ``create`` is compared with (see the module docstring).
        self._seen: dict[str, _Entries] = {}

    def execute(self, command: BetaMemoryTool20250818Command) -> BetaFunctionToolResultType:
        """Run one command. ``call`` builds it from the model's input unchecked, so an input
        that is not an object, or names no command of the tool, is an ``Error:`` reply."""
        name = getattr(command, "command", None)
        if not isinstance(command, BaseModel):
            return (f"Error: the input must be an object with a command ({', '.join(COMMANDS)}"
                    f"), not {type(command).__name__}")
        if name not in COMMANDS:
            return (f"Error: unknown command {name!r}: the memory tool's commands are "
                    + ", ".join(COMMANDS))
        return super().execute(command)

    # -- paths and views ----------------------------------------------------------------
    def _file(self, path: str) -> str:
        """The memory file a path names, or ValueError with the reason."""
        if ".." in path.split("/"):
            raise ValueError(f"{path!r}: paths may not climb out of {ROOT}")
        norm = posixpath.normpath(path)
        if norm != ROOT and not norm.startswith(ROOT + "/"):
            raise ValueError(f"{path!r} is outside {ROOT}: only {ROOT} is memory")
        name = norm.removeprefix(ROOT).lstrip("/")
        if name not in FILES:
            raise ValueError(f"{path!r}: the memory files are {', '.join(FILES)} "
                             f"(under {ROOT}); there are no others")
        return name

    def _render(self) -> dict[str, str]:
        return collect(self.mem, self.scope, marked=True).render()

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        try:
            path = _text(command, "path")
            wanted = _range(command)
            if posixpath.normpath(path) == ROOT:
                texts = self._render()
                return f"Directory: {ROOT}\n" + "\n".join(
                    f"- {ROOT}/{name} ({len(texts[name])} bytes)" for name in FILES)
            name = self._file(path)
        except ValueError as exc:
            return f"Error: {exc}"
        with self._lock:
            text = self._render()[name]
            if wanted is None and name != EPISODIC:
                self._seen[name] = _Entries.of(name, text, strict=False)
        lines = text.splitlines()
        first, last = wanted or (1, len(lines))
        last = len(lines) if last == -1 else last
        return "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(lines, 1)
                         if first <= n <= last)

    # -- writes -------------------------------------------------------------------------
    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        try:
            path, text = _text(command, "path"), _text(command, "file_text")
        except ValueError as exc:
            return f"Error: {exc}"
        return self._write(path, lambda _old: text, on_view=True)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        try:
            path = _text(command, "path")
            old_str, new_str = _text(command, "old_str"), _text(command, "new_str")
            if not old_str:
                raise ValueError("old_str is empty: give the text to replace, as it stands "
                                 "in the file (view it first)")
        except ValueError as exc:
            return f"Error: {exc}"

        def edit(old: str) -> str:
            count = old.count(old_str)
            if count != 1:
                raise ValueError(f"old_str occurs {count} times in {path}; it must occur "
                                 "exactly once")
            return old.replace(old_str, new_str, 1)

        return self._write(path, edit)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        try:
            path = _text(command, "path")
            at, text = _line(command), _text(command, "insert_text")
        except ValueError as exc:
            return f"Error: {exc}"

        def edit(old: str) -> str:
            lines = old.splitlines()
            if not 0 <= at <= len(lines):
                raise ValueError(f"insert_line {at} is outside 0-{len(lines)}")
            return "\n".join([*lines[:at], *text.splitlines(), *lines[at:]]) + "\n"

        return self._write(path, edit)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        try:
            path = _text(command, "path")
            name = self._file(path)
        except ValueError as exc:
            return f"Error: {exc}"
        why = {EPISODIC: "the episodic log is append-only: append a correction that "
                         "supersedes an entry instead",
               IDENTITY: "only a person changes identity: ask your user (memstrata review)",
               WORKING: "working context is overwritten, not deleted: write the current "
                        "state instead"}[name]
        return f"Error: {path} cannot be deleted: {why}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        try:
            old_path = _text(command, "old_path")
            _text(command, "new_path")
        except ValueError as exc:
            return f"Error: {exc}"
        return (f"Error: {old_path} cannot be renamed: the memory files are views of the "
                "store with fixed names")

    def _write(self, path: str, edit: Callable[[str], str], *, on_view: bool = False) -> str:
        """Check the path, apply ``edit`` to the file's view and write what the result changes
        against its base through the file's layer; a refusal is an ``Error:`` reply.
        ``on_view``: the base is what the model was last shown (a ``create``), else the
        current view the edit was applied to."""
        try:
            name = self._file(path)
            with self._lock:  # the view the edit is compared with is the one it replaces
                old = self._render()[name]
                new = edit(old)
                found = scan(new)
                if found.has_secret:
                    kinds = ", ".join(sorted({f.detector for f in found.secrets}))
                    raise ValueError(f"the text carries a secret ({kinds}): secrets are never "
                                     "stored; keep them in a secret manager")
                if name == EPISODIC:
                    return self._episodic(old, new)
                current = _Entries.of(name, old, strict=False)
                after = _Entries.of(name, new)
                base = self._seen.get(name) if on_view else current
                write = self._identity if name == IDENTITY else self._working
                reply = write(base, current, after)
                self._seen[name] = _carry(self._seen.get(name, _Entries()), base or _Entries(),
                                          after)
                return reply
        except ValueError as exc:
            return f"Error: {exc}"
        except MemstrataError as exc:
            return f"Error: {exc}"

    def _candidate(self, e: FactEntry, tier: str = "standard") -> Candidate:
        """A fact line as the write policy's input, checked as ``facts.propose`` checks it."""
        source = e.source or self.source
        return build(Candidate, scope=self.scope, claim=e.claim, kind=e.kind,
                     subject=e.subject, attribute=e.attribute,
                     actor=write_actor(self.actor, None, source), source=source, tier=tier)

    def _propose(self, cand: Candidate) -> str:
        """Propose a checked fact line; the receipt line."""
        res = self.mem.facts.propose_candidate(cand)
        return f"{cand.subject}/{cand.attribute}: {res.status} ({res.reason})"

    def _identity(self, base: _Entries | None, current: _Entries, new: _Entries) -> str:
        seen = base or _Entries()
        removed = [slot for slot in seen.facts if slot not in new.facts and slot in current.facts]
        if removed:
            raise ValueError("identity entries cannot be removed by the agent ("
                             + ", ".join("/".join(s) for s in sorted(removed))
                             + "): ask your user to retire them")
        changed = [self._candidate(e, "identity") for slot, e in new.facts.items()
                   if _changed(e, seen.facts.get(slot)) and _changed(e, current.facts.get(slot))]
        results = [self._propose(cand) for cand in changed]
        if not results:
            return f"No change to {ROOT}/{IDENTITY}: it already holds these entries."
        return ("Identity changes wait for a person's approval (memstrata review):\n"
                + "\n".join(f"- {r}" for r in results))

    def _working(self, base: _Entries | None, current: _Entries, new: _Entries) -> str:
        """Write what ``new`` changes against ``base`` (what the model was shown; None: it
        was shown nothing) to the store, whose view is ``current``: every change is checked
        before the first write (see the module docstring)."""
        seen = base or _Entries()
        saves = []
        for section in new.tasks.values():
            fields = _task_fields(section, seen.tasks.get(section.task))
            if not fields and section.task not in seen.tasks:
                raise ValueError(f"task {section.task!r} has no fields: give at least '- "
                                 "Objective: ...' or '- Next action: ...'; nothing was written")
            if fields:
                # checked as checkpoints.save checks them: a refusal writes nothing
                saves.append((task_arg(section.task), fields))
                clean_fields(fields)
        text_arg(self.source, "by", max_len=MAX_NAME)
        # a removal takes only what the model was shown, as it still stands
        gone = [slot for slot, e in seen.facts.items() if slot not in new.facts
                and slot in current.facts and _claim(current.facts[slot]) == _claim(e)]
        closes = [name for name, t in seen.tasks.items() if name not in new.tasks
                  and name in current.tasks and _given(current.tasks[name]) == _given(t)]
        changed_since = [f"{e.subject}/{e.attribute}" for slot, e in seen.facts.items()
                         if slot not in new.facts and slot in current.facts
                         and slot not in gone] + [
            f"task {name}" for name in seen.tasks
            if name not in new.tasks and name in current.tasks and name not in closes]
        unseen = [f"{e.subject}/{e.attribute}" for slot, e in current.facts.items()
                  if slot not in seen.facts and slot not in new.facts] + [
            f"task {name}" for name in current.tasks
            if name not in seen.tasks and name not in new.tasks]
        held = {(f.subject, f.attribute): f.claim
                for f in self.mem.facts.current(self.scope, limit=100_000)}
        facts = [self._candidate(e) for slot, e in new.facts.items()
                 if _changed(e, seen.facts.get(slot))
                 and held.get((e.subject, e.attribute)) != e.claim]
        identity = [self._candidate(e, "identity") for key, e in new.pending.items()
                    if key not in seen.pending and key not in current.pending]
        # the view shows exactly this scope's own standard facts (collect): those are the
        # ones a removed line names
        removed = [f for f in self.mem.facts.current(self.scope, limit=100_000)
                   if f.scope == self.scope and f.tier != "identity"
                   and (f.subject.lower(), f.attribute.lower()) in gone]
        out: list[str] = []
        try:
            for f in removed:
                out.append(self._retire(f))
            for task in closes:
                self.mem.checkpoints.close(self.scope, task, by=self.source)
                out.append(f"task {task}: closed (its section was removed; its history "
                           "stays, and writing the section again reopens it)")
            for task, fields in saves:
                was = self.mem.checkpoints.current(self.scope, task)
                reopens = was is not None and was.status == "closed"
                if reopens or not checkpoint_holds(was, fields):
                    cp = self.mem.checkpoints.save(self.scope, task, by=self.source, **fields)
                    out.append(f"task {task}: checkpoint v{cp.version}"
                               + (" (reopened)" if reopens else ""))
            out += [self._propose(cand) for cand in facts]
            out += [self._propose(cand) + "; a person approves it (memstrata review)"
                    for cand in identity]
        except (ValueError, MemstrataError) as exc:
            if not out:
                raise
            raise ValueError(f"{exc}; written before it: " + "; ".join(out)) from exc
        notes = []
        if changed_since:
            notes.append(", ".join(changed_since) + ": kept (changed since you were shown "
                         f"{ROOT}/{WORKING}: view it again to see what stands now)")
        if unseen:
            notes.append(", ".join(unseen) + ": kept (not in what you were shown of "
                         f"{ROOT}/{WORKING}: only lines you were shown can be removed; view "
                         "it to see them)")
        withdrawn = [e for key, e in seen.pending.items()
                     if key not in new.pending and key in current.pending]
        if withdrawn:  # a model's edit is no person's review: the change keeps waiting
            kept = (", ".join(f"{e.subject}/{e.attribute}" for e in withdrawn) + ": still a "
                    "pending identity change; only a person approves or rejects one (memstrata "
                    "review), so its line stays")
            if not out:
                raise ValueError("; ".join([kept, *notes]) + "; nothing was written")
            notes.append(kept)
        if not out:
            return (f"No change to {ROOT}/{WORKING}: it already holds these facts, tasks and "
                    "pending identity changes (its dates and versions are the store's own)."
                    + "".join(f"\n- {n}" for n in notes))
        return "Working context saved:\n" + "\n".join(f"- {o}" for o in [*out, *notes])

    def _retire(self, fact: Fact) -> str:
        """Retire a fact whose line was removed, as the ``retire_fact`` tool does."""
        got = self._tools.dispatch("retire_fact", {
            "ref": fact.ref, "reason": f"removed from {ROOT}/{WORKING} ({self.source})"})
        if "error" in got:
            raise ValueError(f"{fact.subject}/{fact.attribute} cannot be retired: "
                             f"{got['error']} ({got['hint']})")
        return f"{fact.subject}/{fact.attribute}: retired (its line was removed; history " \
               "keeps it)"

    def _episodic(self, old: str, new: str) -> str:
        old_lines = [ln for ln in old.splitlines() if ln.strip()]
        new_lines = [ln for ln in new.splitlines() if ln.strip()]
        if new_lines[:len(old_lines)] != old_lines:
            raise ValueError("the episodic log is append-only: existing entries cannot be "
                             "changed or removed; append a correction that supersedes one")
        entries = []
        for n, line in enumerate(new_lines[len(old_lines):], len(old_lines) + 1):
            issues: list[Issue] = []
            found = parse_episodic(line, issues)
            errors = [i.message for i in issues if i.severity == "error"]
            if errors or len(found) != 1:
                why = "; ".join(errors) or "not an entry"
                raise ValueError(f"appended line {n} {line!r}: {why}; nothing was appended "
                                 "(each entry is '- YYYY-MM-DD (source): what happened', "
                                 "dated and sourced)")
            entries += found
        stored = self.mem.episodes.append_many([
            {"scope": self.scope, "text": e.text, "event": e.event,
             "actor": write_actor(self.actor, None, e.source), "source": e.source,
             "observed_at": e.day} for e in entries])
        return f"Appended {len(stored)} entr{'y' if len(stored) == 1 else 'ies'} to " \
               f"{ROOT}/{EPISODIC}: " + ", ".join(ep.ref for ep in stored)


class AsyncMemstrataMemoryTool(BetaAsyncAbstractMemoryTool):
    """Claude's memory tool for ``AsyncAnthropic``: each command runs the
    :class:`MemstrataMemoryTool` :attr:`tool` (same arguments) in a worker thread, so the
    replies and the governed writes are that tool's."""

    def __init__(self, mem: Memory, scope: Scope | dict[str, Any], *, actor: str = "agent",
                 source: str = "claude-memory", **options: Any) -> None:
        super().__init__(**options)
        self.tool = MemstrataMemoryTool(mem, scope, actor=actor, source=source)

    async def execute(self, command: BetaMemoryTool20250818Command
                      ) -> BetaFunctionToolResultType:
        """Run one command (checked as :meth:`MemstrataMemoryTool.execute` checks it)."""
        return await to_thread.run_sync(self.tool.execute, command)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await to_thread.run_sync(self.tool.view, command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await to_thread.run_sync(self.tool.create, command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await to_thread.run_sync(self.tool.str_replace, command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await to_thread.run_sync(self.tool.insert, command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await to_thread.run_sync(self.tool.delete, command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await to_thread.run_sync(self.tool.rename, command)


__all__ = ["ROOT", "AsyncMemstrataMemoryTool", "MemstrataMemoryTool"]
