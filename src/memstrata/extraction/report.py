"""What an extraction reports: one :class:`ExtractionItem` per proposal or forget request
(its status and why), gathered in an :class:`ExtractionReport` (committed, pending,
duplicate, superseding, rejected and forgotten items, the task checkpoint it kept, and the
writes that failed after validation). Data only; :mod:`memstrata.extraction.run` fills it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..models import Scope, _Model

ItemStatus = Literal["committed", "pending", "duplicate", "superseding", "rejected", "forgotten"]


class ExtractionItem(_Model):
    """What happened to one proposal or forget request, and why."""

    status: ItemStatus
    reason: str
    turn: int | None = None
    via: str | None = None
    actor: str | None = None
    claim: str | None = None
    kind: str | None = None
    slot: str | None = None
    ref: str | None = None
    superseded: str | None = None
    judge: str | None = None
    #: The scope the fact went to, and why (a first-person statement follows the user; one
    #: that names the project stays there).
    scope: str | None = None
    scope_reason: str | None = None
    detectors: list[str] = Field(default_factory=list)
    removed: dict[str, int] | None = None


class ExtractionReport(_Model):
    """The outcome of one extraction, grouped by status."""

    scope: Scope
    proposer: str
    source: str
    turns: int
    committed: list[ExtractionItem] = Field(default_factory=list)
    pending: list[ExtractionItem] = Field(default_factory=list)
    duplicate: list[ExtractionItem] = Field(default_factory=list)
    superseding: list[ExtractionItem] = Field(default_factory=list)
    rejected: list[ExtractionItem] = Field(default_factory=list)
    forgotten: list[ExtractionItem] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    checkpoint: str | None = None

    def add(self, item: ExtractionItem) -> None:
        getattr(self, item.status).append(item)

    @property
    def items(self) -> list[ExtractionItem]:
        """Every item, in turn order."""
        every = [*self.committed, *self.pending, *self.duplicate, *self.superseding,
                 *self.rejected, *self.forgotten]
        return sorted(every, key=lambda i: -1 if i.turn is None else i.turn)

    @property
    def written(self) -> int:
        """New fact records stored (committed, superseding and pending)."""
        return len(self.committed) + len(self.superseding) + len(self.pending)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        """One line per item, for people."""
        counts = ", ".join(f"{len(getattr(self, s))} {s}" for s in
                           ("committed", "superseding", "pending", "duplicate", "rejected",
                            "forgotten"))
        lines = [f"extraction by {self.proposer} over {self.turns} turns: {counts}"]
        for it in self.items:
            what = it.claim or ""
            lines.append(f"  {it.status:<11} turn {it.turn}: {what} -- {it.reason}")
            if it.scope is not None:
                lines.append(f"  {'':<11} scope {it.scope}" + (f" ({it.scope_reason})"
                                                              if it.scope_reason else ""))
            if it.judge:
                lines.append(f"  {'':<11} {it.judge}")
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


# ------------------------------------------------------------------------------ extract


__all__ = ["ExtractionItem", "ExtractionReport", "ItemStatus"]
