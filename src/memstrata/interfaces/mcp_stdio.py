"""End of input on the MCP stdio transport: answer what was read, then stop.

Contract:
- The ``mcp`` SDK cancels every request still running when its read stream ends, so a
  client that writes its requests and closes stdin (a pipe, a script) would lose their
  replies. :class:`AnswerBeforeEof` wraps the transport's two streams: its ``reader``
  records the id of each request read, its ``writer`` clears an id when the request's
  response or error goes out, and a client's ``notifications/cancelled`` clears it too.
- When the transport's input ends, ``reader`` ends only once no id is open, or after
  :data:`STDIN_EOF_GRACE_S`; everything else passes through unchanged, the sender's
  context included (``last_context``).
- Imported only when stdio is served (it needs the ``[mcp]`` extra).
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

STDIN_EOF_GRACE_S = 300.0
"""How long, after stdin ends, the server keeps answering the requests it read."""


class AnswerBeforeEof:
    """A read/write stream pair whose end of input waits for the open requests."""

    def __init__(self, read_stream: Any, write_stream: Any) -> None:
        self._open: set[Any] = set()
        self._idle = anyio.Event()
        self._idle.set()
        self.reader = _Reader(self, read_stream)
        self.writer = _Writer(self, write_stream)

    def opened(self, request_id: Any) -> None:
        self._open.add(request_id)
        if self._idle.is_set():
            self._idle = anyio.Event()

    def settled(self, request_id: Any) -> None:
        self._open.discard(request_id)
        if not self._open:
            self._idle.set()

    async def wait_idle(self) -> None:
        with anyio.move_on_after(STDIN_EOF_GRACE_S):
            await self._idle.wait()


class _Relay:
    """One side of :class:`AnswerBeforeEof`: closing it closes the transport's stream."""

    def __init__(self, pair: AnswerBeforeEof, stream: Any) -> None:
        self._pair, self._stream = pair, stream

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Reader(_Relay):
    @property
    def last_context(self) -> Any:
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._stream.receive()
        except anyio.EndOfStream:
            await self._pair.wait_idle()
            raise
        message = item.message if isinstance(item, SessionMessage) else None
        if isinstance(message, JSONRPCRequest):
            self._pair.opened(message.id)
        elif (isinstance(message, JSONRPCNotification)
              and message.method == "notifications/cancelled"):
            self._pair.settled((message.params or {}).get("requestId"))
        return item

    def __aiter__(self) -> _Reader:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Writer(_Relay):
    async def send(self, item: Any, /) -> None:
        await self._stream.send(item)
        message = getattr(item, "message", None)
        if isinstance(message, (JSONRPCResponse, JSONRPCError)):
            self._pair.settled(message.id)


__all__ = ["STDIN_EOF_GRACE_S", "AnswerBeforeEof"]
