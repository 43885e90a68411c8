"""`memstrata tools`: each format is the shape its consumer reads, and --strict is refused
where it does not apply (never silently ignored)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from memstrata import Memory, Scope
from memstrata.cli import cli
from memstrata.interfaces.mcp_server import build_server
from memstrata.interfaces.tools import TOOLS


def _tools(*args: str) -> Any:
    res = CliRunner().invoke(cli, ["tools", *args], prog_name="memstrata")
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _served(url: str) -> list[dict[str, Any]]:
    """What a client of `memstrata mcp` is served (tools/list), over a real store."""

    async def listed() -> list[dict[str, Any]]:
        with Memory.open(url, embedder=None) as mem:
            async with Client(build_server(mem, Scope(user="alice"))) as client:
                result = await client.list_tools()
        tools: list[dict[str, Any]] = result.model_dump(
            mode="json", by_alias=True, exclude_none=True)["tools"]
        return tools

    return anyio.run(listed)


def test_format_mcp_is_what_the_mcp_server_lists(tmp_path: Any) -> None:
    printed = _tools("--format", "mcp")
    assert printed == _served(f"sqlite:///{tmp_path / 'm.db'}")
    assert [t["name"] for t in printed] == [t.name for t in TOOLS]
    by_name = {t.name: t for t in TOOLS}
    for tool in printed:
        assert set(tool) == {"name", "title", "description", "inputSchema", "outputSchema",
                             "annotations"}
        assert tool["title"] == by_name[tool["name"]].display_title
        assert tool["inputSchema"] == by_name[tool["name"]].input_schema()
        assert tool["outputSchema"] == by_name[tool["name"]].output_schema()
        assert tool["annotations"]["readOnlyHint"] == by_name[tool["name"]].read_only
    assert printed != _tools("--format", "anthropic")


def test_the_other_formats_keep_their_shapes() -> None:
    [openai] = _tools("--format", "openai")[:1]
    assert openai["type"] == "function" and "parameters" in openai["function"]
    assert "strict" not in openai["function"]
    assert _tools("--format", "openai", "--strict")[0]["function"]["strict"] is True
    anthropic = _tools("--format", "anthropic")[0]
    assert set(anthropic) == {"name", "description", "input_schema"}
    responses = _tools("--format", "openai-responses", "--strict")
    assert responses == _tools("--format", "openai-responses")
    assert all(t["strict"] is True for t in responses)


@pytest.mark.parametrize("fmt", ["anthropic", "mcp"])
def test_strict_where_it_does_not_apply_is_a_usage_error(fmt: str) -> None:
    res = CliRunner().invoke(cli, ["tools", "--format", fmt, "--strict"],
                             prog_name="memstrata")
    assert res.exit_code == 2, res.output
    assert f"does not apply to --format {fmt}" in res.output
    assert "hint: drop --strict" in res.output
    assert "input_schema" not in res.output and "inputSchema" not in res.output
