"""Context assembly: order, budget, manifest."""

from __future__ import annotations

from memstrata import ManualClock, Memory, Scope


def test_context_order_budget_and_manifest(mem: Memory, alice: Scope,
                                           clock: ManualClock) -> None:
    ident = mem.facts.propose(alice, claim="Alice leads the docs team", kind="profile",
                              subject="alice", attribute="role", actor="user", source="hr",
                              tier="identity")
    assert ident.record is not None
    mem.review.approve(ident.record.id, reviewer="bob")
    mem.facts.propose(alice, claim="Prefers async standup updates", kind="preference",
                      subject="alice", attribute="standup", actor="user", source="chat")
    clock.advance(days=30)
    mem.facts.propose(alice, claim="Live standups are back this quarter", kind="preference",
                      subject="alice", attribute="standup", actor="user", source="chat")
    mem.checkpoints.save(alice, "release-v17", objective="Ship v17 release notes",
                         next_action="draft the summary")
    mem.episodes.append(alice, text="The v16 release notes were rejected for marketing tone",
                        event="review_rejected", actor="user", source="chat",
                        observed_at="2026-07-01")
    ctx = mem.context(alice, task="release-v17", query="release notes tone", budget_tokens=2000)
    text = ctx.text
    assert text.index("Alice leads the docs team") < text.index("Ship v17 release notes") \
        < text.index("Live standups are back")
    assert "Prefers async standup updates" not in text          # superseded stays out
    assert "marketing tone" in text                              # recalled for the query
    refs = {m.ref: m for m in ctx.manifest}
    assert refs[f"fact:{ident.record.id}"].included
    assert "identity" in refs[f"fact:{ident.record.id}"].reason
    assert any(m.layer == "checkpoint" and m.included for m in ctx.manifest)
    assert ctx.tokens <= ctx.budget_tokens

    small = mem.context(alice, task="release-v17", budget_tokens=60)
    assert "Alice leads the docs team" in small.text            # identity always enters
    left_out = [m for m in small.manifest if not m.included]
    assert left_out and all("budget" in m.reason for m in left_out)
