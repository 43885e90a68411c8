"""What a statement says, read without a model: predicate, object, and the words that mark a
change (DESIGN §5.7, offline).

:func:`read` takes a claim or a user's sentence ("I prefer Go", ``alice said: "I prefer
Python"``, "UPDATE: switched to Python, ignore the TypeScript rule") and returns a
:class:`Statement`:

- ``predicate``: the family of the verb (``prefer``: prefer, like, love, want, would rather,
  favour; ``use``: use, work in, write in, code in, switch/move/migrate to, go with, be on),
  or None;
- ``obj``: what follows it, up to a clause boundary; ``category``: the kind of thing the
  object is when a small lexicon knows it (programming language, editor, operating system,
  English variant, ...), or None;
- ``negated``: "no longer", "not ... any more", "stopped", "don't ...";
- ``change``: a word that says the statement replaces an earlier one ("switched", "moved
  to", "instead of", "no longer", "update:", "now", "actually"), and ``replaced``: the
  object it names as replaced ("instead of X", "ignore the X rule", "from X to Y");
- ``question``: the question the statement answers when its words name it: the noun of
  "my/our/Bob's <question> is <answer>" (predicate ``be``: "My manager is Carol" ->
  ``manager``), or the purpose of "use/prefer X for <purpose>" (``tool for notes``);
  ``value``: whether the answer reads as a value (a name, a number or a known term, at most
  four words: "Carol", "GitHub Actions"), not a description ("frozen in December").

An object that is a known term counts whether or not it is capitalised ("I prefer tabs",
"I use email for chat"): after a predicate it is the answer. Elsewhere a term that is also
an everyday word (go, tabs, teams, email, ...) counts only when capitalised.

:func:`slot_attribute` names the slot from the predicate and the object's category
("preferred programming language"), else from the question the words name (``manager``,
``preferred tool for notes``) when the answer is a value, never from the object itself, so
"prefer Python" and "prefer Go", "my manager is Carol" and "my manager is Dan" land in the
same slot. :func:`subject_of` finds the person a third-person statement is about ("Bob
prefers spaces", "Bob's manager is Carol" -> ``Bob``). :func:`named_scope` says whether a
sentence names the session's project ("this publication", "in this repo"), which keeps a
first-person statement at the project instead of the user.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

#: Words of a known category, longest first within each (matched as whole words).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "programming language": (
        "typescript", "javascript", "python", "golang", "go", "rust", "java", "kotlin", "swift",
        "ruby", "php", "scala", "elixir", "haskell", "c++", "c#", "clojure", "lua", "dart",
        "r", "julia", "ocaml", "perl", "zig"),
    "editor": ("visual studio code", "vs code", "vscode", "neovim", "vim", "emacs", "cursor",
               "intellij", "pycharm", "sublime text", "sublime", "zed", "helix", "nano"),
    "operating system": ("macos", "linux", "windows", "ubuntu", "debian", "fedora", "arch"),
    "english variant": ("australian english", "british english", "american english",
                        "canadian english", "us english", "uk english", "us spelling",
                        "uk spelling", "british spelling", "american spelling",
                        "australian spelling", "oxford spelling"),
    "answer format": ("bullet points", "bullet lists", "bullets", "numbered lists", "tables",
                      "prose", "paragraphs", "markdown", "plain text", "short answers",
                      "long answers", "code first"),
    "standup format": ("async standups", "live standups", "async updates", "written updates",
                       "video standups", "daily standups"),
    "chat tool": ("slack", "microsoft teams", "teams", "discord", "email", "e-mail",
                  "mattermost"),
    "drink": ("green tea", "black tea", "tea", "coffee", "espresso", "decaf", "matcha"),
    "package manager": ("pnpm", "yarn", "npm", "poetry", "uv", "pip", "conda", "pipenv",
                        "cargo", "bun"),
    "database": ("postgresql", "postgres", "mysql", "mariadb", "sqlite", "mongodb", "redis",
                 "dynamodb", "cassandra"),
    "ci service": ("github actions", "gitlab ci", "circleci", "jenkins", "buildkite",
                   "travis"),
    "cloud": ("aws", "gcp", "google cloud", "azure", "digitalocean", "hetzner", "fly.io"),
    "test framework": ("pytest", "unittest", "jest", "vitest", "mocha", "rspec", "junit"),
    "static site generator": ("hugo", "jekyll", "eleventy", "docusaurus", "mkdocs", "astro",
                              "gatsby", "next.js", "sphinx"),
    "indentation": ("tabs", "spaces", "two spaces", "four spaces"),
    "time zone": ("cet", "cest", "utc", "pst", "pdt", "est", "edt", "gmt", "bst", "aest"),
}
_TERM_CATEGORY = {term: cat for cat, terms in CATEGORIES.items() for term in terms}
_TERM_RE = re.compile(r"(?<![\w+#.&])(" + "|".join(
    re.escape(t) for t in sorted(_TERM_CATEGORY, key=len, reverse=True)) + r")(?![\w+#&])",
    re.I)
#: Terms that are also everyday words: they count only when written with a capital
#: ("Go", "Teams", "Windows"), never as "go home" or "small teams".
_CASED = frozenset({"go", "r", "c", "teams", "windows", "arch", "cursor", "swift", "dart",
                    "zed", "helix", "nano", "rust", "julia", "lua", "perl", "email", "bun",
                    "spaces", "tabs", "prose", "astro"})
#: Words that may follow an object's kind and still leave it the head ("Python for
#: scripts", "short answers with bullet points").
_TRAILING = frozenset({"with", "and", "over", "than", "rather", "or", "plus", "as", "on", "in",
                       "for", "via", "when",
                       "at", "every", "only", "please"})


def _term(text: str, *, any_case: bool = False) -> re.Match[str] | None:
    """The first known term of ``text`` (a cased one only when capitalised, unless
    ``any_case``)."""
    for m in _TERM_RE.finditer(text):
        if not any_case and m[1].lower() in _CASED and m[1][0].islower():
            continue
        return m
    return None

_PREDICATES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("prefer", re.compile(
        r"\b(?:prefers?|preferring|preferred|likes?|loves?|wants?|favou?rs?|would rather|"
        r"'d rather|rather have|(?:am|is|are) (?:a )?fan of|enjoys?)\b\s+(?:to (?:use|have|"
        r"get|write in|work in|code in) )?(?P<obj>.+)", re.I)),
    ("use", re.compile(
        r"\b(?:(?:switched|switching|moved|moving|migrated|migrating|changed|changing|"
        r"converted|went back|going back|gone back)(?: [\w.+#-]+){0,4}? (?:over )?to|"
        r"now (?:use|using|on)|"
        r"uses?|using|used|work(?:s|ing)? (?:in|with)|writes? in|codes? in|develops? in|"
        r"build(?:s|ing)? (?:in|with)|go(?:es|ing)? with|(?:am|is|are|'m|'re) on|runs? on|"
        r"relies on|standardi[sz]ed on|spell(?:s|ing)? (?:in|with)|write with)\b\s+"
        r"(?P<obj>.+)", re.I)),
)
_CHANGE = re.compile(r"(?:^|\b)(?:update:|correction:|switched|switching|moved to|migrated|"
                     r"changed|instead of|rather than|no longer|not any ?more|anymore|"
                     r"went back to|going back to|from now on|now|actually|these days|"
                     r"replac\w+|ignore)(?:\b|$)", re.I)
_REPLACED = (
    re.compile(r"\binstead of (?:the |using |writing in )?(?P<obj>[^,.;]+)", re.I),
    re.compile(r"\brather than (?:the |using )?(?P<obj>[^,.;]+)", re.I),
    re.compile(r"\bignore (?:the |my |our )?(?:old |earlier |previous )?(?P<obj>[^,.;]+?)"
               r"(?: rule| preference| note| one)?(?:[,.;]|$)", re.I),
    re.compile(r"\bfrom (?P<obj>[^,.;]+?) (?:over )?to\b", re.I),
    re.compile(r"\bno longer (?:use |uses |using |prefer |prefers |like |likes |want |"
               r"on )?(?P<obj>[^,.;]+)", re.I),
)
_CLAUSE_END = re.compile(r"\s*(?:[,.;:!?()]|\band\b|\bbut\b|\bbecause\b|\bsince\b|\bfor\b|"
                         r"\bwhen\b|\bover\b|\bin (?:this|our|the|all)\b|\bfrom now on\b|"
                         r"\bgoing forward\b|\binstead\b|\bnow\b|\bthese days\b|\bplease\b)",
                         re.I)
_QUOTED = re.compile(r'^[^"]*?\bsaid(?:, [^:"]+)?: "(?P<body>.+)"\s*$', re.S)
_LEADING = re.compile(r"^(?:update|correction|note|fyi)\s*:\s*", re.I)

#: What makes a statement name the session's project rather than the person.
_NAMED_SCOPE = re.compile(
    r"\b(?:this|our|the current|in this|for this|on this)\s+(?:publication|project|repo|"
    r"repository|codebase|code base|site|website|book|blog|newsletter|app|application|"
    r"product|docs|documentation|guide|manual|service|package|library|client|account|"
    r"workspace|team|channel|course|series|magazine|journal|paper|thesis|report)\b|"
    r"\b(?:here|in here)\s*$", re.I)
#: What makes it about the person wherever they are.
_EVERYWHERE = re.compile(r"\b(?:everywhere|in (?:all|every) (?:project|repo|publication)s?|"
                         r"across (?:all )?(?:my |our )?(?:projects|repos|work)|always,? "
                         r"(?:in|for) everything|in general|generally)\b", re.I)


@dataclass(frozen=True)
class Statement:
    """What :func:`read` found in one text (see the module docstring)."""

    text: str
    predicate: str | None = None
    obj: str | None = None
    category: str | None = None
    negated: bool = False
    change: bool = False
    replaced: str | None = None
    question: str | None = None
    value: bool = False

    def mentions(self, obj: str | None) -> bool:
        """Whether this statement names ``obj`` (as a whole word, case ignored)."""
        if not obj:
            return False
        return re.search(rf"(?<![\w+#]){re.escape(obj.lower())}(?![\w+#])",
                         self.text.lower()) is not None


def body(text: str) -> str:
    """The quoted words of an explicit proposal (``alice said: "..."``), else the text."""
    m = _QUOTED.match(text.strip())
    return m["body"] if m else text.strip()


def category_of(text: str | None) -> str | None:
    """The category of the first known term in ``text``, or None."""
    if not text:
        return None
    m = _term(text)
    return _TERM_CATEGORY[m[1].lower()] if m else None


def _head(obj: str) -> re.Match[str] | None:
    """The known term an object is about, when it is the object's head: the object starts
    with it and goes on, if at all, with a descriptor ("Python for scripts"), not with
    another noun ("vim keybindings"). The head of a predicate's object is its answer, so
    an everyday-word term counts here in lower case too ("I prefer tabs")."""
    m = _term(obj, any_case=True)
    if m is None or obj[:m.start()].strip():
        return None
    rest = obj[m.end():].split()
    if rest and rest[0].lower().strip(",.;") not in _TRAILING:
        return None
    return m


def _object(rest: str) -> str:
    cut = _CLAUSE_END.search(rest)
    obj = rest[: cut.start()] if cut else rest
    obj = re.sub(r"^(?:to |using |use |have |get |the |a |an |my |our |some )+", "",
                 obj.strip(), flags=re.I)
    return " ".join(obj.split()[:6]).strip(" .'\"")


#: "my/our/his/her/their/Bob's <question> is <answer>": the question is a noun of one to
#: three words (a sentence, so the bounded repetition stays short).
_COPULA = re.compile(
    r"^(?:(?i:my|our|his|her|their)\s+|(?P<owner>[A-Z][\w-]{0,40})'s\s+)"
    r"(?P<question>[A-Za-z][\w-]{0,30}(?:\s+[A-Za-z][\w-]{0,30}){0,2}?)\s+"
    r"(?:is|are|was|'s)\s+(?:(?i:now|still|actually|currently)\s+)?(?P<rest>.+)$")
#: "(use|prefer) X for <purpose>": what X is for names the question.
_PURPOSE = re.compile(r"\s*for\s+(?:(?i:my|our|the|all|any|every)\s+)?"
                      r"(?P<purpose>[a-z][a-z-]{1,30}(?:\s+[a-z][a-z-]{1,30})?)\s*(?:[,.;!?]|$)",
                      re.I)
#: Words a question never is ("my own is ...", "our only ...").
_NOT_QUESTIONS = frozenset({"own", "only", "main", "first", "last", "next", "one", "plan",
                            "goal", "idea", "problem", "issue", "point", "question", "guess"})
#: Words after "for" that say for how long or for whom, not what for ("for now").
_NOT_PURPOSES = frozenset({"now", "today", "tomorrow", "everything", "anything", "all",
                           "example", "instance", "reference", "me", "us", "you", "them",
                           "him", "her", "a", "an", "ever", "good", "years", "months",
                           "weeks", "days", "ages", "long", "once", "free", "sure", "fun"})
#: Articles an answer may start with ("my role is a staff engineer").
_ARTICLE = re.compile(r"^(?:a|an|the)\s+", re.I)


def _value(obj: str | None, category: str | None) -> bool:
    """Whether an answer reads as a value: a known term, or at most four words starting
    with a capital letter or a digit (a name, a number)."""
    if not obj:
        return False
    if category is not None:
        return True
    words = obj.split()
    return len(words) <= 4 and (words[0][0].isupper() or words[0][0].isdigit())


#: A negation right before the predicate: "I no longer use", "we don't want", "stopped using".
_NEGATES = re.compile(r"(?:\bno longer|\bnot|n't|\bnever|\bstopped|\bquit)\s+(?:\w+\s+)?$",
                      re.I)


@functools.lru_cache(maxsize=4096)
def read(text: str) -> Statement:
    """The :class:`Statement` a claim or sentence makes (see the module docstring); pure,
    so a text compared with many others is read once."""
    said = body(text)
    clean = _LEADING.sub("", said)
    predicate = obj = None
    category = None
    negated = False
    best = None
    for name, rule in _PREDICATES:
        first = rule.search(clean)
        if first is not None and (best is None or first.start() < best[1]):
            best = (name, first.start(), first["obj"])
    question = None
    copula = _COPULA.match(clean)
    if copula is not None and (best is None or best[1] > copula.start("rest")):
        asked = " ".join(copula["question"].lower().split())
        if asked.split()[0] not in _NOT_QUESTIONS:
            predicate, question = "be", asked
            obj = _object(_ARTICLE.sub("", copula["rest"])) or None
            best = None
    if best is not None:
        predicate, obj = best[0], _object(best[2]) or None
        negated = bool(_NEGATES.search(clean[:best[1]]))
        cut = _CLAUSE_END.search(best[2])
        purpose = _PURPOSE.match(best[2], cut.start()) if cut is not None else None
        goal = " ".join(purpose["purpose"].lower().split()) if purpose is not None else ""
        if goal and goal.split()[0] not in _NOT_PURPOSES:
            question = "tool for " + goal
    head = _head(obj) if obj else None
    if head is not None:
        category, obj = _TERM_CATEGORY[head[1].lower()], head[1].lower()
    replaced = None
    for rule in _REPLACED:
        hit = rule.search(clean)
        if hit:
            replaced = _object(hit["obj"]) or None
            term = _term(replaced) if replaced else None
            if term is not None:
                replaced = term[1].lower()
            break
    return Statement(text=said, predicate=predicate, obj=obj, category=category,
                     negated=negated, change=bool(_CHANGE.search(said)), replaced=replaced,
                     question=question, value=_value(obj, category))


def slot_attribute(statement: Statement) -> str | None:
    """The slot a statement answers: from its predicate and its object's category ("prefer
    Go" -> ``preferred programming language``), else from the question its words name when
    the answer is a value ("My manager is Carol" -> ``manager``; "I use Notion for notes"
    -> ``tool for notes``); None otherwise. Never from the answer itself."""
    if statement.predicate is None:
        return None
    if statement.category is not None:
        answer = statement.category
    elif statement.question is not None and statement.value and not statement.negated:
        answer = statement.question
    else:
        return None
    return f"preferred {answer}" if statement.predicate == "prefer" else answer


#: Capitalised words that start a sentence without naming who it is about.
_NOT_NAMES = frozenset({
    "i", "we", "you", "he", "she", "they", "it", "this", "that", "these", "those", "the",
    "a", "an", "our", "my", "your", "their", "his", "her", "its", "there", "here",
    "everyone", "everybody", "someone", "somebody", "nobody", "no", "all", "every", "each",
    "some", "any", "both", "also", "always", "never", "please", "today", "tomorrow",
    "yesterday", "now", "then", "when", "if", "monday", "tuesday", "wednesday", "thursday",
    "friday", "saturday", "sunday", "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december", "user", "agent",
    "team", "customers", "clients", "people", "nothing", "none", "only"})
#: A name (one or two capitalised words) and what a statement says a person does or has.
_THIRD_PERSON = re.compile(
    r"^(?P<name>[A-Z][a-z][\w-]{0,30}(?:\s+[A-Z][a-z][\w-]{0,30})?)(?:'s\s+[a-z]|\s+"
    r"(?:(?:also|now|still|really|always|never|usually|no longer|actually)\s+)?"
    r"(?:prefers|likes|loves|wants|favou?rs|would rather|'d rather|enjoys|hates|dislikes|"
    r"uses|is using|works (?:in|with|on|at|from)|writes (?:in|with)|codes in|develops in|"
    r"is on|is a fan of|switched|moved|migrated|lives|speaks|reports to|leads|manages|"
    r"owns|drinks|eats|doesn't|does not|can't|cannot|needs|is allergic)\b)")


def subject_of(text: str) -> str | None:
    """The person (or named thing) a third-person statement is about: "Bob prefers
    spaces", "Bob's manager is Carol" -> ``Bob``; None for a first-person statement or one
    that starts with a pronoun, a determiner, a day or a known term ("Python uses ...")."""
    m = _THIRD_PERSON.match(_LEADING.sub("", body(text)).strip())
    if m is None:
        return None
    name = " ".join(m["name"].split())
    first = name.split()[0].lower()
    if first in _NOT_NAMES or _term(name, any_case=True) is not None:
        return None
    return name


def named_scope(text: str) -> str | None:
    """The words by which ``text`` names the session's project ("this publication"), or
    None; a statement that says "everywhere" / "in all projects" names none."""
    if _EVERYWHERE.search(text):
        return None
    m = _NAMED_SCOPE.search(text)
    return " ".join(m[0].split()) if m else None


__all__ = ["CATEGORIES", "Statement", "body", "category_of", "named_scope", "read",
           "slot_attribute", "subject_of"]
