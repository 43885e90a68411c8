"""The LangGraph ``BaseStore`` on memstrata (memstrata.interfaces.langgraph_store), on every
backend: LangGraph's own ``InMemoryStore`` is the reference for the documented semantics,
a compiled ``StateGraph`` drives the store as an agent would, and memstrata's guarantees
(scope, policy, history, TTL, forget) hold underneath."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any, TypedDict

import pytest

from backends import StoreProbe
from memstrata import ManualClock, Memory, Scope
from memstrata.errors import PolicyRejected, ValidationError

pytest.importorskip("langgraph")

from langgraph.store.base import BaseStore, Item, PutOp
from langgraph.store.memory import InMemoryStore

from memstrata.interfaces.langgraph_store import MemstrataStore

TOKEN = "ghp_Zq8x4LmN2vB7cR1tY6uI0oP3aS5dF7gH9jK1"


def _view(item: Item | None) -> Any:
    return None if item is None else (tuple(item.namespace), item.key,
                                      json.dumps(item.value, sort_keys=True))


def _oracle_namespaces(oracle: InMemoryStore) -> list[tuple[str, ...]]:
    """The reference's namespaces that hold an item (its dict keeps emptied ones)."""
    out = []
    for ns in oracle.list_namespaces(limit=10_000):
        if any(tuple(i.namespace) == ns for i in oracle.search(ns, limit=10_000)):
            out.append(ns)
    return out


def test_random_operations_agree_with_langgraphs_in_memory_store(mem: Memory) -> None:
    store, oracle = MemstrataStore(mem), InMemoryStore()
    assert isinstance(store, BaseStore)
    rng = random.Random(7)
    namespaces = [("alice", "memories"), ("alice", "memories", "work"), ("alice", "prefs"),
                  ("bob", "memories"), ("Bob", "memories"), ("alice", "Memories")]
    keys = ["k1", "K1", "k 2", "pref", "a" * 150, "x.y"]
    words = ["tea", "coffee", "Lyon", "Paris", "Python", "Go", "standups", "async"]
    for step in range(160):
        ns, key = rng.choice(namespaces), rng.choice(keys)
        roll = rng.random()
        if roll < 0.45:
            value = {"content": f"likes {rng.choice(words)} and {rng.choice(words)}",
                     "n": rng.randint(0, 5), "tags": rng.sample(words, 2)}
            if rng.random() < 0.2:
                value = {"content": value["content"].upper(), "n": value["n"]}
            store.put(ns, key, value)
            oracle.put(ns, key, value)
        elif roll < 0.55:
            store.delete(ns, key)
            oracle.delete(ns, key)
        elif roll < 0.8:
            assert _view(store.get(ns, key)) == _view(oracle.get(ns, key)), step
        else:
            prefix = ns[:rng.choice([1, 2, len(ns)])]
            flt = rng.choice([None, {"n": rng.randint(0, 5)}, {"n": {"$gte": 3}},
                              {"n": {"$ne": 2}, "content": {"$ne": "x"}}])
            mine = {_view(i) for i in store.search(prefix, filter=flt, limit=1000)}
            ref = {_view(i) for i in oracle.search(prefix, filter=flt, limit=1000)}
            assert mine == ref, (step, prefix, flt)
    assert store.list_namespaces(limit=1000) == _oracle_namespaces(oracle)
    assert store.list_namespaces(prefix=("alice",), max_depth=2) == sorted(
        {ns[:2] for ns in _oracle_namespaces(oracle) if ns[0] == "alice"})
    assert store.list_namespaces(suffix=("memories",)) == [
        ns for ns in _oracle_namespaces(oracle) if ns[-1] == "memories"]
    assert store.list_namespaces(prefix=("*", "memories"), limit=1, offset=1) == [
        ns for ns in _oracle_namespaces(oracle) if ns[1] == "memories"][1:2]


def test_overwrite_supersedes_and_keeps_history(mem: Memory, clock: ManualClock) -> None:
    store = MemstrataStore(mem)
    ns = ("alice", "memories")
    store.put(ns, "drink", {"content": "Alice drinks coffee"})
    first = store.get(ns, "drink")
    clock.advance(days=2)
    store.put(ns, "drink", {"content": "Alice drinks green tea now"})
    store.put(ns, "drink", {"content": "Alice drinks green tea now"})  # equal: no new version
    now = store.get(ns, "drink")
    assert first is not None and now is not None
    assert now.value == {"content": "Alice drinks green tea now"}
    assert now.created_at == first.created_at and now.updated_at > first.updated_at
    [fact] = [f for f in mem.facts.current(Scope(user="alice")) if f.attribute == "drink"]
    history = mem.facts.history(fact.id, Scope(user="alice"))
    assert [h.claim for h in history] == ["content: Alice drinks coffee",
                                          "content: Alice drinks green tea now"]
    assert [h.status for h in history] == ["superseded", "active"]
    store.delete(ns, "drink")
    assert store.get(ns, "drink") is None
    assert [f.status for f in mem.facts.history(fact.id, Scope(user="alice"))] == [
        "superseded", "retired"]


def test_case_and_spacing_of_keys_and_labels_keep_items_apart(mem: Memory) -> None:
    store = MemstrataStore(mem)
    store.put(("alice", "notes"), "Key", {"v": 1})
    store.put(("alice", "notes"), "key", {"v": 2})
    store.put(("alice", "Notes"), "key", {"v": 3})
    store.put(("alice", "notes"), "k  ey", {"v": 4})
    got = [store.get(ns, k) for ns, k in [(("alice", "notes"), "Key"), (("alice", "notes"),
                                           "key"), (("alice", "Notes"), "key"),
                                          (("alice", "notes"), "k  ey")]]
    assert [g.value["v"] if g else None for g in got] == [1, 2, 3, 4]
    # a scope name is stored stripped: a user named with spaces around it would be alice
    # (before, ("alice ", ...) wrote into alice's memory); it is refused, and nothing read
    for spaced in ("alice ", " alice", "alice\t"):
        with pytest.raises(ValidationError) as err:
            store.put((spaced, "notes"), "key", {"v": 5})
        assert err.value.hint and "'alice'" in err.value.hint
        with pytest.raises(ValidationError):
            store.search((spaced,))
    assert store.get(("alice", "notes"), "key").value["v"] == 2  # type: ignore[union-attr]


def test_semantic_search_ranks_with_the_gate_on_one_scale(vmem: Memory) -> None:
    store = MemstrataStore(vmem, index=["content"])
    ns = ("alice", "memories")
    store.put(ns, "a", {"content": "Alice is allergic to peanuts", "kind": "health"})
    store.put(ns, "b", {"content": "Alice's build runs on GitHub Actions", "kind": "work"})
    store.put(ns, "c", {"content": "Alice prefers window seats on flights", "kind": "travel"})
    store.put(ns, "d", {"content": "Raw config blob"}, index=False)
    store.put(("bob", "memories"), "a", {"content": "Bob is allergic to peanuts"})
    found = store.search(("alice",), query="which foods must alice avoid?", limit=10)
    assert found[0].key == "a" and found[0].namespace == ns
    scores = [i.score for i in found if i.score is not None]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    assert [i.key for i in found if i.score is None] == ["d"]  # unindexed: listed, unscored
    assert all(i.namespace[0] == "alice" for i in found)
    work = store.search(("alice",), query="the build pipeline", filter={"kind": "work"})
    assert [i.key for i in work] == ["b"]
    # an item with no evidence, in words or meaning, is left out (its place in the vector
    # list is none): only the unindexed item is listed
    assert [i.key for i in store.search(("alice",), query="zebra quantum chromodynamics",
                                        limit=10)] == ["d"]
    assert [i.key for i in store.search(("alice",), query="seats", limit=1, offset=1)] != [
        i.key for i in store.search(("alice",), query="seats", limit=1)]


def test_a_search_never_spans_users_and_a_tenant_store_sees_its_tenant(mem: Memory) -> None:
    lang = MemstrataStore(mem, scope_keys=(None, "user"))  # LangMem's ("memories", user)
    lang.put(("memories", "alice"), "m1", {"content": "Alice likes tea"})
    lang.put(("memories", "bob"), "m1", {"content": "Bob likes coffee"})
    with pytest.raises(ValidationError, match="does not name the scope"):
        lang.search(("memories",))
    assert [i.value for i in lang.search(("memories", "bob"))] == [{"content":
                                                                     "Bob likes coffee"}]
    assert mem.facts.current(Scope(user="alice"))[0].claim == "content: Alice likes tea"
    acme = MemstrataStore(mem, scope=Scope(tenant="acme"), scope_keys=(None, "user"))
    assert acme.get(("memories", "alice"), "m1") is None
    assert acme.list_namespaces() == []
    one_user = MemstrataStore(mem, scope=Scope(user="alice"), scope_keys=())
    # a store fixed to alice sees alice's namespaces only (never bob's)
    assert one_user.list_namespaces() == [("memories", "alice")]
    one_user.put(("notes",), "n", {"content": "own note"})
    assert one_user.list_namespaces() == [("memories", "alice"), ("notes",)]
    assert lang.list_namespaces() == [("memories", "alice"), ("memories", "bob")]
    # two layouts never share a slot: ("memories",) of alice's store is not ("alice",
    # "memories") of the per-user store
    per_user = MemstrataStore(mem)
    per_user.put(("alice", "memories"), "k", {"v": "per-user layout"})
    one_user.put(("memories",), "k", {"v": "fixed-scope layout"})
    assert per_user.get(("alice", "memories"), "k").value == {"v": "per-user layout"}
    assert one_user.get(("memories",), "k").value == {"v": "fixed-scope layout"}
    assert ("memories",) in one_user.list_namespaces()


def test_the_write_policy_applies_to_every_put(mem: Memory, store: StoreProbe) -> None:
    lg = MemstrataStore(mem)
    before = store.counts()
    with pytest.raises(PolicyRejected, match="secret"):
        lg.put(("alice", "memories"), "token", {"content": f"my token is {TOKEN}"})
    assert store.counts() == before and not store.contains(TOKEN)
    agent = MemstrataStore(mem, actor="agent")
    agent.put(("alice", "memories"), "guess", {"content": "Alice probably prefers Rust"})
    assert agent.get(("alice", "memories"), "guess") is None  # waits for a person
    [pending] = mem.review.pending(Scope(user="alice"))
    mem.review.approve(pending.id, reviewer="alice")
    item = agent.get(("alice", "memories"), "guess")
    assert item is not None and item.value == {"content": "Alice probably prefers Rust"}


def test_bad_input_is_typed_and_changes_nothing(mem: Memory, store: StoreProbe) -> None:
    lg = MemstrataStore(mem)
    before = store.counts()
    cases = [lambda: lg.put(("alice", "a.b"), "k", {"v": 1}),
             lambda: lg.put(("alice", ""), "k", {"v": 1}),
             lambda: lg.put(("alice", "m"), "k", {"v": object()}),
             lambda: lg.put(("alice", "m"), "k", {"v": "x" * 9000}),
             lambda: lg.put(("alice", "m"), "k", {"v": 1}, ttl=-5),
             lambda: lg.search(("alice",), filter={"n": {"$regex": "x"}}),
             lambda: lg.put((), "k", {"v": 1})]
    for case in cases:
        with pytest.raises(ValidationError):
            case()
    assert store.counts() == before
    with pytest.raises(ValidationError):
        MemstrataStore(mem, scope_keys=("user", "user"))


def test_ttl_expires_items_and_reads_refresh_it(mem: Memory, clock: ManualClock) -> None:
    lg = MemstrataStore(mem)
    ns = ("alice", "session")
    lg.put(ns, "short", {"v": 1}, ttl=10)
    lg.put(ns, "kept", {"v": 2}, ttl=10)
    lg.put(ns, "forever", {"v": 3})
    clock.advance(minutes=8)
    assert lg.get(ns, "kept") is not None                    # refreshes: 10 more minutes
    assert lg.get(ns, "short", refresh_ttl=False) is not None
    clock.advance(minutes=8)
    assert lg.get(ns, "short") is None                       # expired, before any sweep
    assert lg.get(ns, "kept") is not None
    assert {i.key for i in lg.search(ns)} == {"kept", "forever"}
    clock.advance(minutes=11)
    assert {i.key for i in lg.search(ns)} == {"forever"}
    assert lg.list_namespaces() == [ns]


def test_delete_with_forget_erases_every_version(mem: Memory, store: StoreProbe) -> None:
    lg = MemstrataStore(mem, on_delete="forget")
    ns = ("alice", "memories")
    lg.put(ns, "city", {"content": "Alice lives in Quimperlé"})
    lg.put(ns, "city", {"content": "Alice moved to Douarnenez"})
    assert store.contains("Quimperl") and store.contains("Douarnenez")
    lg.delete(ns, "city")
    assert lg.get(ns, "city") is None
    assert not store.contains("Quimperl") and not store.contains("Douarnenez")


def test_async_batch_and_methods(mem: Memory) -> None:
    from langgraph.store.base import GetOp, SearchOp

    lg = MemstrataStore(mem)

    async def run() -> list[Any]:
        await lg.aput(("alice", "m"), "k", {"content": "async works"})
        got = await lg.aget(("alice", "m"), "k")
        found = await lg.asearch(("alice",))
        batch = await lg.abatch([PutOp(("alice", "m"), "j", {"v": 1}),
                                 GetOp(("alice", "m"), "j"), SearchOp(("alice", "m"))])
        await lg.adelete(("alice", "m"), "k")
        return [got, found, batch, await lg.aget(("alice", "m"), "k")]

    got, found, batch, gone = asyncio.run(run())
    assert got.value == {"content": "async works"} and [i.key for i in found] == ["k"]
    assert batch[0] is None and batch[1].value == {"v": 1}
    assert {i.key for i in batch[2]} == {"k", "j"} and gone is None


class _State(TypedDict):
    user_id: str
    message: str
    recalled: list[str]


def test_a_compiled_graph_remembers_across_threads(mem: Memory) -> None:
    """A LangGraph graph whose nodes use the store through LangGraph's own runtime."""
    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph

    def remember(state: _State) -> dict[str, Any]:
        store = get_store()
        if state["message"].startswith("remember "):
            note = state["message"].removeprefix("remember ")
            store.put((state["user_id"], "memories"), f"m{len(note)}", {"content": note})
        return {}

    def recall(state: _State) -> dict[str, Any]:
        found = get_store().search((state["user_id"], "memories"), query=state["message"])
        return {"recalled": [i.value["content"] for i in found]}

    graph = StateGraph(_State)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    app = graph.compile(store=MemstrataStore(mem))
    app.invoke({"user_id": "alice", "message": "remember I review docs on Fridays",
                "recalled": []})
    app.invoke({"user_id": "bob", "message": "remember I review docs on Mondays",
                "recalled": []})
    out = app.invoke({"user_id": "alice", "message": "when do I review docs?", "recalled": []})
    assert out["recalled"] == ["I review docs on Fridays"]
    assert [f.provenance.source for f in mem.facts.current(Scope(user="alice"))] == [
        "langgraph:alice/memories/m24"]


def test_a_secret_in_any_field_is_refused_and_ttl_none_never_expires(
        mem: Memory, store: StoreProbe, clock: ManualClock) -> None:
    lg = MemstrataStore(mem, index=["title"], ttl={"default_ttl": 10})
    with pytest.raises(PolicyRejected, match="secret"):
        lg.put(("alice", "m"), "a", {"title": "setup",
                                     "body": 'export PGPASSWORD="Tr0ub4dor&3x"'})
    assert not store.contains("Tr0ub4dor")
    lg.put(("alice", "m"), "kept", {"title": "no expiry"}, ttl=None)
    lg.put(("alice", "m"), "default", {"title": "default expiry"})
    clock.advance(minutes=30)
    assert lg.get(("alice", "m"), "kept") is not None
    assert lg.get(("alice", "m"), "default") is None


def test_a_filtered_page_reaches_past_the_newest_items(mem: Memory, clock: ManualClock) -> None:
    """A search without a query reads only a little more than its page, and further when
    the filter leaves too few: the old matching items are still found, newest first."""
    store = MemstrataStore(mem)
    for i in range(60):
        clock.advance(seconds=1)
        store.put(("notes",), f"k{i}", {"n": i, "kind": "old" if i < 3 else "new"})
    found = store.search(("notes",), filter={"kind": "old"}, limit=2)
    assert [i.value["n"] for i in found] == [2, 1]
    assert [i.value["n"] for i in store.search(("notes",), filter={"kind": "old"},
                                               offset=2)] == [0]
    assert [i.value["n"] for i in store.search(("notes",), limit=3, offset=1)] == [58, 57, 56]


def test_paging_arguments_are_checked_and_name_themselves(mem: Memory, store: StoreProbe) -> None:
    lg = MemstrataStore(mem)
    for ns in [("alice", "a"), ("alice", "b"), ("alice", "c")]:
        lg.put(ns, "k", {"v": "likes tea"})
    before = store.counts()
    cases: list[tuple[str, dict[str, Any]]] = [
        ("search limit", {"limit": "2"}), ("search limit", {"limit": None}),
        ("search limit", {"limit": -1}), ("search limit", {"limit": 2.0}),
        ("search limit", {"limit": True}), ("search offset", {"offset": 1.5}),
        ("search offset", {"offset": -1}), ("search offset", {"offset": "1"}),
        ("search limit", {"limit": "2", "query": "tea"}),
    ]
    for named, kwargs in cases:
        with pytest.raises(ValidationError, match=named) as err:
            lg.search(("alice",), **kwargs)
        assert err.value.hint, kwargs
    listing: list[tuple[str, dict[str, Any]]] = [
        ("list_namespaces limit", {"limit": -1}), ("list_namespaces limit", {"limit": "2"}),
        ("list_namespaces limit", {"limit": None}), ("list_namespaces offset", {"offset": -1}),
        ("list_namespaces offset", {"offset": 0.5}),
        ("list_namespaces max_depth", {"max_depth": 0}),
        ("list_namespaces max_depth", {"max_depth": -1}),
        ("list_namespaces max_depth", {"max_depth": "2"}),
    ]
    for named, kwargs in listing:
        with pytest.raises(ValidationError, match=named) as err:
            lg.list_namespaces(**kwargs)
        assert err.value.hint, kwargs
    with pytest.raises(ValidationError, match="list_namespaces limit"):
        asyncio.run(lg.alist_namespaces(limit=-1))
    assert store.counts() == before


def test_paging_agrees_with_langgraphs_in_memory_store(mem: Memory) -> None:
    lg, oracle = MemstrataStore(mem), InMemoryStore()
    for ns in [("alice", "a"), ("alice", "b", "x"), ("alice", "b", "y"), ("bob", "c")]:
        lg.put(ns, "k", {"v": "likes tea"})
        oracle.put(ns, "k", {"v": "likes tea"})
    for kwargs in ({}, {"limit": 0}, {"limit": 1}, {"offset": 2}, {"offset": 9},
                   {"limit": 2, "offset": 1}, {"max_depth": 1}, {"max_depth": 2},
                   {"max_depth": 9}, {"max_depth": 2, "limit": 1, "offset": 1},
                   {"prefix": ("alice",), "max_depth": 2}):
        assert lg.list_namespaces(**kwargs) == oracle.list_namespaces(**kwargs), kwargs
    for kwargs in ({"limit": 0}, {"offset": 3}, {"limit": 1, "offset": 1}):
        assert len(lg.search(("alice",), **kwargs)) == len(oracle.search(("alice",), **kwargs))
    # a page larger than what a query ranks is every ranked item, not an error about "k"
    assert len(lg.search(("alice",), query="tea", limit=50_000)) == 3


def test_a_models_store_waits_for_a_person_to_delete_too(mem: Memory, store: StoreProbe) -> None:
    """A store that writes as ``agent``: its put waits for review, and so its delete cannot
    take a current item (refused, nothing changed; before, it retired the application's
    item at once), and withdraws its own put still waiting (before, a reviewer approved the
    queue and the deleted item came back). A non-finite or huge ttl is a typed error."""
    from memstrata import AccessDenied

    app, agent = MemstrataStore(mem), MemstrataStore(mem, actor="agent")
    ns = ("alice", "memories")
    app.put(ns, "allergy", {"content": "Alice is allergic to penicillin"})
    with pytest.raises(AccessDenied) as err:
        agent.delete(ns, "allergy")
    assert err.value.hint
    assert (app.get(ns, "allergy") or pytest.fail("gone")).value["content"].startswith("Alice")
    agent.put(ns, "plan", {"content": "Move the launch to Friday"})
    waiting = mem.review.pending(Scope(user="alice"))
    assert len(waiting) == 1 and agent.get(ns, "plan") is None
    agent.delete(ns, "plan")
    assert mem.review.pending(Scope(user="alice")) == []
    assert mem.facts.get(waiting[0].id, Scope(user="alice")).status == "rejected"
    before = store.counts()
    for ttl in (float("nan"), float("inf"), 1e12, -1.0):
        with pytest.raises(ValidationError):
            app.put(ns, "x", {"v": 1}, ttl=ttl)
    assert store.counts() == before


def test_the_last_put_or_delete_wins_over_puts_waiting_for_review(mem: Memory) -> None:
    """A put that waits for review (it holds personal data) is withdrawn by a later put or a
    delete of the item, so its approval never brings back an older value or a deleted item
    (before: approving it overwrote the newer put, and brought the item back after a
    delete, also with on_delete="forget")."""
    for on_delete in ("retire", "forget"):
        lg = MemstrataStore(mem, on_delete=on_delete)
        ns = ("alice", f"profile-{on_delete}")
        lg.put(ns, "callback", {"note": "call me at +1 415 555 0100"})  # waits (a phone)
        assert lg.get(ns, "callback") is None and mem.review.pending(Scope(user="alice"))
        lg.put(ns, "callback", {"note": "do not call me any more"})
        assert mem.review.pending(Scope(user="alice")) == []
        lg.put(ns, "reach", {"note": "write to alice@example.com"})  # waits (an email)
        lg.delete(ns, "reach")
        for fact in mem.review.pending(Scope(user="alice")):
            mem.review.approve(fact.id, by="rita")
        got = lg.get(ns, "callback")
        assert got is not None and got.value == {"note": "do not call me any more"}
        assert lg.get(ns, "reach") is None


def test_user_ids_langgraph_takes_name_users_of_their_own(mem: Memory) -> None:
    """Identity providers' ids (``auth0|...``, base64 with ``=``), a name with a space, a
    long id and the empty key work as in LangGraph's InMemoryStore, each user apart from
    the others and from a user whose name is valid as it is."""
    lg, reference = MemstrataStore(mem), InMemoryStore()
    users = ["auth0|5f7c8ec7c33c6c004bbafe82", "google-oauth2|104233", "John Smith",
             "dXNlcjQy==", "u" * 200, "John", "5f7c8ec7c33c6c004bbafe82"]
    for n, user in enumerate(users):
        for store in (lg, reference):
            store.put((user, "memories"), "", {"n": n})
            store.put((user, "memories"), "k", {"n": n, "who": user})
    for n, user in enumerate(users):
        for store in (lg, reference):
            item = store.get((user, "memories"), "k")
            assert item is not None and item.value == {"n": n, "who": user}
            assert item.namespace == (user, "memories")
            empty = store.get((user, "memories"), "")
            assert empty is not None and empty.value == {"n": n}
        assert [i.key for i in lg.search((user,))] == [
            i.key for i in reference.search((user,))] or \
            sorted(i.key for i in lg.search((user,))) == ["", "k"]
    assert mem.facts.list(Scope(user="John"))  # the plain name is the user itself
    # a value's "key" field beside an id is no secret (the item's JSON read as prose took
    # the id, a MongoDB ObjectId, for the key's value, and refused every put of the user)
    lg.put(("alice", "prefs"), "theme", {"key": "theme", "owner": "5f7c8ec7c33c6c004bbafe82"})
    assert lg.get(("alice", "prefs"), "theme") is not None


def test_an_equal_last_put_and_a_crowded_namespace_still_withdraw_waiting_puts(
        mem: Memory) -> None:
    """The application's put of the value already current withdraws a model's put waiting
    for it (it returned early, and approving the model's put overwrote the last one); and
    a delete withdraws its item's waiting put however many others wait in the namespace
    (only the newest 200 were looked at)."""
    app, model = MemstrataStore(mem), MemstrataStore(mem, actor="agent")
    ns = ("alice", "prefs")
    app.put(ns, "drink", {"content": "Alice drinks tea"})
    model.put(ns, "drink", {"content": "Alice drinks coffee"})  # waits for review
    app.put(ns, "drink", {"content": "Alice drinks tea"})
    assert mem.review.pending(Scope(user="alice")) == []
    crowd = ("alice", "notes")
    model.put(crowd, "k0", {"content": "note 0"})
    model.batch([PutOp(crowd, f"k{i}", {"content": f"note {i}"}) for i in range(1, 205)])
    app.delete(crowd, "k0")
    for fact in mem.review.pending(Scope(user="alice"), limit=1000):
        mem.review.approve(fact.id, by="rita")
    assert app.get(crowd, "k0") is None and app.get(crowd, "k204") is not None
    got = app.get(ns, "drink")
    assert got is not None and got.value == {"content": "Alice drinks tea"}
