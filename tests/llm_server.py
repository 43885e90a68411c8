"""A real local HTTP server that plays an LLM provider for tests.

``LLMTestServer`` listens on 127.0.0.1 on a free port, in a background
thread, and answers

- ``POST /v1/chat/completions`` (OpenAI-compatible shape) and
- ``POST /v1/messages`` (Anthropic Messages shape)

with replies queued per path, first in first out. Each reply may carry a
status (400/429/500/529...), headers (``Retry-After``) and a delay (for
timeouts). A reply body may be a callable that builds the body from the
request JSON, e.g. to echo the forced tool name. Every request is recorded
(method, path, lower-cased headers, parsed JSON) so tests can assert on what
a client really sent. When nothing is queued the server answers 418 with an
explanation, which no client retries, so a test fails fast and readably.

Recorded provider responses live in ``tests/data/llm_recordings/*.json``:
``{"provider": "openai"|"anthropic", "description": ..., "status": ...,
"headers": {...}, "body": {...}}``; :func:`load_recording` reads one and
:meth:`LLMTestServer.queue_recording` serves it.

Usage::

    with LLMTestServer() as server:
        server.queue_recording("openai_extraction_json")
        client = OpenAICompatibleClient(server.openai_base_url, "qwen2.5-7b")
        ...
        assert server.requests[0].body["model"] == "qwen2.5-7b"
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

RECORDINGS = Path(__file__).parent / "data" / "llm_recordings"
OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
_PATHS = {"openai": OPENAI_PATH, "anthropic": ANTHROPIC_PATH}

BodyFactory = Callable[[Any], Any]


@dataclass
class Reply:
    """One queued answer. ``body``: JSON-able value, raw ``str``/``bytes``, or a factory."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class ReceivedRequest:
    """What the server received; ``headers`` keys are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


def load_recording(name: str) -> dict[str, Any]:
    """Load ``tests/data/llm_recordings/NAME.json``."""
    data: dict[str, Any] = json.loads((RECORDINGS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def openai_body(
    content: str | None,
    *,
    model: str = "test-model",
    finish_reason: str = "stop",
    prompt_tokens: int = 50,
    completion_tokens: int = 20,
) -> dict[str, Any]:
    """A chat-completion body in the shape OpenAI and vLLM return."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def anthropic_body(
    blocks: list[dict[str, Any]],
    *,
    model: str = "claude-test",
    stop_reason: str = "end_turn",
    input_tokens: int = 50,
    output_tokens: int = 20,
) -> dict[str, Any]:
    """A Messages API body with the given content blocks."""
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def anthropic_tool_reply(tool_input: Mapping[str, Any]) -> BodyFactory:
    """A body factory answering with a ``tool_use`` block named after the forced tool."""

    def build(request: Any) -> Any:
        name = request["tool_choice"]["name"]
        block = {"type": "tool_use", "id": "toolu_test", "name": name, "input": dict(tool_input)}
        return anthropic_body([block], stop_reason="tool_use")

    return build


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive, as real providers do
    # Send headers and body in one segment: otherwise Nagle + delayed ACK add
    # about 40 ms to every request on a kept-alive connection.
    wbufsize = -1
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``requests`` instead of stderr."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            parsed = None
        request = ReceivedRequest(
            method=self.command,
            path=self.path,
            headers={key.lower(): value for key, value in self.headers.items()},
            body=parsed,
            raw=raw,
        )
        owner = self.server.owner
        reply = owner._record_and_pop(request)
        if reply.delay:
            time.sleep(reply.delay)
        body = reply.body(parsed) if callable(reply.body) else reply.body
        if isinstance(body, bytes):
            payload, content_type = body, "application/octet-stream"
        elif isinstance(body, str):
            payload, content_type = body.encode(), "text/plain; charset=utf-8"
        else:
            payload, content_type = json.dumps(body).encode(), "application/json"
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test); nothing to tell it


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that gave up (timeout tests) leaves a broken pipe behind; printing it to
        # stderr would land in whatever output another test is capturing at that moment
        pass
    owner: LLMTestServer


class LLMTestServer:
    """Context manager running the fake provider; see the module docstring."""

    def __init__(self) -> None:
        self.requests: list[ReceivedRequest] = []
        self._queues: dict[str, deque[Reply]] = {}
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (the Anthropic ``base_url``)."""
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (the OpenAI-compatible ``base_url``)."""
        return f"{self.url}/v1"

    def queue(self, path: str, *replies: Reply) -> None:
        """Queue replies for ``path`` (``OPENAI_PATH`` or ``ANTHROPIC_PATH``)."""
        with self._lock:
            self._queues.setdefault(path, deque()).extend(replies)

    def queue_openai(self, *replies: Reply) -> None:
        """Queue replies for ``/v1/chat/completions``."""
        self.queue(OPENAI_PATH, *replies)

    def queue_anthropic(self, *replies: Reply) -> None:
        """Queue replies for ``/v1/messages``."""
        self.queue(ANTHROPIC_PATH, *replies)

    def queue_recording(self, name: str, *, delay: float = 0.0) -> dict[str, Any]:
        """Serve a recording from ``tests/data/llm_recordings``; returns it."""
        recording = load_recording(name)
        reply = Reply(
            status=int(recording.get("status", 200)),
            body=recording["body"],
            headers=dict(recording.get("headers") or {}),
            delay=delay,
        )
        self.queue(_PATHS[recording["provider"]], reply)
        return recording

    def pending(self, path: str | None = None) -> int:
        """Replies not yet served (for ``path``, or in total)."""
        with self._lock:
            if path is not None:
                return len(self._queues.get(path, ()))
            return sum(len(queue) for queue in self._queues.values())

    def _record_and_pop(self, request: ReceivedRequest) -> Reply:
        path = request.path.split("?", 1)[0]
        with self._lock:
            self.requests.append(request)
            if path not in _PATHS.values():
                return Reply(404, {"error": {"message": f"llm_server: no route {path}"}})
            queue = self._queues.get(path)
            if not queue:
                return Reply(418, {"error": {"message": f"llm_server: no reply queued for {path}"}})
            return queue.popleft()
