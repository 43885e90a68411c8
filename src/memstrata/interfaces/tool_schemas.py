"""The tool list as function-calling schemas: OpenAI (chat and responses), Anthropic, and a
neutral form (name, description, input and output schema).

Contract: every rendering is made from :data:`memstrata.interfaces.tools.TOOLS` and each
tool's argument model, so the schemas a model sees and the arguments the dispatcher
accepts are one definition (tidied by :func:`~memstrata.interfaces.tool_results.tidy_schema`);
:func:`strict_schema` makes a schema
that OpenAI's strict mode accepts (every property required, optional ones nullable).
"""

from __future__ import annotations

from typing import Any

from .tools import TOOLS


def tool_definitions() -> list[dict[str, Any]]:
    """Name, description and input schema of every tool (the neutral form)."""
    return [{"name": t.name, "description": t.description, "input_schema": t.input_schema()}
            for t in TOOLS]


#: Keywords OpenAI's strict mode accepts in a schema (others are dropped, their meaning kept
#: in the description where it matters to a model: the dispatcher still enforces them).
STRICT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "enum",
                             "anyOf", "items", "description", "const"})


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema for OpenAI's strict mode: every property required, optional ones nullable
    (a model sends ``null`` for "the default", which the dispatcher honours), unsupported
    keywords (defaults, lengths, bounds) dropped, no extra properties anywhere."""

    def walk(node: Any, optional: bool = False) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: walk(v) for k, v in node.items() if k in STRICT_KEYWORDS
               and k not in ("properties", "required")}
        if node.get("type") == "object" or "properties" in node:
            props = node.get("properties", {})
            needed = set(node.get("required", []))
            out["type"] = "object"
            out["properties"] = {name: walk(prop, optional=name not in needed)
                                 for name, prop in props.items()}
            out["required"] = list(props)
            out["additionalProperties"] = False
        if optional:
            kind = out.get("type")
            if isinstance(kind, str):
                out["type"] = [kind, "null"]
                if "enum" in out:
                    out["enum"] = [*out["enum"], None]
            elif isinstance(kind, list) and "null" not in kind:
                out["type"] = [*kind, "null"]
            elif "anyOf" in out and {"type": "null"} not in out["anyOf"]:
                out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        return out

    result: dict[str, Any] = walk(schema)
    return result


def openai_tools(*, strict: bool = False) -> list[dict[str, Any]]:
    """The tools in OpenAI's function-calling format (``tools=`` of Chat Completions);
    ``strict=True``: strict-mode schemas (:func:`strict_schema`) with ``strict: true``."""
    out = []
    for t in TOOLS:
        function: dict[str, Any] = {"name": t.name, "description": t.description,
                                    "parameters": t.input_schema()}
        if strict:
            function["parameters"] = strict_schema(function["parameters"])
            function["strict"] = True
        out.append({"type": "function", "function": function})
    return out


def openai_responses_tools(*, strict: bool = True) -> list[dict[str, Any]]:
    """The tools in the shape of OpenAI's Responses API (``tools=`` of ``responses.create``:
    name, description and parameters at the top level), strict by default."""
    out = []
    for t in TOOLS:
        schema = t.input_schema()
        out.append({"type": "function", "name": t.name, "description": t.description,
                    "parameters": strict_schema(schema) if strict else schema,
                    "strict": strict})
    return out


def anthropic_tools() -> list[dict[str, Any]]:
    """The tools in Anthropic's Messages API format (``tools=``)."""
    return [{"name": t.name, "description": t.description, "input_schema": t.input_schema()}
            for t in TOOLS]


__all__ = ["STRICT_KEYWORDS", "anthropic_tools", "openai_responses_tools", "openai_tools",
           "strict_schema", "tool_definitions"]
