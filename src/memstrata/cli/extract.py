"""CLI: ``memstrata extract TRANSCRIPT.json`` — end-of-session extraction (one library call)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..errors import ValidationError
from ._common import current_scope, emit_json, json_option, open_memory, store_options


@click.command("extract")
@store_options
@json_option
@click.argument("transcript", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--llm", "llm_spec", default=None, metavar="SPEC",
              help="Propose with a model: PROVIDER:MODEL[@BASE_URL] (openai, ollama, vllm, "
                   "llamacpp, lmstudio, anthropic, recorded:PATH), or 'env' for "
                   "$MEMSTRATA_LLM. Default: the explicit proposer (no model).")
@click.option("--judge", "judge_name", type=click.Choice(["auto", "rules", "slot", "llm"]),
              default="auto", show_default=True,
              help="Who decides supersede/coexist/review across slots: auto = the model when "
                   "--llm is given, else the rules (same predicate, another answer; "
                   "'switched to', 'instead of', 'no longer'); slot = same subject and "
                   "attribute only.")
@click.option("--source", default=None,
              help="Provenance of the session, e.g. chat:2026-08-03 (default session:DATE).")
@click.option("--task", default=None,
              help="List identity facts sent to review in this task's checkpoint.")
@click.option("--max-candidates", type=int, default=3, show_default=True,
              help="Most facts a model may propose for one session.")
@click.option("--lenient", is_flag=True,
              help="Report invalid proposals as rejected instead of refusing the whole run.")
def extract_cmd(as_json: bool, transcript: str, llm_spec: str | None, judge_name: str,
                source: str | None, task: str | None, max_candidates: int,
                lenient: bool) -> None:
    """Extract durable facts from a session transcript (a JSON list of messages).

    Every proposal cites its turn and goes through the write policy; an invalid
    proposal or malformed model output writes nothing.
    """
    from ..extraction.judges import LLMJudge, RuleJudge, SlotJudge
    from ..extraction.proposers import ExplicitProposer, LLMProposer

    messages = _read_transcript(transcript)
    client: Any = None
    if llm_spec is not None:
        from ..providers.llm import client_from_env, client_from_spec

        client = client_from_env() if llm_spec == "env" else client_from_spec(llm_spec)
    if judge_name == "llm" and client is None:
        raise click.UsageError("--judge llm needs --llm SPEC")
    proposer: Any = (LLMProposer(client, max_candidates=max_candidates) if client is not None
                     else ExplicitProposer())
    judge: Any = None
    if judge_name == "slot":
        judge = SlotJudge()
    elif judge_name == "rules":
        judge = RuleJudge()
    elif judge_name == "llm":
        judge = LLMJudge(client)
    mem = open_memory(create=True)
    report = mem.extract(current_scope(), messages, proposer, source=source, task=task,
                         judge=judge, strict=not lenient)
    if as_json:
        emit_json(report)
    else:
        click.echo(report.summary())
    if report.errors:
        raise SystemExit(1)


def _read_transcript(path: str) -> Any:
    try:
        if path == "-":
            raw = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as fh:
                raw = fh.read()
    except OSError as exc:
        raise ValidationError(f"cannot read transcript {path}: {exc.strerror}") from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"transcript {path} is not JSON: {exc.msg} at line {exc.lineno}",
                    hint="a JSON list of {role, content} messages, or {\"messages\": [...]}"
                    ) from None


def register(group: click.Group) -> None:
    group.add_command(extract_cmd)
