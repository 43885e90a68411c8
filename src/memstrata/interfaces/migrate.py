"""Sort one legacy memory file (MEMORY.md) into identity.md, working-context.md and episodic.md.

Contract:
- Every content line is routed to exactly one destination — ``identity``
  (stable facts), ``working`` (current state) or ``episodic`` (dated events)
  — or skipped with a reason (a line holding a secret is never copied).
  Headings and blank lines are structure, not content.
- The route is decided by, in order: a current-state cue (``- [ ]``,
  ``TODO``, ``Next:``, ``Working on``...); a stable-fact cue (``Learned:``,
  ``Always``, ``Never``...); a current-state heading (dates there are
  deadlines); a date in the line (unless it follows "since", "until", "due"...,
  which bound a state, not an event); an event heading (``Log``, ``History``, a
  dated heading); a relative time or a past-tense event verb; a stable
  heading; and finally stable fact.
- Dates and sources are reconstructed best-effort: a date in the line is
  exact; a date from a dated heading is exact for that day; anything else
  (nearest earlier date, "yesterday", a month without a day, the file's
  date) is marked approximate with ``~``. A cited source (``(source: X)``,
  ``(via X)``, a URL) is used as is; otherwise the source is
  ``~FILE:LINE``, approximate.
- Dates are parsed strictly: a month is a whole word (``Dec``, ``December``; "decision"
  and "mayor" are not months), and a month-day without a year ("Nov 20:") takes the year
  that puts it nearest the surrounding dates.
- The most recent value of a current-state field wins (the later line of the file, or the
  later date): an earlier "Working on ..." is kept as history in episodic.md and reported
  as ``superseded``. Identity lines are judged by the offline rules of extraction
  (:func:`memstrata.extraction.judges.compare_claims`): a line that replaces an earlier one
  ("UPDATE: switched to Python, ignore the TypeScript rule") takes its slot, and the earlier
  one goes to episodic.md as history, with the reason; a likely contradiction the rules
  cannot settle is noted for review. Lines that read as current state ("current project",
  "due end of Q1": :data:`memstrata.interfaces.markdown.STATE_RE`) go to working context.
- Personal data (e-mail addresses, phone numbers) is flagged in the route: import makes
  such an entry restricted and sends it to review.
- Within each section the original order of the lines is kept.
- The output is rendered by :mod:`memstrata.interfaces.markdown`, so it imports and
  lints like an export.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from ..errors import ValidationError
from ..extraction import statements
from .markdown import (
    APPROX,
    STATE_RE,
    EpisodeEntry,
    FactEntry,
    MemoryFiles,
    TaskEntry,
    one_line,
)
from .markdown_read import Issue, read_text
from .memory_files import write_files

_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)}
#: A month name or abbreviation as a whole word ("decision" and "mayor" are not months).
_MONTH = (r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|"
          r"aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
          r"(?:\.|(?![a-z]))")
_DAY = r"(?P<d>\d{1,2})(?:st|nd|rd|th)?(?!\d)"
#: (pattern, has a day, has a year)
_DATE_PATTERNS = (
    (re.compile(r"\b(?P<y>\d{4})[-/](?P<m>\d{1,2})[-/](?P<d>\d{1,2})\b"), True, True),
    (re.compile(rf"\b{_DAY} {_MONTH},? (?P<y>\d{{4}})\b", re.I), True, True),
    (re.compile(rf"\b{_MONTH} {_DAY},? (?P<y>\d{{4}})\b", re.I), True, True),
    (re.compile(rf"\b{_MONTH} (?P<y>\d{{4}})\b", re.I), False, True),
    (re.compile(rf"\b{_MONTH} {_DAY}\b", re.I), True, False),
    (re.compile(rf"\b{_DAY} {_MONTH}", re.I), True, False),
)
#: Verbs that look like months: "may" and "march" count only when capitalised.
_VERB_MONTHS = ("may", "mar", "march")
#: A date after these words bounds a state or a deadline; it does not date an event.
_STATE_DATE = re.compile(r"\b(?:since|as of|until|till|due|by|before|after)\s*$", re.I)
_LEAD_SEP = re.compile(r"^[\s:–—\-,]+")

#: A cue word counts when a label separator or a space follows it ("Next: ..."), never as
#: part of a name ("Next.js", "Objective-C"); "next", "focus", "goal" and "objective" only as
#: labels ("Focus: ...", not "Focus mode is on").
_CUE_END = r"(?=\s*[:–—]|\s|$)(?![.\-])"
_CURRENT_CUE = re.compile(
    r"^(?:\[[ xX]\]|(?:todo|to do|next up|next step|currently|working on|in progress|wip|"
    r"right now|blocked|blocker|this week|waiting on|current (?:project|task|focus|goal|sprint|"
    rf"priority)){_CUE_END}|(?:next|focus|goal|objective)\s*[:–—])", re.I)
#: State words migrate adds to the shared STATE_RE: quarters and sprint deadlines.
_STATE_WORDS = re.compile(r"\b(?:current project|end of q[1-4]|by q[1-4]|in q[1-4]|"
                          r"this sprint|next sprint|eta\b)", re.I)
_STABLE_CUE = re.compile(r"^(?:learned\b|lesson\b|remember\b|always\b|never\b|rule\b|"
                         r"convention\b|note to self\b|don'?t ever\b)", re.I)
_RELATIVE = re.compile(r"\b(?<!every )(?<!each )(?P<rel>yesterday|today|tonight|this morning|"
                       r"earlier today|last (?:night|week|month)|(?<!every )(?<!each )"
                       r"(?:on )?(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b(?!s)", re.I)
_EVENT_VERB = re.compile(
    r"^(?:we |i |the team )?(?:deployed|fixed|merged|released|shipped|migrated|met|decided|"
    r"found|discovered|broke|failed|rolled back|upgraded|published|launched|reverted|sent|"
    r"finished|started|completed|resolved|hit|saw|noticed)\b", re.I)
_HEADING_WORDS = {
    "episodic": ("log", "history", "changelog", "timeline", "journal", "events", "diary",
                 "sessions", "what happened", "incidents", "done"),
    "working": ("current", "now", "status", "in progress", "wip", "todo", "to do", "next",
                "plan", "working on", "focus", "this week", "active", "open", "blocker",
                "tasks"),
    "identity": ("about", "profile", "user", "preference", "identity", "convention", "rules",
                 "facts", "style", "people", "team", "contact", "setup", "environment", "stack",
                 "tools", "knowledge", "background"),
}
_CITED = re.compile(r"\s*\((?:source|src|via|from|per)\s*:?\s*(?P<src>[^()]+)\)", re.I)
_URL = re.compile(r"https?://[^\s)>\]]+")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_CHECKBOX = re.compile(r"^\[(?P<mark>[ xX])\]\s*")
_LABEL = re.compile(r"^(?P<label>todo|to do|next up|next step|next|currently working on|"
                    r"currently|working on|in progress|wip|right now|focus|goal|objective|"
                    rf"current (?:project|task|focus|goal|priority)){_CUE_END}\s*[:\-–—]?\s*",
                    re.I)
_OBJECTIVE_LABELS = ("currently working on", "currently", "working on", "in progress", "wip",
                     "right now", "focus", "goal", "objective", "current project",
                     "current task", "current focus", "current goal", "current priority")
_KIND_CUES = (
    ("constraint", re.compile(r"\b(must|never|always|do not|don'?t|should not|required|only "
                              r"use|not allowed)\b", re.I)),
    ("preference", re.compile(r"\b(prefer|prefers|preferred|likes?|loves?|hates?|dislikes?|"
                              r"wants?|favou?rite|rather)\b", re.I)),
    ("lesson", re.compile(r"\b(learned|lesson|turns out|remember to|gotcha|tip)\b", re.I)),
    ("relationship", re.compile(r"\b(manager|reports to|colleague|works with|boss|teammate|"
                                r"partner|friend|mentor)\b", re.I)),
    ("decision", re.compile(r"\b(decided|we chose|agreed|going with)\b", re.I)),
    ("system_fact", re.compile(r"\b(port|server|version|database|api|runs on|deployed|"
                               r"hosted|repo|endpoint|config|built with|ci|netlify|hugo)\b",
                               re.I)),
)
#: Slots named by the predicate of common identity lines ("my name is", "I run X").
_SLOT_CUES = re.compile(r"^(?:(?P<name>my name is|name:|i am called|call me)|"
                        r"(?P<role>i (?:run|lead|manage|head|own)|my (?:role|title|job) is))\b",
                        re.I)
_NAME_VERB = re.compile(r"^(?P<name>[A-Z][a-z]+) (?:is|prefers|likes|wants|uses|works|lives|"
                        r"handles|owns|hates|needs|has|speaks|leads|reports|manages|loves)\b")
_STOP = frozenset((
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "to", "of", "in", "on", "at",
    "for", "and", "or", "but", "with", "by", "from", "as", "it", "its", "this", "that",
    "these", "those", "i", "we", "you", "he", "she", "they", "our", "my", "your", "prefers",
    "prefer", "likes", "like", "wants", "want", "uses", "use", "no", "not", "never", "always",
))


@dataclass
class Route:
    """Where one line of the legacy file went."""

    line: int
    text: str
    destination: str  # identity | working | episodic | skipped
    note: str = ""


@dataclass
class MigrationResult:
    """The sorted content and the route of every line."""

    files: MemoryFiles
    routes: list[Route] = field(default_factory=list)

    def by_destination(self, destination: str) -> list[Route]:
        return [r for r in self.routes if r.destination == destination]


def find_date(text: str, near: date | None = None, latest: date | None = None
              ) -> tuple[date, bool, tuple[int, int]] | None:
    """The first date in ``text``: (date, has a day, span). A month-day without a year takes
    the year that puts it nearest ``near`` (the surrounding dates) and not after ``latest``
    (the file's date) when one is possible; without ``near`` it is not a date."""
    best: tuple[date, bool, tuple[int, int]] | None = None
    for pattern, has_day, has_year in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            parts = m.groupdict()
            mon = parts.get("mon")
            if mon and mon.lower() in _VERB_MONTHS and mon[0].islower():
                continue
            if not has_year and near is None:
                continue
            try:
                month = int(parts["m"]) if parts.get("m") else _MONTHS[mon.lower()[:3]]  # type: ignore[union-attr]
                day = int(parts["d"]) if parts.get("d") else 1
                if has_year:
                    found = date(int(parts["y"]), month, day)
                else:
                    assert near is not None
                    options = [date(near.year + dy, month, day) for dy in (-1, 0, 1)]
                    past = [o for o in options if latest is None or o <= latest]
                    found = min(past or options, key=lambda o: abs((o - near).days))
            except (ValueError, KeyError):
                continue
            if best is None or m.start() < best[2][0]:
                best = (found, has_day, m.span())
            break
    return best


def _heading_category(title: str, near: date | None = None) -> str | None:
    low = title.lower()
    if find_date(title, near) is not None:
        return "episodic"
    for category, words in _HEADING_WORDS.items():
        if any(re.search(rf"\b{re.escape(w)}", low) for w in words):
            return category
    return None


def _slug(text: str, words: int = 4) -> str:
    tokens = [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in _STOP]
    return "_".join(tokens[:words]) or "note"


def _source(text: str, name: str, line: int) -> tuple[str, str]:
    """(source, text without the citation)."""
    m = _CITED.search(text)
    if m is not None:
        return one_line(m["src"]), (text[:m.start()] + text[m.end():]).strip()
    url = _URL.search(text)
    if url is not None:
        cleaned = re.sub(rf"\s*\(\s*{re.escape(url.group(0))}\s*\)", "", text).strip()
        return url.group(0).rstrip(".,;"), cleaned or text
    return f"{APPROX}{name}:{line}", text


class _Sorter:
    def __init__(self, name: str, today: date) -> None:
        self.name = name
        self.today = today
        self.result = MigrationResult(files=MemoryFiles())
        self.task = TaskEntry(task="current-work")
        self.headings: list[tuple[int, str | None, date | None]] = []
        self.last_date: date | None = None
        self.slots: set[tuple[str, str]] = set()
        #: line -> why it holds personal data; line -> a likely contradiction to review
        self.pii: dict[int, str] = {}
        self._doubts: dict[int, str] = {}
        self._line = 0
        #: current-state field -> (line, text) of its most recent value
        self.current: dict[str, tuple[int, str]] = {}

    # context from the heading stack
    def _category(self) -> str | None:
        for _level, category, _day in reversed(self.headings):
            if category is not None:
                return category
        return None

    def _heading_date(self) -> date | None:
        for _level, _category, day in reversed(self.headings):
            if day is not None:
                return day
        return None

    def heading(self, level: int, title: str) -> None:
        while self.headings and self.headings[-1][0] >= level:
            self.headings.pop()
        near = self.last_date or self.today
        found = find_date(title, near, self.today)
        day = found[0] if found is not None and found[1] else None
        self.headings.append((level, _heading_category(title, near), day))
        if day is not None:
            self.last_date = day

    def line(self, n: int, raw: str) -> None:
        from ..governance.sensitivity import scan

        self._line = n
        text = _BULLET.sub("", raw).strip()
        report = scan(text)
        if report.has_secret:
            detectors = ", ".join(sorted({f.detector for f in report.secrets}))
            self.result.routes.append(Route(n, "", "skipped",
                                            f"holds a secret ({detectors}): not migrated"))
            return
        pii = sorted({f.detector for f in report.pii})
        if pii:
            self.pii[n] = (f"personal data ({', '.join(pii)}): import restricts it and sends "
                           "it to review")
        checkbox = _CHECKBOX.match(text)
        category = self._category()
        dated = find_date(text, self.last_date or self.today, self.today)
        if _CURRENT_CUE.match(text):
            self._working(n, text, checkbox)
        elif _STABLE_CUE.match(text):
            self._fact(n, text)
        elif category == "working" or (category != "episodic" and (
                _STATE_WORDS.search(text) or STATE_RE.search(text))):
            self._working(n, text, checkbox)
        elif dated is not None and not _STATE_DATE.search(text[:dated[2][0]]):
            self._episode(n, text, dated)
        elif category == "episodic" or _RELATIVE.search(text) or (
                _EVENT_VERB.match(text) and category != "identity"):
            self._episode(n, text, None)
        else:
            self._fact(n, text)

    def _working(self, n: int, text: str, checkbox: re.Match[str] | None) -> None:
        fields = self.task.fields
        if checkbox is not None:
            item = text[checkbox.end():].strip()
            name = "completed" if checkbox["mark"] in "xX" else "plan"
            fields.setdefault(name, []).append(item)
            note = name
        else:
            label = _LABEL.match(text)
            word = label["label"].lower() if label else ""
            value = text[label.end():].strip() if label else text
            value = value or text
            field_name = ("next_action" if word.startswith("next") else
                          "objective" if word in _OBJECTIVE_LABELS else None)
            if field_name is not None:
                note = field_name.replace("_", " ")
                earlier = self.current.get(field_name)
                if earlier is not None:
                    # the most recent value wins; the earlier one is history
                    self._history(earlier[0], earlier[1], n, f"the most recent {note} wins")
                self.current[field_name] = (n, text)
                fields[field_name] = value
                if field_name == "objective":
                    self.task.task = _slug(value, 5).replace("_", "-")
            else:
                fields.setdefault("plan", []).append(value)
                note = "plan"
        self.result.routes.append(Route(n, text, "working", note))

    def _history(self, n: int, text: str, by: int, why: str) -> None:
        """Move line ``n`` (routed earlier) out of the current state, replaced by line ``by``:
        an approximate entry of episodic.md, reported as superseded."""
        for route in self.result.routes:
            if route.line == n:
                route.destination, route.note = "superseded", f"superseded by line {by}: {why}"
        day = self.last_date or self.today
        self.result.files.episodes.append(EpisodeEntry(
            day=day.isoformat(), source=f"{APPROX}{self.name}:{n}",
            text=f"{text} (superseded by line {by}: {why})", approx=True, line=n))

    def _fact(self, n: int, text: str) -> None:
        source, claim = _source(text, self.name, n)
        kind = next((k for k, rx in _KIND_CUES if rx.search(claim)), "profile")
        key, sep, value = claim.partition(": ")
        name = _NAME_VERB.match(claim)
        subject = name["name"].lower() if name else (
            "project" if kind in ("system_fact", "decision") else "user")
        named = _SLOT_CUES.search(claim)
        inferred = statements.slot_attribute(statements.read(claim))
        if named is not None:
            attribute = next(k for k, v in named.groupdict().items() if v)
        elif sep and len(key.split()) <= 3 and value and not _STABLE_CUE.match(claim):
            attribute = _slug(key)
        elif inferred is not None:
            attribute = inferred
        else:
            attribute = _slug(claim[len(name["name"]):] if name else claim)
        note = f"{kind} {subject}/{attribute}"
        replaced = self._replaces(claim, subject)
        if replaced is not None:
            old, why = replaced
            self.result.files.identity.remove(old)
            self.slots.discard((old.subject, old.attribute))
            subject, attribute = old.subject, old.attribute
            self._history(old.line, old.claim, n, why)
            note = f"{kind} {subject}/{attribute}, supersedes line {old.line} ({why})"
        base, i = attribute, 2
        while (subject, attribute) in self.slots:
            attribute, i = f"{base}_{i}", i + 1
        self.slots.add((subject, attribute))
        self.result.files.identity.append(FactEntry(
            subject=subject, attribute=attribute, kind=kind, claim=claim, source=source,
            line=n))
        doubt = self._doubts.pop(n, None)
        if doubt:
            note += f"; {doubt}"
        self.result.routes.append(Route(n, claim, "identity", note))

    def _replaces(self, claim: str, subject: str) -> tuple[FactEntry, str] | None:
        """The earlier identity line this claim replaces, by the offline rules of extraction
        (the latest first); a likely contradiction they cannot settle is noted."""
        from ..extraction.judges import compare_claims

        for old in reversed(self.result.files.identity):
            if old.subject != subject and {old.subject, subject} - {"user", "project"}:
                continue
            verdict, why = compare_claims(old.claim, claim, f"line {old.line}")
            if verdict == "supersede":
                return old, why
            if verdict == "review":
                self._doubts[self._line] = f"may contradict line {old.line}: review it ({why})"
        return None

    def _episode(self, n: int, text: str, dated: tuple[date, bool, tuple[int, int]] | None
                 ) -> None:
        source, body = _source(text, self.name, n)
        approx = True
        if dated is not None:
            day, has_day, (start, end) = dated
            approx = not has_day
            if start == 0 or text[:start].strip() == "":
                body = _LEAD_SEP.sub("", body[end:] if body.startswith(text[:end]) else body)
            self.last_date = day
        else:
            heading_day = self._heading_date()
            rel = _RELATIVE.search(text)
            base = heading_day or self.last_date or self.today
            day = base - timedelta(days=1) if rel and rel["rel"].lower() == "yesterday" else base
            approx = not (heading_day is not None and rel is None)
        entry = EpisodeEntry(day=day.isoformat(), source=source, text=body or text,
                             approx=approx, line=n)
        self.result.files.episodes.append(entry)
        self.result.routes.append(Route(n, entry.text, "episodic",
                                        ("~" if approx else "") + entry.day))

    def finish(self) -> MigrationResult:
        if self.task.fields:
            self.result.files.tasks.append(self.task)
        for route in self.result.routes:
            if route.line in self.pii and route.destination != "skipped":
                route.note = "; ".join(x for x in (route.note, self.pii[route.line]) if x)
        self.result.files.ordered = True
        self.result.files.updated = self.today.isoformat()
        self.result.files.episodes.sort(key=lambda e: e.day)
        return self.result


def content_lines(text: str) -> Iterator[tuple[int, str, str]]:
    """The lines of a legacy memory file, numbered: ``("skipped", note)`` for code fences
    and code, ``("heading", "## title")`` and ``("line", text)``; blank lines and rules are
    left out. Both sorters (rules and :mod:`memstrata.interfaces.migrate_llm`) read this."""
    in_code = False
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("```"):
            in_code = not in_code
            yield n, "skipped", "code fence"
        elif in_code:
            yield n, "skipped", "inside a code block"
        elif stripped and not re.fullmatch(r"[-*_=]{3,}", stripped):
            yield n, "heading" if re.match(r"^#{1,6}\s", stripped) else "line", stripped


def migrate_text(text: str, *, name: str = "MEMORY.md", today: date | None = None
                 ) -> MigrationResult:
    """Sort the lines of a legacy memory file (see the module docstring)."""
    sorter = _Sorter(name, today or datetime.now(UTC).date())
    for n, kind, line in content_lines(text):
        if kind == "skipped":
            sorter.result.routes.append(Route(n, "", "skipped", line))
        elif kind == "heading":
            heading = re.match(r"^(#{1,6})\s+(.*)$", line)
            assert heading is not None
            sorter.heading(len(heading.group(1)), heading.group(2))
        else:
            sorter.line(n, line)
    return sorter.finish()


def migrate_memory_file(path: str | Path, directory: str | Path, *, overwrite: bool = False,
                        today: date | None = None) -> MigrationResult:
    """Migrate ``path`` into the three files in ``directory``; returns every line's route.

    Undated entries with no earlier date fall back to the file's modification
    date (approximate) unless ``today`` is given.
    """
    path = Path(path)
    unread: list[Issue] = []
    text = read_text(path, path.name, unread)
    if unread:
        raise ValidationError(f"{len(unread)} line(s) of {path} are not text; nothing migrated",
                              hint="; ".join(str(i) for i in unread[:3]),
                              problems=[str(i) for i in unread])
    if today is None:
        today = datetime.fromtimestamp(path.stat().st_mtime, UTC).date()
    result = migrate_text(text, name=path.name, today=today)
    write_files(Path(directory), result.files.render(), overwrite=overwrite)
    return result


#: Shared with the model-driven sorter (:mod:`memstrata.interfaces.migrate_llm`).
BULLET = _BULLET
slug = _slug
source_of = _source

__all__ = ["BULLET", "MigrationResult", "Route", "content_lines", "find_date",
           "migrate_memory_file", "migrate_text", "slug", "source_of"]
