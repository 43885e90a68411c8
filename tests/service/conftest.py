"""A running ``memstrata serve`` for the service tests: uvicorn on a loopback port.

``served`` starts the real ASGI app (:func:`~memstrata.interfaces.service.app.build_app`)
with uvicorn in a thread of the test process, over the test's store on each conformance backend
(``mem``: SQLite, PostgreSQL as the application role, PostgreSQL + Redis), and stops it
afterwards. Requests go over real HTTP with httpx. ``served.key(...)`` creates an API key
in the store (as ``memstrata keys create`` does) and returns its token.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from memstrata import Memory
from memstrata.interfaces.service.app import ServiceConfig, build_app
from memstrata.interfaces.service.keys import KeyStore


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """One server over one store."""

    def __init__(self, mem: Memory, config: ServiceConfig | None = None) -> None:
        self.mem = mem
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = build_app(mem, config)
        self.keys = KeyStore(mem.db, mem.clock)
        self._server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1",
                                                     port=self.port, log_level="warning",
                                                     lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def start(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=20)

    def key(self, tenant: str = "acme", **options: Any) -> str:
        return self.keys.create(tenant, **options)[1]

    def client(self, token: str | None = None, **headers: str) -> httpx.Client:
        sent = {f"X-Memstrata-{k.capitalize()}": v for k, v in headers.items()}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=sent, timeout=30)


@pytest.fixture
def served(mem: Memory) -> Iterator[LiveServer]:
    server = LiveServer(mem).start()
    try:
        yield server
    finally:
        server.stop()
