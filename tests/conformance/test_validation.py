"""Bad input raises a typed ValidationError and changes nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from backends import StoreProbe
from memstrata import Memory, Scope, ValidationError

GOOD: dict[str, Any] = dict(claim="Prefers tabs", kind="preference", subject="alice",
                            attribute="indent", actor="user", source="chat", confidence=0.9)


@pytest.mark.parametrize("change", [
    {"claim": ""},
    {"claim": "   "},
    {"claim": "x" * 1001},
    {"claim": "bad\x00byte"},
    {"claim": "lone \ud800 surrogate"},
    {"claim": b"bytes are not text"},
    {"claim": 42},
    {"kind": "opinion"},
    {"actor": "martian"},
    {"confidence": 1.5},
    {"confidence": -0.1},
    {"confidence": "high"},
    {"subject": ""},
    {"attribute": None},
    {"tier": "gold"},
    {"expires_at": "next tuesday"},
    {"readers": "alice"},
    {"readers": []},
])
def test_bad_fact_input(mem: Memory, store: StoreProbe, alice: Scope,
                        change: dict[str, Any]) -> None:
    mem.facts.propose(alice, **GOOD)
    before = store.counts()
    with pytest.raises(ValidationError):
        mem.facts.propose(alice, **{**GOOD, "attribute": "other", **change})
    assert store.counts() == before


@pytest.mark.parametrize("scope", [
    {"user": ""}, {"user": "al ice"}, {"tenant": None}, {"project": "x" * 200},
    {"user": "a\x00b"}, {"colour": "blue"}, "alice",
])
def test_invalid_scope(mem: Memory, store: StoreProbe, scope: Any) -> None:
    before = store.counts()
    with pytest.raises(ValidationError):
        mem.facts.propose(scope, **GOOD)
    with pytest.raises(ValidationError):
        mem.episodes.append(scope, text="x", source="s", actor="user")
    assert store.counts() == before


@pytest.mark.parametrize("change", [
    {"text": ""}, {"text": "a\x00"}, {"text": "x" * 8001}, {"source": ""},
    {"actor": "robot"}, {"confidence": 2}, {"observed_at": "yesterday"},
    {"supersedes": "01ZZZZZZZZZZZZZZZZZZZZZZZZ"}, {"text": ["a", "list"]},
    {"expires_at": "2020-01-01"},
])
def test_bad_episode_input(mem: Memory, store: StoreProbe, alice: Scope,
                           change: dict[str, Any]) -> None:
    before = store.counts()
    with pytest.raises(ValidationError):
        mem.episodes.append(alice, **{"text": "ok", "source": "s", "actor": "user", **change})
    assert store.counts() == before


def test_a_bad_item_in_a_batch_writes_nothing(mem: Memory, store: StoreProbe, alice: Scope) -> None:
    before = store.counts()
    with pytest.raises(ValidationError):
        mem.episodes.append_many([
            {"scope": alice, "text": "fine", "source": "s", "actor": "user"},
            {"scope": alice, "text": "", "source": "s", "actor": "user"},
        ])
    assert store.counts() == before
    # an expiry already past would hide the episode from every read at once: refused, as a
    # fact's is (it was stored, counted and never shown)
    with pytest.raises(ValidationError, match="expires_at is already in the past"):
        mem.episodes.append_many([
            {"scope": alice, "text": "fine", "source": "s", "actor": "user"},
            {"scope": alice, "text": "gone", "source": "s", "actor": "user",
             "expires_at": "2020-01-01T00:00:00Z"}])
    assert store.counts() == before
    kept = mem.episodes.append(alice, text="kept a week", source="s", actor="user",
                               expires_at=mem.clock.now() + timedelta(days=7))
    assert mem.episodes.get(kept.id, alice).text == "kept a week"


def test_bad_checkpoint_ledger_scratch_input(mem: Memory, store: StoreProbe, alice: Scope) -> None:
    before = store.counts()
    with pytest.raises(ValidationError):
        mem.checkpoints.save(alice, "t", objective="ok", completed="not a list")
    with pytest.raises(ValidationError):
        mem.checkpoints.save(alice, "t", colour="blue")
    with pytest.raises(ValidationError):
        mem.checkpoints.save(alice, "", objective="x")
    with pytest.raises(ValidationError):
        mem.ledger.begin(alice, "", intent="x")
    with pytest.raises(ValidationError):
        mem.ledger.begin(alice, "k", intent="a\x00b")
    with mem.run(alice) as run:
        with pytest.raises(ValidationError):
            run.scratch.write("", "v")
        with pytest.raises(ValidationError):
            run.scratch.write("k", object())
    # the run itself is recorded (runs, and its tenant in the registry); nothing else
    assert {k: v for k, v in store.counts().items() if k not in ("runs", "tenants")} == {
        k: v for k, v in before.items() if k not in ("runs", "tenants")}


def test_bad_read_arguments(mem: Memory, alice: Scope) -> None:
    with pytest.raises(ValidationError):
        mem.episodes.search(alice, "", k=5)
    with pytest.raises(ValidationError):
        mem.episodes.search(alice, "x", k=0)
    with pytest.raises(ValidationError):
        mem.recall(alice, "x", decision="guess")
    with pytest.raises(ValidationError):
        mem.recall(alice, "x", k=-1)
    with pytest.raises(ValidationError):
        mem.facts.current(alice, limit=-3)
    with pytest.raises(ValidationError):
        mem.get("no-colon")
