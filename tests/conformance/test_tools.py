"""Tool definitions and the dispatcher: one list, three renderings, a fixed scope."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from memstrata import ManualClock, Memory, Scope
from memstrata.interfaces.tool_schemas import anthropic_tools, openai_tools, tool_definitions
from memstrata.interfaces.tools import SCOPE_WORDS, TOOLS, ToolDispatcher

EXPECTED = {
    "get_current_task", "save_checkpoint", "get_durable_records", "search_history", "recall",
    "propose_memory", "log_episode", "scratch_write", "scratch_read", "scratch_list",
    "begin_operation", "complete_operation", "forget", "get", "feedback", "list_facts",
    "retire_fact", "close_task",
}


def test_every_rendering_comes_from_the_same_definitions() -> None:
    names = [t.name for t in TOOLS]
    assert set(names) == EXPECTED and len(names) == len(EXPECTED)
    oa = {t["function"]["name"]: t["function"] for t in openai_tools()}
    an = {t["name"]: t for t in anthropic_tools()}
    neutral = {t["name"]: t for t in tool_definitions()}
    assert set(oa) == set(an) == set(neutral) == EXPECTED
    for name in EXPECTED:
        assert oa[name]["parameters"] == an[name]["input_schema"] == neutral[name]["input_schema"]
        assert oa[name]["description"] == an[name]["description"]
        schema = an[name]["input_schema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert not set(schema["properties"]) & SCOPE_WORDS, name
        jsonschema.Draft202012Validator.check_schema(schema)
        assert not _titles(schema), name  # pydantic's titles are noise to a model


def _titles(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [str(v) for k, v in node.items() if k == "title" and isinstance(v, str)]
        for k, v in node.items():
            if k == "properties" and isinstance(v, dict):
                found += [t for prop in v.values() for t in _titles(prop)]
            elif k != "title":
                found += _titles(v)
        return found
    if isinstance(node, list):
        return [t for item in node for t in _titles(item)]
    return []


def test_schemas_accept_valid_calls_and_refuse_extra_arguments() -> None:
    schemas = {t["name"]: t["input_schema"] for t in anthropic_tools()}
    valid = {"propose_memory": {"claim": "Prefers tabs", "kind": "preference",
                                "subject": "alice", "attribute": "indent", "source": "chat:1"},
             "recall": {"query": "deploy steps", "decision": "side_effect"},
             "complete_operation": {"key": "k", "external_ref": "post-1"}}
    for name, args in valid.items():
        jsonschema.validate(args, schemas[name])
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**args, "user": "bob"}, schemas[name])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"claim": "x", "kind": "gossip", "subject": "a", "attribute": "b",
                             "source": "s"}, schemas["propose_memory"])
    assert set(schemas["propose_memory"]["required"]) == {"claim", "kind", "subject",
                                                         "attribute", "source"}
    assert "tier" not in schemas["propose_memory"]["properties"]


def test_a_whole_number_is_never_true_or_false(mem: Memory, alice: Scope) -> None:
    """JSON's lax reading takes true as 1; the tools refuse it, as the Python API does."""
    mem.episodes.append(alice, text="deploy failed", source="ci:1", actor="tool")
    with ToolDispatcher(mem, alice) as tools:
        for name, args in (("search_history", {"query": "deploy", "k": True}),
                           ("recall", {"query": "deploy", "k": False}),
                           ("recall", {"query": "deploy", "budget_tokens": True})):
            got = tools.dispatch(name, args)
            assert got["type"] == "ValidationError" and "whole number" in got["error"], got
        assert len(tools.dispatch("search_history", {"query": "deploy", "k": 1})["hits"]) == 1


def test_a_session_through_the_dispatcher(mem: Memory, alice: Scope) -> None:
    mem.facts.propose(alice, claim="Alice leads the docs team", kind="profile",
                      subject="alice", attribute="role", actor="user", source="chat:1",
                      tier="identity")
    pending = mem.review.pending(alice)
    mem.review.approve(pending[0].id, reviewer="alice")
    with ToolDispatcher(mem, alice, task="release-v17") as tools:
        records = tools.dispatch("get_durable_records", {})
        assert [f["claim"] for f in records["identity"]] == ["Alice leads the docs team"]
        assert records["facts"] == []
        assert tools.dispatch("get_current_task", {})["checkpoint"] is None

        saved = tools.dispatch("save_checkpoint", {"objective": "Ship v17 notes",
                                                   "next_action": "collect merged PRs"})
        assert saved["saved"] == "checkpoint:release-v17@1"
        assert "Ship v17 notes" not in json.dumps(saved)  # a receipt, not an echo
        task = tools.dispatch("get_current_task", {})
        assert task["checkpoint"]["next_action"] == "collect merged PRs"

        logged = tools.dispatch("log_episode", {"text": "Preview deploy failed: stale cache",
                                                "event": "deploy_failed",
                                                "source": "ci:run/812"})
        assert logged["logged"].startswith("episode:")
        hits = tools.dispatch("search_history", {"query": "deploy failed"})["hits"]
        assert hits and hits[0]["ref"] == logged["logged"] and hits[0]["actor"] == "agent"
        nothing = tools.dispatch("search_history", {"query": "kubernetes migration"})
        assert nothing["hits"] == [] and "valid answer" in nothing["note"]

        proposed = tools.dispatch("propose_memory", {
            "claim": "Preview deploys need a cache purge first", "kind": "lesson",
            "subject": "deploys", "attribute": "preview_cache", "source": "ci:run/812"})
        assert proposed["status"] == "pending"  # an agent's inference waits for review
        assert mem.facts.current(alice, kind="lesson") == []

        recalled = tools.dispatch("recall", {"need": "why did the preview deploy fail",
                                             "decision": "side_effect"})
        assert recalled["items"] and all(i["needs_verification"] for i in recalled["items"])

        assert tools.dispatch("scratch_write", {"key": "draft/intro", "value": "Hello"}) == {
            "receipt": "wrote draft/intro (5 chars)"}
        assert tools.dispatch("scratch_read", {"key": "draft/intro"})["value"] == "Hello"
        assert tools.dispatch("scratch_list", {"prefix": "draft/"})["keys"] == ["draft/intro"]

        began = tools.dispatch("begin_operation", {"key": "publish:v17", "intent": "POST"})
        assert began["status"] == "pending" and began["resumed"] is False
        done = tools.dispatch("complete_operation", {"key": "publish:v17",
                                                     "external_ref": "post-1"})
        assert done == {"key": "publish:v17", "status": "succeeded", "external_ref": "post-1"}
        run_id = tools.run_id
    # the run ended: its scratchpad is gone, the ledger entry stays
    with ToolDispatcher(mem, alice, task="release-v17") as later:
        assert later.run_id != run_id
        assert later.dispatch("scratch_read", {"key": "draft/intro"})["found"] is False
        again = later.dispatch("begin_operation", {"key": "publish:v17", "intent": "POST"})
        assert again["status"] == "succeeded" and "do not repeat" in again["advice"]


def test_an_operation_left_by_a_dead_run_reads_unknown(mem: Memory, alice: Scope) -> None:
    crashed = ToolDispatcher(mem, alice)
    crashed.dispatch("begin_operation", {"key": "send:invoice:42", "intent": "email invoice"})
    # no close(): the process died. Its run never recorded an end, so another run reads
    # the key as in progress until the lease runs out
    with ToolDispatcher(mem, alice) as early:
        assert early.dispatch("begin_operation", {"key": "send:invoice:42",
                                                  "intent": "email invoice"}
                              )["status"] == "in_progress"
    mem.clock.advance(minutes=16)  # type: ignore[attr-defined]
    with ToolDispatcher(mem, alice) as fresh:
        out = fresh.dispatch("begin_operation", {"key": "send:invoice:42",
                                                 "intent": "email invoice"})
        assert out["status"] == "unknown" and "check the external system" in out["advice"].lower()
        failed = fresh.dispatch("complete_operation", {"key": "send:invoice:42",
                                                       "error": "SMTP 550"})
        assert failed["status"] == "failed"


def test_scope_cannot_be_named_in_arguments(mem: Memory, alice: Scope) -> None:
    bob = Scope(user="bob", project="docs-site")
    secret = mem.facts.propose(bob, claim="Bob is interviewing elsewhere", kind="profile",
                               subject="bob", attribute="job_search", actor="user",
                               source="chat:bob")
    assert secret.record is not None
    mem.episodes.append(bob, text="Bob's performance review went badly", source="hr:note",
                        actor="user")
    with ToolDispatcher(mem, alice) as tools:
        for name, args in (("get_durable_records", {"user": "bob"}),
                           ("search_history", {"query": "review", "tenant": "default"}),
                           ("forget", {"match": "Bob", "scope": {"user": "bob"}}),
                           ("recall", {"need": "bob", "principal": "bob"})):
            out = tools.dispatch(name, args)
            assert out["type"] == "AccessDenied" and "scope is fixed" in out["error"], name
        assert tools.dispatch("search_history", {"query": "performance review"})["hits"] == []
        assert "interviewing" not in json.dumps(tools.dispatch("get_durable_records", {}))
        gone = tools.dispatch("forget", {"record_ids": [secret.record.ref]})
        assert gone["total"] == 0
    assert mem.facts.get(secret.record.id).status == "active"


def test_errors_are_structured_and_say_what_to_do(mem: Memory, alice: Scope) -> None:
    with ToolDispatcher(mem, alice) as tools:
        unknown = tools.dispatch("delete_everything", {})
        assert "unknown tool" in unknown["error"] and "forget" in unknown["hint"]
        bad = tools.dispatch("propose_memory", {"claim": "x", "kind": "gossip",
                                                "subject": "a", "attribute": "b",
                                                "source": "s"})
        assert bad["type"] == "ValidationError" and "kind" in bad["error"]
        assert "claim" in bad["hint"]
        tier = tools.dispatch("propose_memory", {"claim": "x", "kind": "profile",
                                                 "subject": "a", "attribute": "b",
                                                 "source": "s", "tier": "identity"})
        assert tier["type"] == "ValidationError" and "tier" in tier["error"]
        assert "error" in tools.dispatch("forget", {})
        no_task = tools.dispatch("save_checkpoint", {"objective": "x"})
        assert "no task" in no_task["error"] and "--task" in no_task["hint"]
        missing = tools.dispatch("complete_operation", {"key": "never-begun"})
        assert missing["type"] == "NotFound" and missing["hint"]
        assert "not valid JSON" in tools.dispatch("recall", "{need: x")["error"]
        from_json = tools.dispatch("scratch_write", '{"key": "k", "value": "v"}')
        assert from_json == {"receipt": "wrote k (1 chars)"}
        assert json.loads(tools.dispatch_json("scratch_read", {"key": "k"}))["value"] == "v"
        listed = tools.dispatch("get_current_task", {})
        assert listed["task"] is None and listed["tasks"] == []


def test_forget_is_scoped_and_never_forced(mem: Memory) -> None:
    tenant_wide = Scope()
    mem.facts.propose(tenant_wide, claim="The office closes at 6pm", kind="system_fact",
                      subject="office", attribute="hours", actor="user", source="handbook")
    with ToolDispatcher(mem, tenant_wide) as tools:
        out = tools.dispatch("forget", {"match": "office"})
        assert out["type"] == "AccessDenied"
    assert mem.facts.current(tenant_wide)


def test_a_trusted_harness_can_write_as_the_user(tmp_path: object, alice: Scope) -> None:
    mem = Memory.open(f"sqlite:///{tmp_path}/m.db", clock=ManualClock("2026-08-03T09:00:00Z"),
                      embedder=None)
    try:
        with ToolDispatcher(mem, alice, actor="user") as tools:
            out = tools.dispatch("propose_memory", {
                "claim": "Prefers British spelling", "kind": "preference", "subject": "alice",
                "attribute": "spelling", "source": "chat:2026-08-03"})
            assert out["status"] == "committed"
        with pytest.raises(Exception, match="actor must be one of"):
            ToolDispatcher(mem, alice, actor="reviewer")
    finally:
        mem.close()


def _tool_calls(*calls: tuple[str, dict[str, object]]) -> dict[str, object]:
    """A chat-completion body whose message calls tools (the OpenAI wire shape)."""
    return {"id": "chatcmpl-test", "object": "chat.completion", "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": f"call_{i}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)}}
                               for i, (name, args) in enumerate(calls)]}}]}


def test_the_agent_loop_example_wires_memory_in_and_out(mem: Memory, alice: Scope) -> None:
    import importlib.util
    from pathlib import Path

    from llm_server import LLMTestServer, Reply, openai_body

    path = Path(__file__).resolve().parents[2] / "examples" / "agent_loop.py"
    spec = importlib.util.spec_from_file_location("agent_loop", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    mem.facts.propose(alice, claim="Alice wants release notes in British English",
                      kind="preference", subject="alice", attribute="spelling", actor="user",
                      source="chat:1")
    with LLMTestServer() as server:
        server.queue_openai(
            Reply(body=_tool_calls(("get_durable_records", {}), ("get_current_task", {}))),
            Reply(body=_tool_calls(
                ("save_checkpoint", {"objective": "Draft v17 notes",
                                     "next_action": "send the draft to Alice"}),
                ("log_episode", {"text": "Drafted the v17 notes", "source": "session:demo"}),
                ("propose_memory", {"claim": "Bob approves releases", "kind": "relationship",
                                    "subject": "bob", "attribute": "approver",
                                    "source": "chat:1", "user": "bob"}))),
            Reply(body=openai_body("Draft ready; next I send it to Alice.")),
        )
        answer = example.run_agent(mem, alice, "Draft the v17 notes", task="release-v17",
                                   base_url=server.openai_base_url, model="test-model")
        first, second, third = (r.body for r in server.requests)
    assert answer == "Draft ready; next I send it to Alice."
    assert len(first["tools"]) == len(TOOLS)
    assert "British English" in first["messages"][0]["content"]  # memory in
    results = {m["tool_call_id"]: json.loads(m["content"])
               for m in third["messages"] if m["role"] == "tool"}
    assert results["call_0"]["saved"] == "checkpoint:release-v17@1"
    assert "scope is fixed" in results["call_2"]["error"]  # the model cannot reach bob
    assert [m["role"] for m in second["messages"]][-2:] == ["tool", "tool"]
    cp = mem.checkpoints.current(alice, "release-v17")  # memory out
    assert cp is not None and cp.next_action == "send the draft to Alice"
    assert mem.episodes.search(alice, "drafted notes")
    assert mem.review.pending(alice) == []


STRICT_ALLOWED = {"type", "properties", "required", "additionalProperties", "enum", "anyOf",
                  "items", "description", "const"}


def strict_violations(schema: Any, path: str = "$") -> list[str]:
    """OpenAI strict-mode rules: objects list every property as required and forbid extra
    ones; only the supported keywords appear."""
    out: list[str] = []
    if isinstance(schema, dict):
        out += [f"{path}: keyword {k!r}" for k in schema if k not in STRICT_ALLOWED]
        if schema.get("type") == "object":
            props = schema.get("properties", {})
            if schema.get("additionalProperties") is not False:
                out.append(f"{path}: additionalProperties must be false")
            if sorted(schema.get("required", [])) != sorted(props):
                out.append(f"{path}: every property must be required")
            for name, prop in props.items():
                out += strict_violations(prop, f"{path}.{name}")
        for key in ("items", "anyOf"):
            if key in schema:
                items = schema[key] if isinstance(schema[key], list) else [schema[key]]
                out += [v for i, s in enumerate(items)
                        for v in strict_violations(s, f"{path}.{key}[{i}]")]
    return out


def test_the_strict_openai_renderings_pass_strict_mode_rules() -> None:
    from memstrata.interfaces.tool_schemas import openai_responses_tools

    loose = openai_tools()
    assert sum(len(strict_violations(t["function"]["parameters"])) for t in loose) > 0
    strict = openai_tools(strict=True)
    responses = openai_responses_tools()
    assert len(strict) == len(responses) == len(TOOLS)
    for chat, resp, tool in zip(strict, responses, TOOLS, strict=True):
        assert chat["function"]["strict"] is True and resp["strict"] is True
        assert resp["name"] == tool.name and resp["type"] == "function"
        for params in (chat["function"]["parameters"], resp["parameters"]):
            assert strict_violations(params) == [], tool.name
            required = set(tool.args.model_json_schema().get("required", []))
            for name, prop in params["properties"].items():
                nullable = "null" in (prop.get("type") if isinstance(prop.get("type"), list)
                                      else [prop.get("type")]) or {"type": "null"} in \
                    prop.get("anyOf", [])
                assert nullable == (name not in required), (tool.name, name)


def test_every_tool_accepts_null_for_its_optional_arguments(mem: Memory) -> None:
    """What a strict schema makes a model send: every optional argument as null."""
    samples = {"search_history": {"query": "x"}, "recall": {"query": "x"},
               "propose_memory": {"claim": "Alice prefers tea", "kind": "preference",
                                  "subject": "alice", "attribute": "drink", "source": "chat"},
               "log_episode": {"text": "t", "source": "s"}, "scratch_write": {"key": "k",
                                                                             "value": "v"},
               "scratch_read": {"key": "k"}, "begin_operation": {"key": "k", "intent": "i"},
               "complete_operation": {"key": "k"}, "forget": {"match": "nothing-like-this"},
               "save_checkpoint": {"task": "t", "objective": "o"},
               "close_task": {"task": "t"},
               "get": {"ref": "fact:01ZZZZZZZZZZZZZZZZZZZZZZZZ"},
               "feedback": {"ref": "fact:01ZZZZZZZZZZZZZZZZZZZZZZZZ", "signal": "useful"},
               "retire_fact": {"ref": "fact:01ZZZZZZZZZZZZZZZZZZZZZZZZ", "reason": "r"}}
    scope = Scope(user="alice", project="docs-site")
    with ToolDispatcher(mem, scope, task="t") as tools:
        for tool in TOOLS:
            args = dict(samples.get(tool.name, {}))
            required = set(tool.args.model_json_schema().get("required", []))
            for name in tool.args.model_fields:
                if name not in required and name not in args:
                    args[name] = None
            if tool.name == "complete_operation":
                tools.dispatch("begin_operation", {"key": "k", "intent": "i"})
            out = tools.dispatch(tool.name, args)
            assert "error" not in out or out.get("type") != "ValidationError", (tool.name, out)


def test_cli_prints_the_strict_and_responses_renderings() -> None:
    from click.testing import CliRunner

    from memstrata.cli import cli

    for args, key in ((["--format", "openai", "--strict"], "function"),
                      (["--format", "openai-responses"], "parameters")):
        res = CliRunner().invoke(cli, ["tools", *args])
        assert res.exit_code == 0, res.output
        rendered = json.loads(res.stdout)
        assert len(rendered) == len(TOOLS) and all(key in t for t in rendered)
        params = [t["function"]["parameters"] if key == "function" else t["parameters"]
                  for t in rendered]
        assert all(strict_violations(p) == [] for p in params)


def test_get_feedback_list_and_retire_stay_inside_the_scope(mem: Memory) -> None:
    alice, bob = Scope(user="alice", project="docs-site"), Scope(user="bob", project="docs-site")
    mine = mem.facts.propose(alice, claim="Alice prefers tea", kind="preference",
                             subject="alice", attribute="drink", actor="user", source="chat")
    theirs = mem.facts.propose(bob, claim="Bob prefers coffee", kind="preference",
                               subject="bob", attribute="drink", actor="user", source="chat")
    assert mine.record is not None and theirs.record is not None
    with ToolDispatcher(mem, alice) as tools:
        got = tools.dispatch("get", {"ref": mine.record.ref})
        assert got["record"]["claim"] == "Alice prefers tea"
        for name, args in (("get", {"ref": theirs.record.ref}),
                           ("feedback", {"ref": theirs.record.ref, "signal": "contradicted"}),
                           ("retire_fact", {"ref": theirs.record.ref, "reason": "no"})):
            assert tools.dispatch(name, args)["type"] == "NotFound", name
        assert [f["ref"] for f in tools.dispatch("list_facts", {})["facts"]] == [
            mine.record.ref]
        assert tools.dispatch("feedback", {"ref": mine.record.ref, "signal": "useful"})[
            "action"] == "recorded"
        pending = tools.dispatch("propose_memory", {
            "claim": "Alice reviews docs on Fridays", "kind": "preference",
            "subject": "alice", "attribute": "review_day", "source": "chat:3"})
        assert pending["status"] == "pending" and "memstrata review approve" in pending["next"]
        listed = tools.dispatch("list_facts", {"status": "pending_review"})["facts"]
        assert [f["ref"] for f in listed] == [pending["ref"]]
        assert tools.dispatch("retire_fact", {"ref": mine.record.ref, "reason": "switched"})[
            "status"] == "retired"
    assert mem.facts.get(theirs.record.id).status == "active"


def test_every_result_matches_its_declared_output_schema(mem: Memory) -> None:
    """One successful call per tool, each result validated against its ``outputSchema``."""
    alice = Scope(user="alice", project="docs-site")
    mine = mem.facts.propose(alice, claim="Alice prefers tea", kind="preference",
                             subject="alice", attribute="drink", actor="user", source="chat")
    assert mine.record is not None
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_durable_records", {}), ("get_current_task", {"task": "release-v17"}),
        ("get_current_task", {}),
        ("save_checkpoint", {"task": "release-v17", "objective": "Ship v17 notes"}),
        ("log_episode", {"text": "Preview deploy failed", "event": "deploy_failed",
                         "source": "ci:812", "outcome": "retried"}),
        ("search_history", {"query": "deploy failed"}), ("search_history", {"query": "zebra"}),
        ("recall", {"query": "what does alice drink"}), ("recall", {"query": "zebra"}),
        ("propose_memory", {"claim": "Previews need a cache purge", "kind": "lesson",
                            "subject": "deploys", "attribute": "cache", "source": "ci:812"}),
        ("scratch_write", {"key": "k", "value": "v"}), ("scratch_read", {"key": "k"}),
        ("scratch_read", {"key": "missing"}), ("scratch_list", {}),
        ("begin_operation", {"key": "publish:v17", "intent": "POST notes"}),
        ("complete_operation", {"key": "publish:v17", "external_ref": "post-1"}),
        ("get", {"ref": mine.record.ref}),
        ("feedback", {"ref": mine.record.ref, "signal": "useful"}),
        ("list_facts", {}), ("close_task", {"task": "release-v17", "outcome": "shipped"}),
        ("forget", {"match": "cache purge", "dry_run": True}),
        ("retire_fact", {"ref": mine.record.ref, "reason": "switched to coffee"}),
    ]
    assert {name for name, _ in calls} == {t.name for t in TOOLS}
    by_name = {t.name: t for t in TOOLS}
    with ToolDispatcher(mem, alice) as tools:
        for name, args in calls:
            result = tools.dispatch(name, args)
            assert "error" not in result, (name, result)
            jsonschema.validate(result, by_name[name].output_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"query": "q", "hits": [{"ref": "x", "layer": "facts",
                                                     "excerpt": "e", "score": 3.2}]},
                            by_name["search_history"].output_schema())
