"""The ledger on every backend: who holds a pending operation, what a key begun again with
other words answers, and the way out of ``unknown`` (:mod:`memstrata.layers.ledger`).

Before: a second live run beginning a key was told ``unknown`` ("an earlier run began this
and never finished ... otherwise retry", a double-charge invitation) and the key flipped
for the run that held it too; another intent under an existing key was answered with the
old operation and no word of its intent; and the advice for ``unknown`` said "retry",
which only returned ``unknown`` again.
"""

from __future__ import annotations

from memstrata import ManualClock, Memory, Scope, ToolDispatcher
from memstrata.layers import ledger as ledger_layer

PAY = {"key": "pay:42", "intent": "charge card 42"}


def test_a_live_run_holding_a_key_is_reported_in_progress(mem: Memory, alice: Scope) -> None:
    with ToolDispatcher(mem, alice) as a, ToolDispatcher(mem, alice) as b:
        first = a.dispatch("begin_operation", PAY)
        assert first["status"] == "pending" and not first["resumed"]
        other = b.dispatch("begin_operation", PAY)
        assert other["status"] == "in_progress" and other["resumed"]
        assert "do not repeat" in other["advice"] and "retry" not in other["advice"]
        # the run that began it gets its own operation back, still pending
        again = a.dispatch("begin_operation", PAY)
        assert again["status"] == "pending" and "this run holds it" in again["advice"]
        assert again["attempts"] == 1
        stored = mem.ledger.get(alice, "pay:42")
        assert stored is not None and stored.status == "pending"  # nothing was stored
        # the holder finishes; the other run is told it is done
        a.dispatch("complete_operation", {"key": "pay:42", "external_ref": "ch_1"})
        done = b.dispatch("begin_operation", PAY)
        assert done["status"] == "succeeded" and done["external_ref"] == "ch_1"


def test_a_pending_key_of_an_ended_run_reads_unknown_at_once(mem: Memory,
                                                              alice: Scope) -> None:
    with mem.run(alice) as first:
        first.ledger.begin("send:invoice:7", intent="email invoice 7")
        # the run ends without completing it
    with mem.run(alice) as later:
        op = later.ledger.begin("send:invoice:7", intent="email invoice 7")
        assert op.status == "unknown" and op.resumed and op.attempts == 2


def test_a_run_that_went_quiet_for_a_lease_reads_unknown(mem: Memory, alice: Scope,
                                                          clock: ManualClock) -> None:
    crashed = mem.run(alice, run_id="crashed")
    crashed.__enter__()  # the process dies: the run never records its end
    crashed.ledger.begin("deploy:v3", intent="deploy v3")
    with mem.run(alice) as fresh:
        clock.advance(seconds=ledger_layer.PENDING_LEASE.total_seconds() - 60)
        assert fresh.ledger.begin("deploy:v3", intent="deploy v3").status == "in_progress"
        clock.advance(seconds=120)
        op = fresh.ledger.begin("deploy:v3", intent="deploy v3")
        assert op.status == "unknown" and op.attempts == 2


def test_the_holder_renews_its_lease_by_beginning_again(mem: Memory, alice: Scope,
                                                        clock: ManualClock) -> None:
    with mem.run(alice) as slow, mem.run(alice) as other:
        slow.ledger.begin("export:big", intent="export the archive")
        clock.advance(seconds=ledger_layer.PENDING_LEASE.total_seconds() - 60)
        assert slow.ledger.begin("export:big", intent="export the archive").status == \
            "pending"  # still at work: the lease runs from now
        clock.advance(seconds=120)
        assert other.ledger.begin("export:big", intent="export the archive").status == \
            "in_progress"


def test_other_words_for_an_existing_key_resume_it_and_say_so(mem: Memory, alice: Scope
                                                              ) -> None:
    """A restart never invents a new intent: a key begun again with other words for its
    intent answers with the stored operation, its intent kept, and the words given beside
    it (``requested_intent``) with advice to use a new key for another side effect. Before,
    the reply carried no intent at all, so a v18 publish under v17's key read "already
    done" and was silently skipped."""
    with ToolDispatcher(mem, alice) as d:
        d.dispatch("begin_operation", {"key": "publish:notes",
                                       "intent": "publish v17 release notes"})
        d.dispatch("complete_operation", {"key": "publish:notes", "external_ref": "cms/123"})
    with ToolDispatcher(mem, alice) as d2:
        out = d2.dispatch("begin_operation", {
            "key": "publish:notes", "intent": "publish v18 release notes to all customers"})
        assert out["status"] == "succeeded" and out["intent"] == "publish v17 release notes"
        assert out["requested_intent"] == "publish v18 release notes to all customers"
        assert "new key" in out["advice"]
        # the same intent (whitespace aside) resumes it with nothing to flag
        same = d2.dispatch("begin_operation", {"key": "publish:notes",
                                               "intent": "  publish v17   release notes "})
        assert same["status"] == "succeeded" and "requested_intent" not in same
    op = mem.ledger.begin(alice, "publish:notes", intent="delete all notes")
    assert op.requested_intent == "delete all notes" and op.intent == "publish v17 release notes"
    stored = mem.ledger.get(alice, "publish:notes")
    assert stored is not None and stored.intent == "publish v17 release notes"
    assert (stored.status, stored.external_ref, stored.attempts) == ("succeeded", "cms/123", 1)


def test_a_pending_key_begun_with_another_intent_keeps_its_own(mem: Memory,
                                                               alice: Scope) -> None:
    with mem.run(alice) as run:
        run.ledger.begin("charge:9", intent="charge 10 EUR")
        again = run.ledger.begin("charge:9", intent="charge 100 EUR")
        assert (again.intent, again.requested_intent) == ("charge 10 EUR", "charge 100 EUR")
    op = mem.ledger.get(alice, "charge:9")
    assert op is not None and (op.status, op.intent, op.attempts) == (
        "pending", "charge 10 EUR", 1)


def test_the_advice_for_unknown_names_calls_that_work(mem: Memory, alice: Scope) -> None:
    with mem.run(alice) as dead:
        dead.ledger.begin("send:invoice:42", intent="email invoice")
    with ToolDispatcher(mem, alice) as fresh:
        out = fresh.dispatch("begin_operation", {"key": "send:invoice:42",
                                                 "intent": "email invoice"})
        assert out["status"] == "unknown"
        advice = out["advice"]
        assert "check the external system" in advice.lower()
        assert "complete_operation with error=" in advice and "begin_operation again" in advice
        # beginning again alone does not retry: it stays unknown
        assert fresh.dispatch("begin_operation", {"key": "send:invoice:42",
                                                  "intent": "email invoice"})["status"] == \
            "unknown"
        # the path the advice names: mark it failed, then begin retries it
        failed = fresh.dispatch("complete_operation", {"key": "send:invoice:42",
                                                       "error": "not in the outbox"})
        assert failed["status"] == "failed"
        retry = fresh.dispatch("begin_operation", {"key": "send:invoice:42",
                                                   "intent": "email invoice"})
        assert retry["status"] == "pending" and retry["attempts"] == 3
        assert "perform the side effect" in retry["advice"]


def test_the_library_settles_an_unknown_key_the_same_way(mem: Memory, alice: Scope) -> None:
    with mem.run(alice) as dead:
        dead.ledger.begin("post:standup", intent="post the standup")
    with mem.run(alice) as run:
        assert run.ledger.begin("post:standup", intent="post the standup").status == "unknown"
        run.ledger.fail("post:standup", error="not posted")
        retry = run.ledger.begin("post:standup", intent="post the standup")
        assert retry.status == "pending" and retry.run_id == run.run_id
        # it happened after all elsewhere: complete settles an unknown key too
    with mem.run(alice) as dead2:
        dead2.ledger.begin("post:weekly", intent="post the weekly")
    with mem.run(alice) as run2:
        assert run2.ledger.begin("post:weekly", intent="post the weekly").status == "unknown"
        done = run2.ledger.complete("post:weekly", external_ref="slack:1")
        assert done.status == "succeeded"
