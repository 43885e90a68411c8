"""An agent loop with memory in and out, against any OpenAI-compatible chat endpoint.

Memory in: the session starts from ``mem.context(...)`` (identity, the task's
checkpoint, current facts) in the system prompt. Memory out: the model calls
memstrata's tools (save_checkpoint, propose_memory, log_episode, the ledger
around side effects...), dispatched by :class:`memstrata.ToolDispatcher`
within a scope fixed here, never by the model.

Run it against a local model (Ollama, vLLM, llama.cpp server, LM Studio)::

    OPENAI_BASE_URL=http://127.0.0.1:11434/v1 MODEL=qwen2.5:7b-instruct \\
        python examples/agent_loop.py "Draft the v17 release notes" --user alice --task release-v17

``OPENAI_API_KEY`` is sent when set. The store is the configured one
(``$MEMSTRATA_HOME``/``$MEMSTRATA_URL``); pass ``--url`` to use another.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import httpx

from memstrata import Memory, Scope, ToolDispatcher, openai_tools

SYSTEM = """You are an assistant with a layered memory (memstrata). Use its tools: read \
before you act, save a checkpoint after each meaningful step, begin_operation before any \
side effect, propose_memory only for stable facts with a source, never store secrets.

What you already know (loaded from memory; verify before consequential actions):
{context}"""


def chat(client: httpx.Client, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One chat-completion round with the memory tools offered."""
    response = client.post("/chat/completions", json={
        "model": model, "messages": messages, "tools": openai_tools(), "tool_choice": "auto"})
    response.raise_for_status()
    message: dict[str, Any] = response.json()["choices"][0]["message"]
    return message


def run_agent(mem: Memory, scope: Scope, request: str, *, base_url: str, model: str,
              task: str | None = None, api_key: str | None = None,
              max_rounds: int = 8) -> str:
    """Run one session; returns the model's final answer."""
    context = mem.context(scope, task=task, query=request, budget_tokens=1500)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM.format(context=context.text or "(nothing yet)")},
        {"role": "user", "content": request},
    ]
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(base_url=base_url, headers=headers, timeout=120) as client, \
            ToolDispatcher(mem, scope, task=task) as tools:
        for _ in range(max_rounds):
            message = chat(client, model, messages)
            messages.append({k: v for k, v in message.items() if v is not None})
            calls = message.get("tool_calls") or []
            if not calls:
                return str(message.get("content") or "")
            for call in calls:
                fn = call["function"]
                # The dispatcher refuses unknown or scope-naming arguments and returns
                # library errors as {"error", "hint"} so the model can correct itself.
                result = tools.dispatch_json(fn["name"], fn.get("arguments") or "{}")
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return "(stopped: too many tool rounds)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("request", help="What to ask the agent.")
    parser.add_argument("--user", default=os.environ.get("MEMSTRATA_USER"))
    parser.add_argument("--project", default=os.environ.get("MEMSTRATA_PROJECT"))
    parser.add_argument("--task", default=None)
    parser.add_argument("--url", default=None, help="Store URL (default: the configured one).")
    args = parser.parse_args()
    scope = Scope(user=args.user, project=args.project)
    with Memory.open(args.url) as mem:
        answer = run_agent(
            mem, scope, args.request, task=args.task,
            base_url=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
            model=os.environ.get("MODEL", "qwen2.5:7b-instruct"),
            api_key=os.environ.get("OPENAI_API_KEY"))
        print(answer)
        waiting = mem.review.pending(scope)
        if waiting:
            print(f"\n{len(waiting)} proposal(s) wait for review: memstrata review list")


if __name__ == "__main__":
    main()
