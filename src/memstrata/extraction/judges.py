"""Conflict judges: does a new candidate replace an existing fact in another slot? (DESIGN §5.7)

The facts layer already supersedes within one slot (scope + subject +
attribute). This module goes beyond exact slots, for extraction:

1. :func:`conflict_candidates` finds active facts of *exactly* the
   candidate's scope that might answer the same question: the same slot
   after normalisation (:func:`slot_key`: case, separators and plural ``s``
   ignored), vector cosine >= ``min_cosine`` when the store has vectors,
   or lexical similarity >= ``min_overlap`` (:func:`term_overlap` of the
   claim and attribute terms; one shared term in five is enough). Facts in
   the candidate's own exact slot are left to the facts layer.
2. A :class:`ConflictJudge` decides ``supersede`` or ``coexist`` for each,
   best match first, and stops at the first ``supersede``:

   - :class:`RuleJudge` (default, no model): supersede when subject and attribute are the
     same question after normalisation, or when the statements
     (:mod:`memstrata.extraction.statements`) share a predicate about the same kind of thing
     with a different object ("prefer Python" / "prefer Go"), or name the same question
     with another value ("my manager is Carol" / "my manager is Dan", "use Notion for
     notes" / "use Obsidian for notes"), or the new one marks a change of what the old one
     says ("switched to Y", "instead of X", "no longer X", "UPDATE:"); ``review`` when they
     may contradict but the rules cannot tell (the same predicate on objects of unknown
     kinds that share a word, one kind of thing under two predicates, or the same question
     answered by descriptions rather than values): the candidate waits for a person
     instead of coexisting silently; else coexist. :class:`SlotJudge` is the slot rule alone;
   - :class:`LLMJudge`: asks a language model, with structured output; an
     unusable answer is a :class:`~memstrata.errors.ProviderError`.

3. :func:`resolve` returns the candidate to write: moved into the existing
   fact's slot when the judge said supersede (so the facts layer records the
   supersession: ``superseded_by``, ``valid_to``, the reason and evidence),
   marked for review (``Candidate.review``) when a judge said review and none superseded,
   or unchanged. A candidate whose content words equal an existing fact's
   (same kind) is routed as a duplicate of it (the older record is kept and
   confirmed). Judging only reads; it never writes.

Lexical terms (:func:`content_terms`): lower-cased words without stop words,
lightly stemmed (``-ies``, ``-ing``, ``-ed``, ``-es``, ``-s``, then a final
``-e``, never below three letters); two terms match when equal or when one
is a prefix of the other and the shorter has at least four letters
(``writ``/``written``). Names (the subject, the scope's user/project/agent,
the words ``user``/``agent`` and the framing word ``said``) are left out, so
"Alice prefers X" and "I prefer X" compare on X.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..errors import ProviderError
from ..governance.policy import Candidate
from ..models import Fact, Scope
from ..store.lexical import STOPWORDS
from ..store.lexical import terms as _words
from . import statements

if TYPE_CHECKING:
    from ..layers.facts import Facts
    from ..providers.llm import LLMClient

JudgeVerdict = Literal["supersede", "coexist", "review"]

#: Lexical similarity (overlap coefficient of claim + attribute terms) worth a judge's look.
MIN_OVERLAP = 0.2
#: Vector cosine that makes a fact worth judging (when the store has vectors).
MIN_COSINE = 0.5
#: How many similar facts are judged per candidate, best first.
MAX_JUDGED = 3
#: Framing words that say nothing about the content ("alice said: ...").
_GENERIC_NAMES = frozenset({"user", "agent", "the", "said"})
_NEGATIONS = frozenset({"not", "no", "never", "nor", "without", "cannot", "none", "nobody",
                        "nothing", "neither", "stop", "stopped"})
#: The one term every negation word becomes.
NEGATION = "~not"


# ------------------------------------------------------------------------ lexical tools


def stem(word: str) -> str:
    """A light, deterministic English stem (see the module docstring)."""
    for suffix, repl in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) + len(repl) >= 3:
            word = word[: len(word) - len(suffix)] + repl
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def content_terms(text: str, *, drop: Iterable[str] = ()) -> set[str]:
    """Stemmed content words of ``text``, without stop words and without ``drop`` words.

    Negations (not, no, never, don't, without...) are kept as one term, ``~not``, so
    "wants X" and "does not want X" never compare as the same wording.
    """
    dropped = {stem(w.replace("-", "")) for name in drop for w in _words(name.replace("_", " "))}
    out = set()
    for word in _words(text.replace("_", " "), keep_stopwords=True):
        if word in _NEGATIONS or word.endswith("n't"):
            out.add(NEGATION)
            continue
        if word in STOPWORDS:
            continue
        word = word.replace("-", "")  # stand-up == standup
        if word and word not in _GENERIC_NAMES:
            s = stem(word)
            if s not in dropped:
                out.add(s)
    return out


def term_matches(term: str, others: Iterable[str]) -> bool:
    """Does ``term`` match any of ``others`` (equal, or a prefix of >= 4 letters)?"""
    for other in others:
        if term == other:
            return True
        short, long_ = (term, other) if len(term) <= len(other) else (other, term)
        if len(short) >= 4 and long_.startswith(short):
            return True
    return False


def coverage(needles: set[str], haystack: set[str]) -> float:
    """Share of ``needles`` that match a term of ``haystack`` (1.0 when needles is empty)."""
    if not needles:
        return 1.0
    return sum(term_matches(t, haystack) for t in needles) / len(needles)


def term_overlap(a: set[str], b: set[str]) -> float:
    """Overlap coefficient |a ∩ b| / min(|a|, |b|), with prefix-aware matching."""
    if not a or not b:
        return 0.0
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    return sum(term_matches(t, large) for t in small) / len(small)


def same_terms(a: set[str], b: set[str]) -> bool:
    """Every term of each set matches a term of the other (equivalent wording)."""
    return bool(a) and bool(b) and coverage(a, b) == 1.0 and coverage(b, a) == 1.0


def slot_key(subject: str, attribute: str) -> tuple[str, str]:
    """The slot with case, separators and a plural ``s`` ignored."""

    def norm(text: str) -> str:
        parts = [p for p in re.split(r"[^0-9a-z]+", text.lower()) if p]
        return "_".join(p[:-1] if len(p) > 3 and p.endswith("s") and not p.endswith("ss")
                        else p for p in parts)

    return norm(subject), norm(attribute)


def names_of(scope: Scope, subject: str) -> list[str]:
    """Words that name who a fact is about (dropped before comparing wording)."""
    return [n for n in (subject, scope.user, scope.project, scope.agent) if n]


# ------------------------------------------------------------------------------ judges


@dataclass(frozen=True)
class Judgement:
    """A judge's decision about one (existing fact, candidate) pair."""

    verdict: JudgeVerdict
    reason: str
    judge: str


@runtime_checkable
class ConflictJudge(Protocol):
    """Decides whether ``candidate`` replaces ``existing`` (supersede) or not (coexist)."""

    name: str

    def judge(self, existing: Fact, candidate: Candidate) -> Judgement:
        """Return the verdict and a one-line reason."""
        ...


class SlotJudge:
    """The default judge, no model: the same subject and attribute is the same question."""

    name = "slot"

    def judge(self, existing: Fact, candidate: Candidate) -> Judgement:
        if slot_key(existing.subject, existing.attribute) == slot_key(candidate.subject,
                                                                     candidate.attribute):
            return Judgement("supersede", f"same subject and attribute as {existing.ref} "
                             f"({existing.subject}/{existing.attribute})", self.name)
        return Judgement("coexist", f"different slot from {existing.ref} "
                         f"({existing.subject}/{existing.attribute})", self.name)


class RuleJudge:
    """The default judge without a model (see the module docstring)."""

    name = "rules"

    def judge(self, existing: Fact, candidate: Candidate) -> Judgement:
        slot = SlotJudge().judge(existing, candidate)
        if slot.verdict == "supersede":
            return Judgement("supersede", slot.reason, self.name)
        if slot_key(existing.subject, "")[0] != slot_key(candidate.subject, "")[0]:
            return Judgement("coexist", f"about another subject than {existing.ref}",
                             self.name)
        verdict, reason = compare_claims(existing.claim, candidate.claim, existing.ref)
        return Judgement(verdict, reason, self.name)


def compare_claims(old_claim: str, new_claim: str, old_ref: str) -> tuple[JudgeVerdict, str]:
    """The rules of :class:`RuleJudge` on two claims about one subject (also used by
    ``lint`` on the memory files): supersede, review or coexist, and why."""
    old, new = statements.read(old_claim), statements.read(new_claim)
    what = f"{old_ref} ({_say(old)})"
    if new.replaced and (old.mentions(new.replaced) or (
            old.category is not None and old.category == statements.category_of(
                new.replaced))):
        return "supersede", f"replaces {new.replaced!r} of {what}"
    if new.negated and not old.negated and old.obj and new.obj == old.obj and \
            new.predicate == old.predicate:
        return "supersede", f"says {old.obj!r} no longer holds ({what})"
    if old.predicate is None or new.predicate is None:
        return "coexist", f"no predicate to compare with {what}"
    if old.category is not None and old.category == new.category:
        if old.obj == new.obj:
            return "coexist", f"the same {old.category} as {what}"
        if old.predicate == new.predicate or new.change:
            return "supersede", (f"{_say(new)} replaces {_say(old)}: the same question "
                                 f"({old.category}), another answer")
        return "review", f"{_say(new)} / {_say(old)} of {old_ref}: two predicates about one " \
                         f"{old.category}"
    if old.question is not None and old.question == new.question and old.obj and new.obj \
            and old.obj.lower() != new.obj.lower() and old.negated == new.negated:
        if old.value and new.value:
            return "supersede", (f"{_say(new)} replaces {_say(old)}: the same question "
                                 f"({old.question}), another answer")
        return "review", (f"{_say(new)} / {_say(old)} of {old_ref}: the same question "
                          f"({old.question}), answers the rules cannot compare")
    if old.predicate == new.predicate and old.category is None and new.category is None \
            and old.obj and new.obj and old.obj.lower() != new.obj.lower() and \
            term_overlap(content_terms(old.obj), content_terms(new.obj)) > 0:
        return "review", (f"{_say(new)} / {_say(old)} of {old_ref}: the same predicate, "
                          "objects the rules cannot compare")
    return "coexist", f"about something else than {what}"


def _say(st: statements.Statement) -> str:
    if st.predicate is None:
        return "no predicate"
    if st.predicate == "be" and st.question is not None:
        return f"{st.question} {'is not' if st.negated else 'is'} {st.obj or '?'}"
    return f"{'not ' if st.negated else ''}{st.predicate} {st.obj or '?'}"


JUDGE_SCHEMA: dict[str, Any] = {
    "title": "conflict_judgement",
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["supersede", "coexist"]},
        "reason": {"type": "string"},
    },
    "required": ["verdict", "reason"],
    "additionalProperties": False,
}

JUDGE_SYSTEM = """You maintain an agent's long-term memory. Decide whether a NEW statement \
replaces an EXISTING memory record.

Answer "supersede" when both answer the same question about the same subject and the new one \
is meant to replace the old: a change of preference, a reversal, a correction, a new value of \
the same setting. Answer "coexist" when they are compatible, about different questions or \
subjects, or when the new one only adds detail. When unsure, answer "coexist".
Give a one-sentence reason that names what changed."""


class LLMJudge:
    """Asks a language model (any :class:`~memstrata.providers.llm.LLMClient`) for the verdict."""

    name = "llm"

    def __init__(self, client: LLMClient, *, max_tokens: int = 300) -> None:
        self.client = client
        self.max_tokens = max_tokens

    def judge(self, existing: Fact, candidate: Candidate) -> Judgement:
        since = (existing.valid_from or existing.created_at).date().isoformat()
        user = (
            f"EXISTING record ({existing.ref}, {existing.kind}, slot "
            f"{existing.subject}/{existing.attribute}, stated by {existing.actor} on {since}):\n"
            f"{existing.claim}\n\n"
            f"NEW statement ({candidate.kind}, slot {candidate.subject}/{candidate.attribute}, "
            f"stated by {candidate.actor}):\n{candidate.claim}"
        )
        if candidate.evidence:
            user += f"\nIts source says: {candidate.evidence}"
        answer = self.client.complete_json(JUDGE_SYSTEM, user, JUDGE_SCHEMA,
                                           max_tokens=self.max_tokens)
        if not isinstance(answer, dict) or answer.get("verdict") not in ("supersede", "coexist"):
            raise ProviderError(f"the conflict judge answered {answer!r}, not a verdict",
                                hint="use a model/server with structured output")
        reason = " ".join(str(answer.get("reason") or "").split())[:500] or "no reason given"
        return Judgement(answer["verdict"], reason, self.name)


# ---------------------------------------------------------------------------- resolving


@dataclass(frozen=True)
class Similar:
    """An active fact that might answer the candidate's question, and why it was found."""

    fact: Fact
    score: float
    how: str  # "slot" | "cosine" | "terms"


@dataclass
class Resolution:
    """What :func:`resolve` decided for one candidate."""

    candidate: Candidate
    action: Literal["as_proposed", "supersede", "duplicate", "review"] = "as_proposed"
    target: Fact | None = None
    judgement: Judgement | None = None
    judged: list[tuple[Similar, Judgement]] = field(default_factory=list)
    dup_reason: str | None = None

    @property
    def note(self) -> str | None:
        """One line for the report, or None when nothing was judged."""
        if self.action == "duplicate":
            return self.dup_reason
        if self.action == "review" and self.judgement is not None:
            return f"{self.judgement.judge} judge: sent to review: {self.judgement.reason}"
        if self.judgement is not None and self.target is not None:
            return f"{self.judgement.judge} judge: supersedes {self.target.ref}: " \
                   f"{self.judgement.reason}"
        if self.judged:
            return "; ".join(f"{j.judge} judge: coexists with {s.fact.ref}"
                             for s, j in self.judged)
        return None


def conflict_candidates(layer: Facts, cand: Candidate, *, min_overlap: float = MIN_OVERLAP,
                        min_cosine: float = MIN_COSINE, limit: int = MAX_JUDGED,
                        facts: Sequence[Fact] | None = None) -> list[Similar]:
    """Active facts of exactly ``cand.scope`` in other slots that may answer the same question.

    ``facts`` (the scope's current facts) may be passed in to save a read.
    """
    if facts is None:
        facts = layer.current(cand.scope, limit=1000)
    own = (cand.subject, cand.attribute)
    pool = [f for f in facts if f.scope == cand.scope and f.status == "active"
            and (f.subject, f.attribute) != own]
    if not pool:
        return []
    found: dict[str, Similar] = {}
    key = slot_key(cand.subject, cand.attribute)
    for f in pool:
        if slot_key(f.subject, f.attribute) == key:
            found[f.id] = Similar(f, 1.0, "slot")
    for fid, score in layer.claim_cosines(cand.scope, cand.claim, [f.id for f in pool]):
        if score >= min_cosine and fid not in found:
            fact = next(f for f in pool if f.id == fid)
            found[fid] = Similar(fact, score, "cosine")
    mine = content_terms(f"{cand.claim} {cand.attribute}",
                         drop=names_of(cand.scope, cand.subject))
    for f in pool:
        if f.id in found:
            continue
        theirs = content_terms(f"{f.claim} {f.attribute}", drop=names_of(f.scope, f.subject))
        score = term_overlap(mine, theirs)
        if score >= min_overlap:
            found[f.id] = Similar(f, score, "terms")
    order = {"slot": 0, "cosine": 1, "terms": 2}
    ranked = sorted(found.values(), key=lambda s: (order[s.how], -s.score, s.fact.id))
    return ranked[:limit]


def resolve(layer: Facts, cand: Candidate, judge: ConflictJudge, *,
            facts: Sequence[Fact] | None = None, min_overlap: float = MIN_OVERLAP,
            min_cosine: float = MIN_COSINE, limit: int = MAX_JUDGED) -> Resolution:
    """Decide where ``cand`` goes: its own slot, an existing fact's slot, or a duplicate."""
    if facts is None:
        facts = layer.current(cand.scope, limit=1000)
    mine = content_terms(cand.claim, drop=names_of(cand.scope, cand.subject))
    same_kind = [f for f in facts if f.scope == cand.scope and f.status == "active"
                 and f.kind == cand.kind]
    for f in same_kind:
        if same_terms(mine, content_terms(f.claim, drop=names_of(f.scope, f.subject))):
            # The facts layer confirms an equal claim in the same slot: route it there.
            moved = cand.model_copy(update={"subject": f.subject, "attribute": f.attribute,
                                            "claim": f.claim})
            return Resolution(moved, "duplicate", f, dup_reason=f"same content words as {f.ref}")
    similar = conflict_candidates(layer, cand, min_overlap=min_overlap, min_cosine=min_cosine,
                                  limit=limit, facts=facts)
    res = Resolution(cand)
    review: tuple[Similar, Judgement] | None = None
    for s in similar:
        verdict = judge.judge(s.fact, cand)
        if verdict.verdict == "supersede":
            moved = cand.model_copy(update={"subject": s.fact.subject,
                                            "attribute": s.fact.attribute})
            res.candidate, res.action, res.target, res.judgement = (moved, "supersede", s.fact,
                                                                    verdict)
            return res
        if verdict.verdict == "review" and review is None:
            review = (s, verdict)
        res.judged.append((s, verdict))
    if review is not None:
        s, verdict = review
        res.candidate = cand.model_copy(update={
            "review": f"may contradict {s.fact.ref} ({verdict.reason}); a person decides"})
        res.action, res.target, res.judgement = "review", s.fact, verdict
    return res


__all__ = [
    "JUDGE_SCHEMA",
    "MAX_JUDGED",
    "MIN_COSINE",
    "MIN_OVERLAP",
    "NEGATION",
    "ConflictJudge",
    "JudgeVerdict",
    "Judgement",
    "LLMJudge",
    "Resolution",
    "RuleJudge",
    "Similar",
    "SlotJudge",
    "compare_claims",
    "conflict_candidates",
    "content_terms",
    "coverage",
    "names_of",
    "resolve",
    "same_terms",
    "slot_key",
    "stem",
    "term_matches",
    "term_overlap",
]
