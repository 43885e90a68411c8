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
  the edit is what changed against the view: a ``## Task:`` section saves that task's
  checkpoint (a removed field line clears the field); a removed section closes the task, as
  the ``close_task`` tool does (its history stays; writing the section again reopens it).
  A new or changed fact line goes through the write policy (an agent's claim waits for
  review); a removed one retires the fact as the ``retire_fact`` tool would for this actor
  (:class:`~memstrata.interfaces.tools.ToolDispatcher`: a model never retires an identity
  fact, and the view holds only this scope's own facts, so one shared beyond it is never
  reached). A line added under "Pending identity changes" is an identity proposal; a removed
  one stays (only a person approves or rejects it: ``memstrata review``), and the reply says
  so (an ``Error:`` when that was all the edit did). A refused edit writes nothing, and an
  edit that changes nothing says so.
- ``/memories/episodic.md`` — the episodic log, append-only. Lines added at the end become
  episodes (each dated and sourced: ``- YYYY-MM-DD (source): what happened``, or refused
  with the reason); changing or deleting an existing line is refused.
- ``view`` of ``/memories`` lists the files; ``delete`` and ``rename`` are refused (the
  files are views, and the log is append-only); a path outside ``/memories`` or with
  ``..`` is refused; text carrying a secret is refused before anything is written.

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
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..errors import ConfigError, MemstrataError

try:
    from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool
    from anyio import to_thread  # the SDK's own dependency: its async tools run on it
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigError("the Claude memory tool backend needs the anthropic SDK",
                      hint="pip install 'memstrata[anthropic]'") from exc


from ..governance.safety import write_actor
from ..governance.sensitivity import scan
from ..models import Fact, Scope, make_scope
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


def _task_fields(task: TaskEntry, shown: TaskEntry | None) -> dict[str, Any]:
    """The checkpoint fields a ``## Task:`` section writes: the ones it gives and, for a task
    the view showed, an empty value for each field whose lines were removed."""
    fields = {name: value for name, value in task.fields.items() if value}
    for name, value in (shown.fields if shown is not None else {}).items():
        if name not in fields:
            fields[name] = [] if isinstance(value, list) else None
    return fields


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
        lines = self._render()[name].splitlines()
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
        return self._write(path, lambda _old: text)

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

    def _write(self, path: str, edit: Callable[[str], str]) -> str:
        """Check the path, apply ``edit`` to the file's view and write the result through
        the file's layer; a refusal is an ``Error:`` reply."""
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
                handler = {IDENTITY: self._identity, WORKING: self._working,
                           EPISODIC: self._episodic}[name]
                return handler(old, new)
        except ValueError as exc:
            return f"Error: {exc}"
        except MemstrataError as exc:
            return f"Error: {exc}"

    def _propose_identity(self, e: FactEntry) -> str:
        """Propose an identity entry (it waits for a person); the receipt line."""
        source = e.source or self.source
        res = self.mem.facts.propose(
            self.scope, claim=e.claim, kind=e.kind, subject=e.subject, attribute=e.attribute,
            actor=write_actor(self.actor, None, source), source=source, tier="identity")
        return f"{e.subject}/{e.attribute}: {res.status} ({res.reason})"

    def _identity(self, old: str, new: str) -> str:
        issues: list[Issue] = []
        before = {e.slot: e for e in parse_identity(old, [])}
        after = parse_identity(new, issues)
        issues = [i for i in issues if i.severity == "error"]
        if issues:
            raise ValueError("; ".join(f"line {i.line}: {i.message}" for i in issues))
        removed = set(before) - {e.slot for e in after}
        if removed:
            raise ValueError("identity entries cannot be removed by the agent ("
                             + ", ".join("/".join(s) for s in sorted(removed))
                             + "): ask your user to retire them")
        results = [self._propose_identity(e) for e in after
                   if e.slot not in before or before[e.slot].claim != e.claim]
        if not results:
            return f"No change to {ROOT}/{IDENTITY}: it already holds these entries."
        return ("Identity changes wait for a person's approval (memstrata review):\n"
                + "\n".join(f"- {r}" for r in results))

    def _working(self, old: str, new: str) -> str:
        """Write what ``new`` changes against the view ``old``: refusals are found before
        anything is written (see the module docstring)."""
        issues: list[Issue] = []
        facts, tasks, pending = parse_working(new, issues)
        issues = [i for i in issues if i.severity == "error"]
        if issues:
            raise ValueError("; ".join(f"line {i.line}: {i.message}" for i in issues))
        shown_facts, shown_tasks, shown_pending = parse_working(old, [])
        shown = {t.task: t for t in shown_tasks}
        saves = [(t.task, _task_fields(t, shown.get(t.task))) for t in tasks]
        for task, fields in saves:
            if not fields and task not in shown:
                raise ValueError(f"task {task!r} has no fields: give at least '- Objective: "
                                 "...' or '- Next action: ...'; nothing was written")
        named = {t.task for t in tasks}
        gone = {e.slot for e in shown_facts} - {e.slot for e in facts}
        # the view shows exactly this scope's own standard facts (collect): those are the
        # ones a removed line names
        removed = [f for f in self.mem.facts.current(self.scope, limit=100_000)
                   if f.scope == self.scope and f.tier != "identity"
                   and (f.subject.lower(), f.attribute.lower()) in gone]
        out: list[str] = []
        try:
            for f in removed:
                out.append(self._retire(f))
            for task in shown:
                if task not in named:
                    self.mem.checkpoints.close(self.scope, task, by=self.source)
                    out.append(f"task {task}: closed (its section was removed; its history "
                               "stays, and writing the section again reopens it)")
            for task, fields in saves:
                was = self.mem.checkpoints.current(self.scope, task)
                reopens = was is not None and was.status == "closed"
                if fields and (reopens or not checkpoint_holds(was, fields)):
                    cp = self.mem.checkpoints.save(self.scope, task, by=self.source, **fields)
                    out.append(f"task {task}: checkpoint v{cp.version}"
                               + (" (reopened)" if reopens else ""))
            out += self._propose_facts(facts)
            shown_waiting = {(e.slot, one_line(e.claim)) for e in shown_pending}
            out += [self._propose_identity(e) + "; a person approves it (memstrata review)"
                    for e in pending if (e.slot, one_line(e.claim)) not in shown_waiting]
        except (ValueError, MemstrataError) as exc:
            if not out:
                raise
            raise ValueError(f"{exc}; written before it: " + "; ".join(out)) from exc
        waiting = {(e.slot, one_line(e.claim)) for e in pending}
        withdrawn = [e for e in shown_pending if (e.slot, one_line(e.claim)) not in waiting]
        if withdrawn:  # a model's edit is no person's review: the change keeps waiting
            kept = (", ".join(f"{e.subject}/{e.attribute}" for e in withdrawn) + ": still a "
                    "pending identity change; only a person approves or rejects one (memstrata "
                    "review), so its line stays")
            if not out:
                raise ValueError(f"{kept}; nothing was written")
            out.append(kept)
        if not out:
            return (f"No change to {ROOT}/{WORKING}: it already holds these facts, tasks and "
                    "pending identity changes (its dates and versions are the store's own).")
        return "Working context saved:\n" + "\n".join(f"- {o}" for o in out)

    def _retire(self, fact: Fact) -> str:
        """Retire a fact whose line was removed, as the ``retire_fact`` tool does."""
        got = self._tools.dispatch("retire_fact", {
            "ref": fact.ref, "reason": f"removed from {ROOT}/{WORKING} ({self.source})"})
        if "error" in got:
            raise ValueError(f"{fact.subject}/{fact.attribute} cannot be retired: "
                             f"{got['error']} ({got['hint']})")
        return f"{fact.subject}/{fact.attribute}: retired (its line was removed; history " \
               "keeps it)"

    def _propose_facts(self, facts: list[FactEntry]) -> list[str]:
        """Propose the fact lines whose claim no current fact of the slot holds."""
        current = {(f.subject, f.attribute): f.claim
                   for f in self.mem.facts.current(self.scope, limit=100_000)}
        out = []
        for f in facts:
            if current.get((f.subject, f.attribute)) == f.claim:
                continue
            source = f.source or self.source
            res = self.mem.facts.propose(self.scope, claim=f.claim, kind=f.kind,
                                         subject=f.subject, attribute=f.attribute,
                                         actor=write_actor(self.actor, None, source),
                                         source=source)
            out.append(f"{f.subject}/{f.attribute}: {res.status} ({res.reason})")
        return out

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
