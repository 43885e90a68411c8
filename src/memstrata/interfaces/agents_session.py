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
- An item larger than :data:`ITEM_BUDGET` (180,000 characters as JSON; a scratch entry
  holds 200,000) is shrunk so that it fits and stays an item the Responses API accepts,
  instead of being refused: first its inline binary payloads go, largest first (an
  ``input_image`` data URL or an ``input_file``'s ``file_data`` becomes an ``input_text``
  part saying what was omitted; a ``computer_screenshot``'s data URL becomes
  :data:`BLANK_PNG`, a 1x1 image, since that output must stay an image; an
  ``image_generation_call``'s ``result`` becomes null); then, if it is still too large,
  every string longer than some length is cut to it with ``cap_text``'s marker, the
  length chosen as large as fits. Only an item whose bulk is not in its strings (tens of
  thousands of tiny parts) is still refused.
- Items come back in the order they were written, whatever the writers' clocks: each
  ``add_items`` keys its items after the newest item stored when it starts (a ULID, moved
  past that item when the writer's clock is behind), so a worker whose clock lags never
  puts its turn before an earlier one. Two ``add_items`` that overlap in time are ordered
  either way, each call's items kept together.
- ``get_items(limit)`` returns the latest ``limit`` items (``session_settings.limit`` when
  none is given; all when both are None) in chronological order; ``pop_item`` removes and
  returns the newest, each item once even when pops race (in tasks, threads or processes:
  the delete is conditional and a pop that loses reads again); ``clear_session`` drops
  them all. ``session_settings`` is what the SDK accepts: a ``SessionSettings`` or a dict
  of its fields (checked by the SDK's own coercion; a bad one is a ValidationError).
- Each item lives ``ttl`` (default 30 days) after it was added; durable memory is never
  written here (the transcript is working state; extraction decides what outlives it).
  ``Memory.forget`` of the scope reaches the items. As items expire one by one, a tool
  call can expire before its output (written later, e.g. after an approval); the Responses
  API rejects an output without its call, so the history ``get_items`` reads never holds
  a tool output (``function_call_output``, ``computer_call_output``, the other
  ``*_output`` items, ``mcp_approval_response``) whose call is not before it: such an
  output is left out of every read (and expires in its turn). ``limit`` then takes the
  latest items of that history, as ``SQLiteSession`` does: a slice may begin with an
  output whose call lies before it, which ``Runner.run`` prunes itself when it reads with
  a limit.

The calls run in a worker thread (the engines are thread-safe). For the MCP route instead
(``MCPServerStdio`` running ``memstrata mcp``) see the README.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import secrets
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError, ValidationError

try:
    from agents.memory import SessionABC, SessionSettings
    from agents.memory.session_settings import coerce_session_settings
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigError("the Agents SDK session needs openai-agents",
                      hint="pip install 'memstrata[agents]'") from exc

from ..ids import is_id, new_id
from ..inputs import text_arg
from ..layers.scratch import MAX_VALUE, Scratch
from ..models import Scope, make_scope
from .transcript import cap_text

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

    from ..memory import Memory

PREFIX = "item:"
DEFAULT_TTL = timedelta(days=30)
#: The most characters (as JSON) an item is stored with; a larger one is shrunk. A tenth
#: under the scratch entry's limit, so the secret screen's markers still fit.
ITEM_BUDGET = MAX_VALUE * 9 // 10
#: A 1x1 transparent PNG: stands in for a screenshot too large to keep.
BLANK_PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4"
             "nGNgAAIAAAUAAXpeqz8AAAAASUVORK5CYII=")
#: Below this length strings are never cut to make an item fit.
_MIN_TEXT = 200
#: A tool output's type -> (its call's type, the output's field naming the call, the
#: call's field holding that name).
_OUTPUT_CALLS = {
    "function_call_output": ("function_call", "call_id", "call_id"),
    "custom_tool_call_output": ("custom_tool_call", "call_id", "call_id"),
    "computer_call_output": ("computer_call", "call_id", "call_id"),
    "local_shell_call_output": ("local_shell_call", "call_id", "call_id"),
    "shell_call_output": ("shell_call", "call_id", "call_id"),
    "apply_patch_call_output": ("apply_patch_call", "call_id", "call_id"),
    "tool_search_output": ("tool_search_call", "call_id", "call_id"),
    "program_output": ("program", "call_id", "call_id"),
    "mcp_approval_response": ("mcp_approval_request", "approval_request_id", "id"),
}
_CALL_NAMES = {call: field for call, _, field in _OUTPUT_CALLS.values()}
_ULID = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # memstrata.ids' alphabet (Crockford base32)
_KEYS_LOCK = threading.Lock()


def _json_size(item: Any) -> int:
    """The item's size as the scratch layer stores it."""
    return len(json.dumps(item, sort_keys=True, ensure_ascii=False))


def _payloads(node: Any, found: list[tuple[int, Callable[[], None]]]) -> None:
    """Collect the inline binary payloads under ``node``: (size, the edit that drops it)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for key, child in items:
        if isinstance(child, dict):
            kind = child.get("type")
            url, data = child.get("image_url"), child.get("file_data")
            if kind == "input_image" and isinstance(url, str) and url.startswith("data:"):
                mime = url[5:].split(";", 1)[0] or "image"
                note = (f"[image omitted by memstrata: a {mime} data URL of {len(url):,} "
                        "characters was too large to keep in the session]")
                found.append((len(url), _setter(node, key, {"type": "input_text",
                                                            "text": note})))
            elif kind == "input_file" and isinstance(data, str):
                name = child.get("filename") or "file"
                note = (f"[file {name} omitted by memstrata: {len(data):,} characters of "
                        "inline data were too large to keep in the session]")
                found.append((len(data), _setter(node, key, {"type": "input_text",
                                                             "text": note})))
            elif kind == "computer_screenshot" and isinstance(url, str) and \
                    url.startswith("data:") and len(url) > len(BLANK_PNG):
                found.append((len(url), _setter(child, "image_url", BLANK_PNG)))
            elif kind == "image_generation_call" and isinstance(child.get("result"), str):
                found.append((len(child["result"]), _setter(child, "result", None)))
        _payloads(child, found)


def _setter(node: Any, key: Any, value: Any) -> Callable[[], None]:
    def apply() -> None:
        node[key] = value
    return apply


def _cap_strings(node: Any, cap: int) -> Any:
    """``node`` with every string longer than ``cap`` cut to it, ending in the marker."""
    if isinstance(node, str):
        return cap_text(node, cap, "chars")
    if isinstance(node, dict):
        return {key: _cap_strings(value, cap) for key, value in node.items()}
    if isinstance(node, list):
        return [_cap_strings(value, cap) for value in node]
    return node


def _fit(n: int, item: dict[str, Any]) -> dict[str, Any]:
    """``item`` shrunk to :data:`ITEM_BUDGET` (see the module docstring)."""
    try:
        if _json_size(item) <= ITEM_BUDGET:
            return item
    except (TypeError, ValueError):
        return item  # not JSON: the scratch layer refuses it, with its own error
    holder = [copy.deepcopy(item)]  # the walk looks at children: the item is one
    found: list[tuple[int, Callable[[], None]]] = []
    _payloads(holder, found)
    for _, drop in sorted(found, key=lambda site: -site[0]):
        drop()
        if _json_size(holder[0]) <= ITEM_BUDGET:
            return holder[0]
    item = holder[0]
    cap = ITEM_BUDGET
    while cap >= _MIN_TEXT:
        capped: dict[str, Any] = _cap_strings(item, cap)
        if _json_size(capped) <= ITEM_BUDGET:
            return capped
        cap = cap * 2 // 3
    raise ValidationError(f"item {n} is {_json_size(item):,} characters as JSON even with "
                          f"each of its strings cut to {_MIN_TEXT} characters",
                          hint="nothing of this call was stored; split the item up")


def _without_orphan_outputs(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` less each tool output whose call is not before it (see the module
    docstring)."""
    calls: set[tuple[str, Any]] = set()
    kept = []
    for item in items:
        kind = item.get("type")
        if not isinstance(kind, str):
            kind = ""
        if kind in _CALL_NAMES:
            calls.add((kind, item.get(_CALL_NAMES[kind])))
        if kind in _OUTPUT_CALLS:
            call, link, _ = _OUTPUT_CALLS[kind]
            name = item.get(link)
            if isinstance(name, str) and (call, name) not in calls:
                continue
        kept.append(item)
    return kept


def _ulid_number(text: str) -> int:
    number = 0
    for char in text.upper():
        number = number * 32 + _ULID.index(char)
    return number


def _ulid_text(number: int) -> str:
    return "".join(_ULID[(number >> shift) & 31] for shift in range(125, -1, -5))


class MemstrataSession(SessionABC):
    """The Agents SDK's session protocol over memstrata's scratch layer (see the module
    docstring)."""

    def __init__(self, session_id: str, mem: Memory, scope: Scope | dict[str, Any], *,
                 ttl: timedelta | float = DEFAULT_TTL, observation_cap: int = 4000,
                 cap_unit: Literal["chars", "tokens"] = "chars",
                 session_settings: SessionSettings | dict[str, Any] | None = None) -> None:
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
        try:  # what SQLiteSession and RunConfig accept, by the SDK's own coercion
            self.session_settings = SessionSettings() if session_settings is None else \
                coerce_session_settings(session_settings)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"session_settings: {exc}",
                                  hint="a SessionSettings or a dict of its fields, e.g. "
                                       "{'limit': 20}") from exc
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
        if limit is None and self.session_settings is not None:  # the SDK may reset it
            limit = self.session_settings.limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ValidationError("limit must be an integer or None")
        return limit

    # -- the protocol (sync bodies, run in a thread) --------------------------
    def items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The latest ``limit`` items, oldest first (synchronous form of get_items)."""
        limit = self._limit(limit)
        history = _without_orphan_outputs(
            [item for _, raw in self._scratch.items(PREFIX)
             if (item := self._decode(raw)) is not None])
        if limit is not None and limit >= 0:
            history = history[max(0, len(history) - limit):] if limit else []
        return history

    def add(self, items: list[Any]) -> None:
        """Append items in order (synchronous form of add_items): the scratch layer checks
        and screens every item first, then writes all of them or none."""
        if not isinstance(items, list | tuple):
            raise ValidationError("items must be a list of input items")
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise ValidationError(f"item {i} is {type(item).__name__}, not an input item "
                                      "(a JSON object)", hint="nothing of this call was stored")
        values = [_fit(i, self._cap(dict(item))) for i, item in enumerate(items)]
        self._scratch.write_many(list(zip(self._new_keys(len(values)), values, strict=True)))

    def _new_keys(self, n: int) -> list[str]:
        """Keys for ``n`` new items, in order, after every item stored now: fresh ULIDs
        (unique in this process, one call's in a row); when this writer's clock is behind
        the newest stored key, a run just past it, at a random distance so that two writers
        moving past the same key neither collide nor interleave."""
        with _KEYS_LOCK:
            numbers = [_ulid_number(new_id()) for _ in range(n)]
        stored = [key[len(PREFIX):] for key in self._scratch.list(PREFIX)]
        newest = max((_ulid_number(k) for k in stored if is_id(k)), default=-1)
        if numbers and numbers[0] <= newest:
            start = newest + 1 + secrets.randbelow(1 << 40)
            numbers = [start + i for i in range(n)]
        return [PREFIX + _ulid_text(number) for number in numbers]

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
