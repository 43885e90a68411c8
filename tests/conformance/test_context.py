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


def test_the_context_stays_within_its_budget_headings_and_all(mem: Memory) -> None:
    """The text's tokens stay within ``budget_tokens``: section headings count, a long
    query's heading repeats only its start, and a checkpoint larger than what is left
    enters cut, saying where the whole one is (before: 673 tokens for a budget of 100, and
    a 300,000-token checkpoint entered a 2,000-token context "in full")."""
    from memstrata.tokens import count_tokens

    s = Scope(user="alice", project="docs")
    for i in range(30):
        mem.facts.propose(s, claim=f"Service {i} listens on port {8000 + i}",
                          kind="system_fact", subject=f"svc{i}", attribute="port",
                          actor="user", source="chat:1")
    for budget in (20, 50, 120, 400):
        ctx = mem.context(s, budget_tokens=budget)
        assert ctx.tokens == count_tokens(ctx.text) <= budget, (budget, ctx.tokens)
        assert ctx.included() or budget < 60  # a fact line is about 50 tokens
    mem.episodes.append(s, text="Deploy preview failed: stale build cache on port 8080",
                        event="deploy_failed", actor="tool", source="ci:run/812")
    query = "why did the deploy preview fail " + " ".join(f"cache{i}" for i in range(300))
    ctx = mem.context(s, query=query[:3990], budget_tokens=100)
    assert ctx.tokens <= 100 and query[:3990] not in ctx.text
    plan = [f"step {i}: " + "migrate the table and check the rows " * 30 for i in range(200)]
    mem.checkpoints.save(s, "big", objective="Move the billing tables", plan=plan,
                         next_action="rehearse the cutover")
    ctx = mem.context(s, task="big", budget_tokens=2000)
    assert ctx.tokens <= 2000
    entry = next(m for m in ctx.manifest if m.layer == "checkpoint")
    assert entry.included and "cut to fit the budget" in entry.reason
    assert "## Current task: big" in ctx.text and "get_current_task" in ctx.text
    small = mem.context(s, task="big", budget_tokens=400_000)
    assert "rehearse the cutover" in small.text and next(
        m for m in small.manifest if m.layer == "checkpoint").reason.endswith("loaded in full")
