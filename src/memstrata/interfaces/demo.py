"""``memstrata demo``: a scripted multi-session story on a fresh embedded store.

Contract:
- Uses the real library on a new SQLite file (in a temporary directory unless
  ``home`` is given), with a :class:`~memstrata.clock.ManualClock` so weeks
  pass in milliseconds. Nothing touches the user's own store.
- The story: a preference stated, then superseded six weeks later; an
  identity fact that waits for a person; a checkpoint resumed by a fresh
  worker; an idempotent publish after a simulated crash; a secret refused;
  a forget that leaves no trace in the database file. At each step it
  prints what entered the context and why (the manifest).
- Every claim the story makes is checked against the store; the returned
  :class:`DemoResult` lists the checks, and ``ok`` is False if any failed.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape

from ..clock import ManualClock
from ..memory import Memory
from ..models import Scope
from .tools import ToolDispatcher

START = "2026-03-02T09:00:00+00:00"
TASK = "release-notes-v17"
PUBLISH_KEY = "publish:release-notes:v17"
FAKE_TOKEN = "ghp_" + "Zq8x4LmN2vB7cR1tY6uI0oP3aS5dF9gH2jK4"


@dataclass
class DemoResult:
    """The story's checks (name → passed) and how long it took."""

    checks: dict[str, bool] = field(default_factory=dict)
    seconds: float = 0.0
    db_path: Path | None = None

    @property
    def ok(self) -> bool:
        return all(self.checks.values())


class _Blog:
    """The external system the agent publishes to (it knows nothing about memstrata)."""

    def __init__(self) -> None:
        self.posts: dict[str, str] = {}

    def publish(self, slug: str, body: str) -> str:
        post_id = f"post-{len(self.posts) + 1}"
        self.posts[post_id] = f"{slug}: {body}"
        return post_id

    def find(self, slug: str) -> str | None:
        return next((pid for pid, text in self.posts.items() if text.startswith(slug + ":")),
                    None)


class _Story:
    def __init__(self, console: Any, url: str, embedder: Any, clock: ManualClock) -> None:
        self.console = console
        self.url = url
        self.embedder = embedder
        self.clock = clock
        self.result = DemoResult()
        self.alice = Scope(user="alice", project="docs-site")

    @contextmanager
    def worker(self, name: str) -> Iterator[Memory]:
        """A fresh process's view: its own Memory over the same file."""
        mem = Memory.open(self.url, clock=self.clock, embedder=self.embedder)
        self.console.print(f"[dim]{name} opens {self.url}[/dim]")
        try:
            yield mem
        finally:
            mem.close()

    def step(self, title: str, story: str) -> None:
        from rich.rule import Rule

        self.console.print()
        self.console.print(Rule(f"[bold]{title}[/bold]  [dim]{self.clock.now():%a %Y-%m-%d}"
                                "[/dim]", align="left"))
        self.console.print(story)

    def check(self, name: str, passed: bool) -> None:
        self.result.checks[name] = passed
        mark = "[green]✓[/green]" if passed else "[red]✗[/red]"
        self.console.print(f"  {mark} {name}")

    def show_context(self, mem: Memory, *, task: str | None = None,
                     query: str | None = None) -> Any:
        from rich.panel import Panel
        from rich.table import Table

        ctx = mem.context(self.alice, task=task, query=query, budget_tokens=1200)
        title = "context" + (f" (task={task})" if task else "") + (
            f" (query={query!r})" if query else "")
        from rich.text import Text

        self.console.print(Panel(Text(ctx.text or "(empty)"), title=title, title_align="left",
                                 subtitle=f"{ctx.tokens} of {ctx.budget_tokens} tokens",
                                 subtitle_align="right"))
        table = Table(title="manifest: what entered and why", title_justify="left",
                      show_edge=False)
        for col in ("ref", "layer", "in", "why"):
            table.add_column(col, overflow="fold")
        for m in ctx.manifest:
            table.add_row(Text(m.ref), m.layer, "yes" if m.included else "no", Text(m.reason))
        self.console.print(table)
        return ctx

    # -- the story --------------------------------------------------------
    def run(self) -> DemoResult:
        blog = _Blog()
        self.week_zero()
        self.first_worker()
        self.fresh_worker()
        self.publish_with_crash(blog)
        self.weeks_later()
        self.secret_refused()
        self.forget()
        return self.result

    def week_zero(self) -> None:
        self.step("1. Alice states a preference",
                  "Alice, in her first chat: [italic]\"Send me a written weekly status update; "
                  "no status meetings.\"[/italic] Her own statement, with its source, becomes "
                  "a durable fact. Her role is identity: the agent may only propose it; Alice "
                  "confirms it in the review queue. She also mentions a dentist appointment, "
                  "which is logged as a dated event.")
        with self.worker("session 1") as mem:
            res = mem.facts.propose(
                self.alice, claim="Alice wants a written weekly status update, no status "
                "meetings", kind="preference", subject="alice", attribute="status_updates",
                actor="user", source="chat:session-1")
            self.console.print(f"  write policy: [bold]{res.status}[/bold] — {escape(res.reason)}")
            ident = mem.facts.propose(
                self.alice, claim="Alice leads the docs team at Acme; write in British English",
                kind="profile", subject="alice", attribute="role", actor="user",
                source="chat:session-1", tier="identity")
            self.console.print(f"  identity proposal: [bold]{ident.status}[/bold] — "
                               f"{escape(ident.reason)}")
            assert ident.record is not None
            mem.review.approve(ident.record.id, by="alice")
            self.console.print("  alice approves it: `memstrata review approve ID "
                               "--reviewer alice`")
            mem.episodes.append(self.alice, text="Alice has a dentist appointment on Thursday; "
                                "no calls after 3pm that day", event="calendar_note",
                                actor="user", source="chat:session-1")
            self.show_context(mem)
            self.check("the preference is current", res.status == "committed")
            self.check("identity waited for a person", ident.status == "pending")

    def first_worker(self) -> None:
        self.step("2. Worker A starts the release notes, then stops",
                  "Worker A saves its handoff state after each step. Its scratchpad holds a "
                  "draft for this run only. Then the process dies.")
        with self.worker("worker A") as mem:
            tools = ToolDispatcher(mem, self.alice, task=TASK)
            print_call(self.console, tools, "scratch_write",
                       {"key": "draft", "value": "v17 brings faster search and a new sidebar."})
            print_call(self.console, tools, "save_checkpoint", {
                "objective": "Publish the v17 release notes on the blog",
                "plan": ["collect merged PRs", "write the draft", "publish to the blog"],
                "completed": ["collect merged PRs"],
                "next_action": "write the draft from the 14 merged PRs",
                "source_refs": ["github:acme/docs/milestone/17"]})
            print_call(self.console, tools, "log_episode", {
                "text": "Collected 14 merged PRs for v17", "event": "prs_collected",
                "source": "github:acme/docs/milestone/17"})
            # No tools.close(): a crashed worker never ends its run.
        self.console.print("  [red]worker A stops here[/red] (process killed)")

    def fresh_worker(self) -> None:
        self.clock.advance(days=1)
        self.step("3. A fresh worker resumes from the checkpoint",
                  "Worker B starts with nothing in its context window. memstrata loads "
                  "identity first, then the task's checkpoint in full, then current facts.")
        with self.worker("worker B") as mem:
            ctx = self.show_context(mem, task=TASK)
            tools = ToolDispatcher(mem, self.alice, task=TASK)
            read = print_call(self.console, tools, "scratch_read", {"key": "draft"})
            cp = mem.checkpoints.current(self.alice, TASK)
            self.check("worker B sees worker A's next action",
                       cp is not None and "write the draft" in ctx.text)
            self.check("worker A's scratchpad did not leak into worker B's run",
                       read.get("found") is False)
            print_call(self.console, tools, "save_checkpoint", {
                "completed": ["collect merged PRs", "write the draft"],
                "next_action": "publish to the blog"})
            tools.close()

    def publish_with_crash(self, blog: _Blog) -> None:
        self.step("4. Publishing exactly once, across a crash",
                  "Worker B records the intent in the ledger, publishes, and crashes before "
                  "recording success. Twenty minutes on (its lease run out), worker C finds the "
                  "key 'unknown', reconciles with the "
                  "blog instead of publishing again, and completes it.")
        with self.worker("worker B") as mem:
            tools = ToolDispatcher(mem, self.alice, task=TASK)
            print_call(self.console, tools, "begin_operation",
                       {"key": PUBLISH_KEY, "intent": "POST the v17 notes to the blog"})
            post = blog.publish(PUBLISH_KEY, "v17 release notes")
            self.console.print(f"  blog.publish → {post}")
            self.console.print("  [red]worker B crashes before complete_operation[/red]")
        # a crashed run records no end: its key reads in_progress until its lease runs out
        self.clock.advance(minutes=20)
        with self.worker("worker C") as mem:
            tools = ToolDispatcher(mem, self.alice, task=TASK)
            began = print_call(self.console, tools, "begin_operation",
                               {"key": PUBLISH_KEY, "intent": "POST the v17 notes to the blog"})
            if began.get("status") == "unknown":
                found = blog.find(PUBLISH_KEY)
                self.console.print(f"  reconcile: blog.find → {found}")
                if found is None:
                    found = blog.publish(PUBLISH_KEY, "v17 release notes")
                print_call(self.console, tools, "complete_operation",
                           {"key": PUBLISH_KEY, "external_ref": found})
            again = print_call(self.console, tools, "begin_operation",
                               {"key": PUBLISH_KEY, "intent": "POST the v17 notes to the blog"})
            self.check("worker C saw the interrupted publish as unknown",
                       began.get("status") == "unknown")
            self.check("the blog has exactly one post", len(blog.posts) == 1)
            self.check("a later attempt is told it already succeeded",
                       again.get("status") == "succeeded")
            tools.close()

    def weeks_later(self) -> None:
        self.clock.advance(weeks=6)
        self.step("5. Six weeks later, the preference changes",
                  "Alice: [italic]\"From now on, a short daily async update in Slack instead "
                  "of the weekly one.\"[/italic] Same slot, different claim: the new fact "
                  "supersedes the old one, which stays in history: it leaves the session "
                  "context, and a recall ranks it below the current one, labelled superseded.")
        with self.worker("session 9") as mem:
            res = mem.facts.propose(
                self.alice, claim="Alice wants a short daily async update in Slack instead of "
                "the weekly one", kind="preference", subject="alice",
                attribute="status_updates", actor="user", source="chat:session-9")
            self.console.print(f"  write policy: [bold]{res.status}[/bold] — {escape(res.reason)}")
            assert res.record is not None
            for f in mem.facts.history(res.record.id, scope=self.alice):
                until = f.valid_to.date().isoformat() if f.valid_to else "now"
                self.console.print(f"  history: [{f.status}] {f.claim} "
                                   f"({(f.valid_from or f.created_at).date()} → {until})",
                                   markup=False)
            ctx = self.show_context(mem)
            found = mem.recall(self.alice, "how does Alice want status updates?")
            self.console.print("  recall('how does Alice want status updates?'):")
            for h in found.items:
                flag = f" — verify: {h.verify_reason}" if h.needs_verification else ""
                self.console.print(f"    {h.score:.2f} [{h.status}] {h.excerpt}{flag}",
                                   markup=False)
            old = [h for h in found.items if "weekly status update" in h.excerpt]
            self.check("the new preference superseded the old one", res.status == "superseding")
            self.check("the session context holds only the current preference",
                       "daily async update" in ctx.text and "weekly status update" not in
                       ctx.text)
            self.check("recall ranks the current preference first; the old one is labelled",
                       bool(found.items) and "daily async update" in found.items[0].excerpt
                       and all(h.status == "superseded" and h.needs_verification
                               for h in old))

    def secret_refused(self) -> None:
        self.step("6. A secret is refused",
                  "The agent tries to remember a deploy token it saw in a log. Secrets are "
                  "never stored: the write policy rejects it and says why, without echoing "
                  "the value.")
        with self.worker("session 9") as mem:
            tools = ToolDispatcher(mem, self.alice, task=TASK)
            res = print_call(self.console, tools, "propose_memory", {
                "claim": f"The staging deploy token is {FAKE_TOKEN}", "kind": "system_fact",
                "subject": "staging", "attribute": "deploy_token", "source": "ci:run/977"})
            stored = [f for f in mem.facts.list(self.alice, status=None)
                      if FAKE_TOKEN in f.claim]
            self.check("the secret was rejected", res.get("status") == "rejected")
            self.check("the secret is not in the store", not stored)
            tools.close()

    def forget(self) -> None:
        self.step("7. Forgetting for real",
                  "Alice: [italic]\"Forget what I said about the dentist.\"[/italic] The "
                  "forget reaches every layer and index; afterwards not even the database "
                  "file's bytes contain the text.")
        with self.worker("session 9") as mem:
            tools = ToolDispatcher(mem, self.alice, task=TASK)
            out = print_call(self.console, tools, "forget", {"match": "dentist"})
            hits = mem.episodes.search(self.alice, "dentist appointment")
            tools.close()
        raw = _raw_occurrences(Path(self.url.removeprefix("sqlite:///")), b"dentist")
        self.console.print(f"  search afterwards: {len(hits)} hit(s); raw bytes of the "
                           f"database files: {raw} occurrence(s)")
        self.check("forget removed the episode", out.get("total", 0) >= 1 and not hits)
        self.check("the text is gone from the database file", raw == 0)


def print_call(console: Any, tools: ToolDispatcher, name: str,
               arguments: dict[str, Any]) -> dict[str, Any]:
    """Dispatch one tool call the way an agent would, and show call and result."""
    import json

    result = tools.dispatch(name, arguments)
    shown = {k: (v[:57] + "..." if isinstance(v, str) and len(v) > 60 else v)
             for k, v in arguments.items()}
    console.print(f"  tool {name}({json.dumps(shown, ensure_ascii=False)})", markup=False,
                  style="cyan")
    console.print(f"    → {json.dumps(result, ensure_ascii=False, default=str)}",
                  markup=False)
    return result


def _raw_occurrences(db: Path, needle: bytes) -> int:
    total = 0
    for path in (db, db.with_name(db.name + "-wal")):
        if path.exists():
            total += path.read_bytes().count(needle)
    return total


def run_demo(*, home: str | Path | None = None, embedder: Any = "default",
             console: Any = None) -> DemoResult:
    """Run the story; ``home`` keeps the store there (default: a temporary directory)."""
    from rich.console import Console

    console = console or Console(highlight=False)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memstrata-demo-") as tmp:
        base = Path(home) if home is not None else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        db = base / "demo.db"
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        if isinstance(embedder, str) and embedder != "none":
            from ..memory import _resolve_embedder

            embedder = _resolve_embedder(embedder)
        elif embedder == "none":
            embedder = None
        label = "none (lexical only)" if embedder is None else getattr(
            embedder, "model_name", type(embedder).__name__)
        console.print(f"[bold]memstrata demo[/bold]: a fresh store at {db}; embedder: {label}")
        story = _Story(console, f"sqlite:///{db}", embedder, ManualClock(START))
        result = story.run()
        result.db_path = db if home is not None else None
    result.seconds = time.perf_counter() - started
    passed = sum(result.checks.values())
    console.print()
    console.print(f"[bold]{passed}/{len(result.checks)} checks passed[/bold] in "
                  f"{result.seconds:.1f} s" + ("" if result.ok else " — [red]FAILED[/red]"))
    return result


__all__ = ["DemoResult", "run_demo"]
