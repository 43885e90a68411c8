"""A backend for Claude's memory tool (``memory_20250818``) on memstrata's layers.

Claude sees a ``/memories`` directory; behind it nothing is a file. Each path is a view
rendered from the store for one fixed scope (the three memory files of
:mod:`memstrata.interfaces.markdown`), and each command an agent issues becomes a governed
write through the library:

- ``/memories/identity.md`` — identity facts. A line the agent adds or changes becomes a
  *pending* identity proposal (a person approves it: ``memstrata review``); removing a line
  is refused (only a person changes identity).
- ``/memories/working-context.md`` — current facts and each task's checkpoint, one current
  value per field. Writing it overwrites: every ``## Task:`` section saves that task's
  checkpoint; a fact line goes through the write policy (an agent's claim waits for
  review).
- ``/memories/episodic.md`` — the episodic log, append-only. Lines added at the end become
  episodes (each dated and sourced: ``- YYYY-MM-DD (source): what happened``, or refused
  with the reason); changing or deleting an existing line is refused.
- ``view`` of ``/memories`` lists the files; ``delete`` and ``rename`` are refused (the
  files are views, and the log is append-only); a path outside ``/memories`` or with
  ``..`` is refused; text carrying a secret is refused before anything is written.

Every reply is text for the model; a refusal starts with ``Error:`` and says why. The
backend subclasses the Anthropic SDK's ``BetaAbstractMemoryTool`` (``pip install
'memstrata[anthropic]'``), so ``client.beta.messages.run_tools(tools=[tool])`` drives it.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, MemstrataError

try:
    from anthropic.lib.tools import BetaAbstractMemoryTool
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigError("the Claude memory tool backend needs the anthropic SDK",
                      hint="pip install 'memstrata[anthropic]'") from exc


from ..governance.sensitivity import scan
from ..models import Scope, make_scope
from .markdown import EPISODIC, IDENTITY, WORKING
from .markdown_read import Issue, parse_episodic, parse_identity, parse_working
from .memory_files import checkpoint_holds, collect

if TYPE_CHECKING:
    from anthropic.types.beta import (
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


class MemstrataMemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool over one memstrata scope (see the module docstring)."""

    def __init__(self, mem: Memory, scope: Scope | dict[str, Any], *, actor: str = "agent",
                 source: str = "claude-memory", **options: Any) -> None:
        super().__init__(**options)
        self.mem = mem
        self.scope = make_scope(scope)
        self.actor = actor
        self.source = source

    # -- paths and views ----------------------------------------------------------------
    def _file(self, path: str) -> str:
        """The memory file a path names, or ValueError with the reason."""
        if not isinstance(path, str) or ".." in path.split("/"):
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
        return collect(self.mem, self.scope).render()

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        path = command.path
        if posixpath.normpath(path or "") == ROOT:
            texts = self._render()
            return f"Directory: {ROOT}\n" + "\n".join(
                f"- {ROOT}/{name} ({len(texts[name])} bytes)" for name in FILES)
        try:
            name = self._file(path)
        except ValueError as exc:
            return f"Error: {exc}"
        lines = self._render()[name].splitlines()
        first, last = 1, len(lines)
        if command.view_range:
            first, last = command.view_range[0], command.view_range[-1]
            last = len(lines) if last == -1 else last
        return "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(lines, 1)
                         if first <= n <= last)

    # -- writes -------------------------------------------------------------------------
    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._write(command.path, lambda _old: command.file_text)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        def edit(old: str) -> str:
            count = old.count(command.old_str)
            if count != 1:
                raise ValueError(f"old_str occurs {count} times in {command.path}; it must "
                                 "occur exactly once")
            return old.replace(command.old_str, command.new_str, 1)

        return self._write(command.path, edit)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        def edit(old: str) -> str:
            lines = old.splitlines()
            if not 0 <= command.insert_line <= len(lines):
                raise ValueError(f"insert_line {command.insert_line} is outside 0-{len(lines)}")
            new = command.insert_text.splitlines()
            return "\n".join([*lines[:command.insert_line], *new,
                              *lines[command.insert_line:]]) + "\n"

        return self._write(command.path, edit)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        try:
            name = self._file(command.path)
        except ValueError as exc:
            return f"Error: {exc}"
        why = {EPISODIC: "the episodic log is append-only: append a correction that "
                         "supersedes an entry instead",
               IDENTITY: "only a person changes identity: ask your user (memstrata review)",
               WORKING: "working context is overwritten, not deleted: write the current "
                        "state instead"}[name]
        return f"Error: {command.path} cannot be deleted: {why}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return (f"Error: {command.old_path} cannot be renamed: the memory files are views of "
                "the store with fixed names")

    def _write(self, path: str, edit: Any) -> str:
        try:
            name = self._file(path)
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
        results = []
        for e in after:
            if e.slot in before and before[e.slot].claim == e.claim:
                continue
            res = self.mem.facts.propose(
                self.scope, claim=e.claim, kind=e.kind, subject=e.subject,
                attribute=e.attribute, actor=self.actor, source=e.source or self.source,
                tier="identity")
            results.append(f"{e.subject}/{e.attribute}: {res.status} ({res.reason})")
        if not results:
            return f"No change to {ROOT}/{IDENTITY}."
        return ("Identity changes wait for a person's approval (memstrata review):\n"
                + "\n".join(f"- {r}" for r in results))

    def _working(self, old: str, new: str) -> str:
        del old
        issues: list[Issue] = []
        facts, tasks, _pending = parse_working(new, issues)
        issues = [i for i in issues if i.severity == "error"]
        if issues:
            raise ValueError("; ".join(f"line {i.line}: {i.message}" for i in issues))
        out = []
        for t in tasks:
            fields = {k: v for k, v in t.fields.items() if v}
            if fields and not checkpoint_holds(self.mem.checkpoints.current(self.scope, t.task),
                                               fields):
                cp = self.mem.checkpoints.save(self.scope, t.task, by=self.source, **fields)
                out.append(f"task {t.task}: checkpoint v{cp.version}")
        current = {(f.subject, f.attribute): f.claim
                   for f in self.mem.facts.current(self.scope, limit=1000)}
        for f in facts:
            if current.get((f.subject, f.attribute)) == f.claim:
                continue
            res = self.mem.facts.propose(self.scope, claim=f.claim, kind=f.kind,
                                         subject=f.subject, attribute=f.attribute,
                                         actor=self.actor, source=f.source or self.source)
            out.append(f"{f.subject}/{f.attribute}: {res.status} ({res.reason})")
        return "Working context saved:\n" + "\n".join(f"- {o}" for o in out) if out else \
            f"No change to {ROOT}/{WORKING}."

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
            {"scope": self.scope, "text": e.text, "event": e.event, "actor": self.actor,
             "source": e.source, "observed_at": e.day} for e in entries])
        return f"Appended {len(stored)} entr{'y' if len(stored) == 1 else 'ies'} to " \
               f"{ROOT}/{EPISODIC}: " + ", ".join(ep.ref for ep in stored)


__all__ = ["ROOT", "MemstrataMemoryTool"]
