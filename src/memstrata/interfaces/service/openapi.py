"""The OpenAPI 3.1 document of the REST API, generated from the operations table.

Contract: :func:`document` renders :data:`memstrata.interfaces.service.operations.OPERATIONS`: one
``POST`` per operation, its request body the JSON schema of the operation's argument model
(the tools' tidied schemas, the same the MCP server and the LLM tool lists show), its 200
response the operation's result schema, and every error status the app can answer with the
error schema. Nothing here is written by hand per operation, so the document cannot drift
from what runs.
"""

from __future__ import annotations

from typing import Any

from ...version import __version__
from ..tool_results import tidy_schema
from .operations import OPERATIONS, Endpoint
from .requests import ERROR

_ERRORS = {"401": "no valid API key", "403": "the key's role or scope forbids it",
           "404": "not found in this scope", "409": "conflicts with the current state",
           "413": "the body is too large", "422": "invalid arguments or refused by policy",
           "429": "over the key's rate; see Retry-After"}


def _error_response(why: str) -> dict[str, Any]:
    return {"description": why, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Error"}}}}


def _body_schema(op: Endpoint) -> dict[str, Any]:
    schema: dict[str, Any] = tidy_schema(op.args.model_json_schema())
    return schema


def _operation(op: Endpoint) -> dict[str, Any]:
    return {
        "operationId": op.name, "summary": op.summary.split(". ")[0][:120],
        "description": f"{op.summary}\n\nNeeds the `{op.role}` role."
                       + (f" The tool `{op.tool}`." if op.tool else ""),
        "tags": [op.group],
        "requestBody": {"required": False, "content": {"application/json": {
            "schema": _body_schema(op)}}},
        "responses": {"200": {"description": "the result", "content": {
            "application/json": {"schema": op.result}}},
            **{code: _error_response(why) for code, why in _ERRORS.items()}},
        "x-memstrata-role": op.role,
    }


def document() -> dict[str, Any]:
    """The OpenAPI document (a JSON-able dict)."""
    paths = {op.path: {"post": _operation(op)} for op in OPERATIONS}
    return {
        "openapi": "3.1.0",
        "info": {"title": "memstrata", "version": __version__,
                 "description": "Layered, governed memory for LLM agents. Every operation is "
                                "a POST with a JSON body; the scope comes from the API key "
                                "(and the X-Memstrata-User/-Project/-Agent headers within "
                                "what the key allows), never from the body."},
        "paths": paths,
        "components": {
            "schemas": {"Error": ERROR},
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer",
                                           "description": "msk.... from `memstrata keys "
                                                          "create`"}}},
        "security": [{"apiKey": []}],
    }


__all__ = ["document"]
