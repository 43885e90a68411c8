"""``memstrata serve``: the library as a service for teams, and a page for people.

The wing: :mod:`.keys` (API keys, roles, the scope a key may act in), :mod:`.requests`
(argument models and result schemas of the service's own operations), :mod:`.operations`
(the REST operations table), :mod:`.openapi` (the document generated from it),
:mod:`.app` (the ASGI app: authentication, limits, logs), :mod:`.mcp_http` (the MCP
endpoint), :mod:`.inspector` (the pages for reviewers). Needs the ``[serve]`` extra
(Starlette and uvicorn).
"""

from __future__ import annotations

__all__: list[str] = []
