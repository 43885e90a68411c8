"""End-of-session extraction: ``mem.extract(scope, transcript, proposer=...)`` (DESIGN §5).

A *proposer* reads the session and suggests what deserves durable memory;
the harness checks every suggestion and the write policy decides. Most
sessions should produce zero or one fact.

Contract:

- Input: a transcript (:func:`memstrata.extraction.session.load_transcript`). Turn *N* is
  the message at index *N* (0-based). A malformed message is a ValidationError.
- Proposers (:mod:`memstrata.extraction.proposers`): :class:`LLMProposer` or, with no
  model, :class:`ExplicitProposer`. Each :class:`Proposal` cites the turn it comes from.
- All or nothing. Every proposal is checked before anything is written:
  the cited turn exists and is a user, assistant or tool turn (a system
  prompt or a memstrata summary cannot be cited); an ``evidence`` quote, if
  given, occurs verbatim in that turn (case, whitespace and quote style
  ignored; for proposals from tool calls such as ``propose_memory``, whose
  ``via`` is neither ``llm`` nor ``statement``: in any turn up to the call);
  and the turn *supports* the claim: at least ``SUPPORT_MIN`` (half) of the
  claim's content words, names of the subject and scope left out, occur in
  the turn (stemmed; see :mod:`memstrata.extraction.judges`), or a third
  (``SUPPORT_MIN_QUOTED``) when the evidence quote was found in the turn.
  Malformed model output is a :class:`~memstrata.errors.ProviderError`; any
  invalid proposal is a :class:`~memstrata.errors.ValidationError` listing
  every problem. Either way nothing is written. Conflict judging (which may
  call a model) also runs before the first write. ``strict=False`` reports
  invalid proposals as rejected instead of raising.
- Actor follows the cited turn's role: user -> ``user``, assistant ->
  ``agent``, tool -> ``tool`` (so tool and agent content waits for review).
  Source is ``{source}#turn-{N}``; evidence is the quote, else an excerpt of
  the turn. A proposal's ``applies_to`` picks the fact's scope: ``user``
  (the user alone, so it follows them across projects), ``project`` (the
  project alone) or ``scope`` (the extraction scope as given).
- Each proposal goes through :meth:`Facts.propose_candidate` (the write
  policy, dedup, supersession), after :func:`memstrata.extraction.judges.resolve` has
  looked for an existing fact in another slot that it duplicates or
  supersedes (judge: :class:`~.judges.LLMJudge` on the proposer's
  client when it has one, else :class:`~.judges.RuleJudge`, which sends a possible
  contradiction it cannot settle to review).
- Running it again is a no-op for what it wrote. A proposal whose source
  (``{source}#turn-{N}``) and content words equal those of a fact already stored in its
  scope, in any status (current, superseded, pending, rejected, retired), was extracted
  before: it is reported as ``duplicate`` ("already extracted") and nothing is written or
  confirmed, so a retried batch or a second ``memstrata extract`` of one transcript
  changes nothing, and a superseded statement of the session never comes back. Pass a
  stable ``source=`` per session: the default, ``session:{date}``, names a day.
- An older statement never replaces a newer current fact. A statement is dated by its
  turn's time (``timestamp`` / ``created_at``, :mod:`memstrata.extraction.session`), else
  ``observed_at=`` (when the session happened), else now; the date becomes the fact's
  ``valid_from``. When the slot's current fact holds since later than that
  (``valid_from``), or comes from a later turn of the same session (the same ``source=``,
  when one is given), the statement goes to review (``Candidate.review``) instead of
  superseding it: a person decides whether the old answer comes back. A turn dated after
  now is invalid.
- "forget ..." deletes, for real (the forget of :mod:`memstrata.layers.forget`), the facts
  owned by the
  scope's *user* (never tenant- or project-wide) whose text contains every
  content word of the request, with their supersession history. Without a
  user in the scope it is rejected. Episodes are not searched.
- ``task=``: an identity fact sent to review is listed in that task's
  checkpoint under ``pending_identity_changes`` (``fact:ID ...``); entries
  whose fact is no longer pending are dropped (:func:`sync_pending_identity`).
  Only an open task's checkpoint is kept so: a task that does not exist is not created
  and a closed one is not reopened; either is reported in ``errors`` (the facts are
  written all the same, and wait in the review queue).
- The :class:`ExtractionReport` lists committed, pending, duplicate,
  superseding, rejected and forgotten items with reasons, and ``errors`` for
  writes that failed after validation (each write is its own transaction).

The run takes the parts it writes through (:class:`ExtractionTargets`: the facts and
checkpoints layers, the write policy, the clock and a forget of record ids), never the
facade.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..clock import Clock
from ..errors import MemstrataError, NotFound, ValidationError
from ..governance.policy import Candidate, WritePolicy
from ..governance.safety import redact_secrets
from ..inputs import MAX_SOURCE, clean_text, date_arg
from ..layers.checkpoints import Checkpoints
from ..layers.facts import Facts
from ..models import Checkpoint, Fact, ForgetReport, Scope, build
from .judges import (
    ConflictJudge,
    LLMJudge,
    RuleJudge,
    content_terms,
    coverage,
    names_of,
    resolve,
    same_terms,
)
from .proposers import AppliesTo, ExplicitProposer, ForgetRequest, Proposal, Proposed, Proposer
from .report import ExtractionItem, ExtractionReport, ItemStatus
from .session import Session, Turn, load_transcript, quote_in, support

#: Share of a claim's content words that must occur in the cited turn.
SUPPORT_MIN = 0.5
#: The same, when the proposal carries an evidence quote found verbatim in the turn: the
#: quote pins the statement down, so a paraphrase ("docs PRs" -> "documentation pull
#: requests") may share fewer words.
SUPPORT_MIN_QUOTED = 1 / 3
#: Characters of the cited turn kept as evidence when no quote is given.
EXCERPT_CHARS = 400


@dataclass(frozen=True)
class ExtractionTargets:
    """What an extraction writes through."""

    facts: Facts
    checkpoints: Checkpoints
    policy: WritePolicy
    clock: Clock
    #: ``forget_ids(scope, ids)``: delete these facts of the scope for real.
    forget_ids: Callable[[Scope, list[str]], ForgetReport]

@dataclass
class _Planned:
    proposal: Proposed
    candidate: Candidate | None = None
    judge_note: str | None = None
    problem: str | None = None
    index: int = 0
    #: Narrower current answers of the candidate's slot the session sees, which the write
    #: replaces there (:func:`_narrower_answers`).
    replaces: tuple[Fact, ...] = ()
    #: The fact an earlier run of this session stored for this proposal (nothing to write).
    stored: Fact | None = None


def extract(mem: ExtractionTargets, scope: Scope, transcript: Any,
            proposer: Proposer | None = None, *,
            source: str | None = None, task: str | None = None,
            judge: ConflictJudge | None = None, strict: bool = True,
            observed_at: datetime | str | None = None) -> ExtractionReport:
    """Run ``proposer`` over the session and write what the policy accepts (see module doc)."""
    turns = load_transcript(transcript)
    now = mem.clock.now()
    observed = date_arg(observed_at, "observed_at")
    if observed is not None and observed > now:
        raise ValidationError(f"observed_at ({observed.isoformat()}) is in the future",
                              hint="the time the session happened; omit it for now")
    try:
        base = clean_text(source or f"session:{now.date().isoformat()}", field="source",
                          max_len=MAX_SOURCE - 20)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    proposer = proposer if proposer is not None else ExplicitProposer()
    if judge is None:
        client = getattr(proposer, "client", None)
        judge = LLMJudge(client) if client is not None else RuleJudge()
    existing = tuple(mem.facts.current(scope, limit=1000))
    session = Session(scope, turns, existing, now)
    proposals = list(proposer.propose(session))
    name = str(getattr(proposer, "name", type(proposer).__name__))
    odd = [type(p).__name__ for p in proposals if not isinstance(p, Proposal | ForgetRequest)]
    if odd:
        raise ValidationError(f"proposer {name} returned {', '.join(sorted(set(odd)))}, not "
                              "Proposal or ForgetRequest; nothing was written")
    report = ExtractionReport(scope=scope, proposer=name, source=base, turns=len(turns))

    plans = [_check(p, n, turns, scope, base, now, observed)
             for n, p in enumerate(proposals, 1)]
    bad = [p for p in plans if p.problem]
    if bad and strict:
        listed = "; ".join(str(p.problem) for p in bad[:5])
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise ValidationError(
            f"extraction refused, nothing was written: {len(bad)} of {len(plans)} proposals "
            f"from {name} are invalid: {listed}{more}",
            hint="each proposal must cite an existing user/assistant/tool turn that states it",
            problems=[p.problem for p in bad])
    for p in bad:
        report.add(_item(p, "rejected", f"invalid: {p.problem}"))
    plans = [p for p in plans if not p.problem]
    plans = _cap(plans, getattr(proposer, "max_candidates", None), report)

    _mark_extracted(mem, plans)

    # Judging may call a model: do all of it before the first write.
    for plan in plans:
        if plan.candidate is not None and plan.stored is None:
            # a default source names a day, not a session: no turn order across it
            _plan_conflict(mem, plan, judge, existing, now, base if source else None)

    for plan in sorted(plans, key=lambda p: (p.proposal.turn, p.index)):
        try:
            if isinstance(plan.proposal, ForgetRequest):
                report.add(_forget(mem, scope, plan))
            elif plan.stored is not None:
                report.add(_already(plan, plan.stored))
            else:
                report.add(_write(mem, plan))
        except MemstrataError as exc:
            report.errors.append(f"turn {plan.proposal.turn}: {type(exc).__name__}: {exc}")
    if task is not None:
        try:
            # extraction keeps a task's list; it never opens a task nor reopens a closed one
            held = mem.checkpoints.current(scope, task)
            if held is None:
                report.errors.append(
                    f"checkpoint {task}: no such task in this scope, so no pending identity "
                    "change was listed there (extraction creates no task: check the name, "
                    "or save the task's checkpoint first)")
            elif held.status == "closed":
                report.errors.append(
                    f"checkpoint {task}: the task is closed, so no pending identity change "
                    "was listed there (extraction never reopens a task: they wait in "
                    "memstrata review)")
            else:
                cp = _note_pending_identity(mem, scope, task, report)
                report.checkpoint = cp.ref if cp is not None else None
        except MemstrataError as exc:
            report.errors.append(f"checkpoint {task}: {type(exc).__name__}: {exc}")
    return report


def _check(p: Proposed, n: int, turns: tuple[Turn, ...], scope: Scope, base: str,
           now: datetime, observed: datetime | None) -> _Planned:
    plan = _Planned(p, index=n)
    what = f"proposal {n} ({p.via}"
    what += f', "{_short(p.claim)}")' if isinstance(p, Proposal) else ", forget)"
    if not 0 <= p.turn < len(turns):
        span = f"turns 0-{len(turns) - 1}" if turns else "no turns"
        plan.problem = f"{what} cites turn {p.turn}, but the transcript has {span}"
        return plan
    turn = turns[p.turn]
    if isinstance(p, ForgetRequest):
        if turn.role != "user":
            plan.problem = f"{what} cites turn {p.turn}, a {turn.role} turn: only the user " \
                           "can ask to forget"
        return plan
    if turn.actor is None:
        plan.problem = f"{what} cites turn {p.turn}, a {turn.role} message, which no " \
                       "fact can come from"
        return plan
    if p.evidence:
        # A propose_memory call may quote what the user said earlier in the session.
        pool = turn.text if p.via in ("llm", "statement") else "\n".join(
            t.text for t in turns[: p.turn + 1])
        if not quote_in(p.evidence, pool):
            plan.problem = f"{what}: its evidence quote does not occur in turn {p.turn}"
            return plan
    names = [*names_of(scope, p.subject), "said"]  # "said": the explicit proposer's framing
    share = support(p.claim, turn.text, names)
    need = SUPPORT_MIN_QUOTED if p.evidence else SUPPORT_MIN
    if share < need:
        plan.problem = (f"{what} is not supported by turn {p.turn}: {share:.0%} of its content "
                        f"words occur there (needs {need:.0%})")
        return plan
    stated = turn.at or observed  # None: now, the facts layer's default
    if stated is not None and stated > now:
        plan.problem = f"{what} cites turn {p.turn}, dated {stated.isoformat()}, in the future"
        return plan
    evidence = p.evidence or _excerpt(turn.text)
    try:
        plan.candidate = build(
            Candidate, scope=_fact_scope(scope, p.applies_to), kind=p.kind, subject=p.subject,
            attribute=p.attribute, claim=p.claim, actor=turn.actor,
            source=f"{base}#turn-{p.turn}", confidence=p.confidence, tier=p.tier,
            evidence=evidence, valid_from=stated)
    except ValidationError as exc:
        plan.problem = f"{what}: {exc.message}"
    return plan


def _fact_scope(scope: Scope, applies_to: AppliesTo) -> Scope:
    if applies_to == "user" and scope.user is not None:
        return Scope(tenant=scope.tenant, user=scope.user)
    if applies_to == "project" and scope.project is not None:
        return Scope(tenant=scope.tenant, project=scope.project)
    return scope


def _cap(plans: list[_Planned], cap: int | None, report: ExtractionReport) -> list[_Planned]:
    facts = [p for p in plans if isinstance(p.proposal, Proposal)]
    if cap is None or len(facts) <= cap:
        return plans
    ranked = sorted(facts, key=lambda p: (-_confidence(p), p.index))
    dropped = {id(p) for p in ranked[cap:]}
    for p in ranked[cap:]:
        report.add(_item(p, "rejected", f"over the cap of {cap} proposals per session "
                                        f"(kept the {cap} most confident)"))
    return [p for p in plans if id(p) not in dropped]


def _confidence(plan: _Planned) -> float:
    return plan.proposal.confidence if isinstance(plan.proposal, Proposal) else 1.0


def _mark_extracted(mem: ExtractionTargets, plans: Sequence[_Planned]) -> None:
    """Set ``stored`` on each proposal an earlier run of this session wrote already: a
    fact of its scope with its source and its content words, in any status."""
    by_scope: dict[Scope, dict[str, list[Fact]]] = {}
    for plan in plans:
        cand = plan.candidate
        if cand is None or cand.source is None:
            continue
        if cand.scope not in by_scope:
            sources: dict[str, list[Fact]] = {}
            for f in mem.facts.owned(cand.scope):
                if f.scope == cand.scope:
                    sources.setdefault(f.provenance.source, []).append(f)
            by_scope[cand.scope] = sources
        mine = content_terms(cand.claim, drop=names_of(cand.scope, cand.subject))
        plan.stored = next((f for f in by_scope[cand.scope].get(cand.source, [])
                            if f.claim == cand.claim or same_terms(mine, content_terms(
                                f.claim, drop=names_of(f.scope, f.subject)))), None)


def _already(plan: _Planned, fact: Fact) -> ExtractionItem:
    item = _item(plan, "duplicate", f"already extracted from {fact.provenance.source} as "
                                    f"{fact.ref} (now {fact.status}); nothing written")
    item.ref = fact.ref
    item.slot = f"{fact.subject}/{fact.attribute}"
    item.actor = fact.actor
    return item


def _plan_conflict(mem: ExtractionTargets, plan: _Planned, judge: ConflictJudge,
                   existing: Sequence[Fact], now: datetime, base: str | None) -> None:
    cand = plan.candidate
    assert cand is not None
    if mem.policy.judge(cand, now).action == "reject":
        return  # the write reports the rejection; no judge call for it
    plan.replaces = _narrower_answers(cand, existing)
    res = resolve(mem.facts, cand, judge, facts=existing)
    cand = res.candidate
    plan.judge_note = res.note
    current = next((f for f in existing if f.scope == cand.scope and f.status == "active"
                    and (f.subject, f.attribute) == (cand.subject, cand.attribute)), None)
    newer = _newer_than(current, cand, plan.proposal.turn, base, now) \
        if res.action != "duplicate" and current is not None and \
        current.claim != cand.claim else None
    if newer is not None and current is not None:
        cand = cand.model_copy(update={"review": (
            f"older than {current.ref}, the current answer of "
            f"{current.subject}/{current.attribute} ({newer}): an older statement does not "
            "replace a newer one; a person decides")})
        plan.judge_note = (plan.judge_note + "; " if plan.judge_note else "") + \
            f"sent to review: older than {current.ref} ({newer})"
    elif res.action != "duplicate" and current is not None and current.claim != cand.claim:
        # This write will supersede `current`: say why, with the evidence, on both records.
        why = f"{cand.actor} stated in {cand.source}: \"{_short(cand.evidence or '', 200)}\""
        if res.judgement is not None:
            why += f" ({res.judgement.judge} judge: {res.judgement.reason})"
        cand = cand.model_copy(update={"reason": why})
    plan.candidate = cand


def _newer_than(current: Fact, cand: Candidate, turn: int, base: str | None,
                now: datetime) -> str | None:
    """Why ``current`` is newer than the statement ``cand`` makes (stated at turn ``turn``
    of the session ``base``, None when the caller named no session), or None when it is
    not."""
    prefix = f"{base}#turn-"
    source = current.provenance.source
    if base is not None and source.startswith(prefix) and source[len(prefix):].isdigit() and \
            int(source[len(prefix):]) > turn:
        return f"it was stated later in this session, turn {source[len(prefix):]}"
    since = current.valid_from or current.created_at
    stated = cand.valid_from or now
    if since is not None and since > stated:
        return f"it holds since {since.isoformat()}, the statement is of {stated.isoformat()}"
    return None


def _narrower_answers(cand: Candidate, existing: Sequence[Fact]) -> tuple[Fact, ...]:
    """The current standard facts of the candidate's slot that the session sees in a scope
    narrower than the candidate's (a project's ``prefer Python``, when a changed answer is
    stated for the user everywhere): the new answer replaces them too, or the project's old
    one would stay current there, shown first. Identity facts are a person's to change."""
    return tuple(f for f in existing
                 if f.status == "active" and f.tier != "identity"
                 and (f.subject, f.attribute) == (cand.subject, cand.attribute)
                 and f.scope != cand.scope and cand.scope.applies_to(f.scope)
                 and f.claim != cand.claim)


def _write(mem: ExtractionTargets, plan: _Planned) -> ExtractionItem:
    cand = plan.candidate
    assert cand is not None
    res = mem.facts.propose_candidate(cand)
    item = _item(plan, res.status, res.reason)
    item.detectors = list(res.detectors)
    item.judge = plan.judge_note
    item.actor = cand.actor
    item.slot = f"{cand.subject}/{cand.attribute}"
    if res.record is not None:
        item.ref = res.record.ref
        item.slot = f"{res.record.subject}/{res.record.attribute}"
        item.claim = redact_secrets(res.record.claim)[0]
    if res.superseded is not None:
        item.superseded = res.superseded.ref
    if res.status in ("committed", "superseding") and res.record is not None:
        gone = []
        for old in plan.replaces:  # the same answer, narrower: replaced where it held
            mem.facts.retire(old.id, reason=f"replaced by {res.record.ref}, the changed "
                                            f"answer stated in {cand.source}",
                             scope=old.scope)
            gone.append(old.ref)
        if gone:
            item.reason += f"; it replaces {', '.join(gone)} in the narrower scope"
            item.superseded = item.superseded or gone[0]
    return item


def _forget(mem: ExtractionTargets, scope: Scope, plan: _Planned) -> ExtractionItem:
    req = plan.proposal
    assert isinstance(req, ForgetRequest)
    if scope.user is None:
        return _item(plan, "rejected", "a forget request needs a user in the scope; nothing "
                                       "is forgotten tenant- or project-wide from a chat")
    user_scope = Scope(tenant=scope.tenant, user=scope.user)
    ids = _matching_fact_ids(mem, user_scope, req.match)
    if not ids:
        return _item(plan, "rejected", f"no fact of user {scope.user} mentions every content "
                                       "word of the request; nothing was forgotten")
    done = mem.forget_ids(user_scope, sorted(ids))
    item = _item(plan, "forgotten", f"deleted {done.counts.get('facts', 0)} fact record(s) of "
                                    f"user {scope.user}, history included")
    item.removed = {k: v for k, v in done.counts.items() if v}
    return item


def _matching_fact_ids(mem: ExtractionTargets, user_scope: Scope, match: str) -> set[str]:
    """Facts of the user that mention every content word of ``match``; forgetting them by
    id takes their supersession history too (the facts layer's rule)."""
    wanted = content_terms(match)
    return {f.id for f in mem.facts.owned(user_scope) if coverage(
        wanted, content_terms(f"{f.claim} {f.subject} {f.attribute}")) == 1.0}


def _item(plan: _Planned, status: ItemStatus, reason: str) -> ExtractionItem:
    p = plan.proposal
    if isinstance(p, ForgetRequest):
        return ExtractionItem(status=status, reason=reason, turn=p.turn, via=p.via,
                              actor="user", claim=redact_secrets(p.match)[0])
    scope = plan.candidate.scope if plan.candidate is not None else None
    return ExtractionItem(status=status, reason=reason, turn=p.turn, via=p.via,
                          claim=redact_secrets(p.claim)[0], kind=p.kind,
                          slot=f"{p.subject}/{p.attribute}",
                          scope=str(scope) if scope is not None else None,
                          scope_reason=p.scope_reason)


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(redact_secrets(text)[0].split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


# ----------------------------------------------------------- pending identity changes


def _note_pending_identity(mem: ExtractionTargets, scope: Scope, task: str,
                           report: ExtractionReport) -> Checkpoint | None:
    new = []
    for it in report.pending:
        if it.ref is None:
            continue
        fact = mem.facts.get(it.ref, scope)
        if fact.tier == "identity" and fact.status == "pending_review":
            new.append(pending_line(fact))
    return sync_pending_identity(mem.facts, mem.checkpoints, scope, task, add=new)


def pending_line(fact: Fact) -> str:
    """The checkpoint line for a pending identity fact (starts with its reference)."""
    return (f"{fact.ref} {fact.subject}/{fact.attribute}: {fact.claim} (proposed by "
            f"{fact.actor} via {fact.source}; approve or reject with memstrata review)")


def sync_pending_identity(facts: Facts, checkpoints: Checkpoints, scope: Scope, task: str, *,
                          add: Sequence[str] = ()) -> Checkpoint | None:
    """Keep a task checkpoint's ``pending_identity_changes`` in step with the review queue.

    Lines starting ``fact:ID`` whose fact is no longer pending review (approved,
    rejected, forgotten) are dropped; ``add`` lines are appended unless their
    fact is already listed; other lines are kept. A new checkpoint version is
    saved only when the list changes. Call it after approving or rejecting.
    """
    cp = checkpoints.current(scope, task)
    before = list(cp.pending_identity_changes) if cp is not None else []
    kept = []
    for line in before:
        ref = line.split(" ", 1)[0]
        if ref.startswith("fact:"):
            try:
                if facts.get(ref, scope).status != "pending_review":
                    continue
            except NotFound:
                continue
        kept.append(line)
    listed = {line.split(" ", 1)[0] for line in kept}
    kept += [line for line in add if line.split(" ", 1)[0] not in listed]
    if kept == before:
        return cp
    return checkpoints.save(scope, task, by="extraction", pending_identity_changes=kept)


__all__ = [
    "SUPPORT_MIN",
    "SUPPORT_MIN_QUOTED",
    "ExtractionItem",
    "ExtractionReport",
    "ExtractionTargets",
    "extract",
    "pending_line",
    "sync_pending_identity",
]
