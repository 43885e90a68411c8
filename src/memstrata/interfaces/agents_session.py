"""An OpenAI Agents SDK ``Session`` kept in memstrata (``pip install 'memstrata[agents]'``).

The Agents SDK replays a session's items (Responses-API input items: messages, function
calls, their outputs, reasoning items) before every ``Runner.run`` and appends the new ones
after it. :class:`MemstrataSession` keeps them in memstrata's run-scoped working memory (the
scratch layer, in SQLite, PostgreSQL or Redis, whichever the ``Memory`` uses), under one
scope, as the run ``session:<session_id>``:

- ``add_items`` stores each item as one scratch entry, in order; a tool's output
  (``function_call_output`` and the other ``*_call_output`` items) longer than
  ``observation_cap`` keeps its head and ends with a marker saying how much was cut (the
  transcript helpers' cap, :func:`memstrata.interfaces.transcript.cap_text`: characters by
  default, ``cap_unit="tokens"`` counts tokens). The scratch layer screens every string of
  an item for secrets (the item stays valid JSON) and writes a call's items all or none:
  an item that is not a JSON object, or that cannot be stored, is a
  :class:`~memstrata.errors.ValidationError` and nothing of that call is stored.
- ``get_items(limit)`` returns the latest ``limit`` items (``session_settings.limit`` when
  none is given; all when both are None) in chronological order; ``pop_item`` removes and
  returns the newest, each item once even when pops race (in tasks, threads or processes:
  the delete is conditional and a pop that loses reads again); ``clear_session`` drops
  them all.
- Each item lives ``ttl`` (default 30 days) after it was added; durable memory is never
  written here (the transcript is working state; extraction decides what outlives it).
  ``Memory.forget`` of the scope reaches the items.

The calls run in a worker thread (the engines are thread-safe). For the MCP route instead
(``MCPServerStdio`` running ``memstrata mcp``) see the README.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError, ValidationError

try:
    from agents.memory import SessionABC, SessionSettings
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigError("the Agents SDK session needs openai-agents",
                      hint="pip install 'memstrata[agents]'") from exc

from ..ids import new_id
from ..inputs import text_arg
from ..layers.scratch import Scratch
from ..models import Scope, make_scope
from .transcript import cap_text

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

    from ..memory import Memory

PREFIX = "item:"
DEFAULT_TTL = timedelta(days=30)


class MemstrataSession(SessionABC):
    """The Agents SDK's session protocol over memstrata's scratch layer (see the module
    docstring)."""

    def __init__(self, session_id: str, mem: Memory, scope: Scope | dict[str, Any], *,
                 ttl: timedelta | float = DEFAULT_TTL, observation_cap: int = 4000,
                 cap_unit: Literal["chars", "tokens"] = "chars",
                 session_settings: SessionSettings | None = None) -> None:
        self.session_id = text_arg(session_id, "session_id", max_len=120)
        if cap_unit not in ("chars", "tokens"):
            raise ValidationError(f"cap_unit must be 'chars' or 'tokens', got {cap_unit!r}")
        if isinstance(observation_cap, bool) or not isinstance(observation_cap, int) or \
                observation_cap <= 0:
            raise ValidationError("observation_cap must be a positive integer")
        self.mem = mem
        self.scope = make_scope(scope)
        self.observation_cap = observation_cap
        self.cap_unit = cap_unit
        self.session_settings = session_settings
        # the run id names the scope too, so two scopes' sessions never share a key space
        digest = hashlib.sha256(self.scope.key.encode()).hexdigest()[:12]
        self._run_id = f"session:{digest}:{self.session_id}"
        self._scratch = Scratch(mem.scratch_store, mem.clock, self.scope, self._run_id, ttl)

    # -- helpers --------------------------------------------------------------
    def _cap(self, item: dict[str, Any]) -> dict[str, Any]:
        kind = str(item.get("type", ""))
        if not kind.endswith("_call_output"):
            return item
        output = item.get("output")
        if isinstance(output, str):
            return {**item, "output": cap_text(output, self.observation_cap, self.cap_unit)}
        if isinstance(output, list):
            parts = [{**p, "text": cap_text(p["text"], self.observation_cap, self.cap_unit)}
                     if isinstance(p, Mapping) and isinstance(p.get("text"), str) else p
                     for p in output]
            return {**item, "output": parts}
        return item

    @staticmethod
    def _decode(raw: str) -> dict[str, Any] | None:
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def _limit(self, limit: int | None) -> int | None:
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ValidationError("limit must be an integer or None")
        return limit

    # -- the protocol (sync bodies, run in a thread) --------------------------
    def items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The latest ``limit`` items, oldest first (synchronous form of get_items)."""
        limit = self._limit(limit)
        entries = self._scratch.items(PREFIX)
        if limit is not None and limit >= 0:
            entries = entries[max(0, len(entries) - limit):] if limit else []
        return [item for _, raw in entries if (item := self._decode(raw)) is not None]

    def add(self, items: list[Any]) -> None:
        """Append items in order (synchronous form of add_items): the scratch layer checks
        and screens every item first, then writes all of them or none."""
        if not isinstance(items, list | tuple):
            raise ValidationError("items must be a list of input items")
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise ValidationError(f"item {i} is {type(item).__name__}, not an input item "
                                      "(a JSON object)", hint="nothing of this call was stored")
        self._scratch.write_many([(PREFIX + new_id(), self._cap(dict(item))) for item in items])

    def pop(self) -> dict[str, Any] | None:
        """Remove and return the newest item (synchronous form of pop_item).

        The delete is conditional: of pops racing for one entry (tasks, threads, processes)
        only the one whose delete removed it returns it; a pop that lost reads again and
        takes the newest item left, so each item is popped once."""
        while True:
            entries = self._scratch.items(PREFIX)
            for key, raw in reversed(entries):
                if not self._scratch.remove(key):
                    break  # another pop removed it after we read: read again
                item = self._decode(raw)
                if item is not None:
                    return item
            else:
                return None

    def clear(self) -> None:
        """Drop every item (synchronous form of clear_session)."""
        self._scratch.discard()

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        return await asyncio.to_thread(self.items, limit)  # type: ignore[arg-type]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await asyncio.to_thread(self.add, list(items))

    async def pop_item(self) -> TResponseInputItem | None:
        return await asyncio.to_thread(self.pop)  # type: ignore[arg-type]

    async def clear_session(self) -> None:
        await asyncio.to_thread(self.clear)


__all__ = ["DEFAULT_TTL", "MemstrataSession"]
