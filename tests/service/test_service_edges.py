"""Refusals of ``memstrata serve`` that must still say who and why, on every backend.

A request over its key's rate is logged with that key's id (the log is how an operator finds
the noisy key), and the inspector's 429 carries ``Retry-After`` as the API's does. The
inspector is for reviewers: an agent key's sign-in is refused with a 403 page naming the
roles it needs, and no session cookie is set.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from conftest import LiveServer
from memstrata.interfaces.service.core import COOKIE


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(record.getMessage()))


@pytest.fixture
def request_log() -> Iterator[_Lines]:
    """The JSON lines the ``memstrata.service`` logger writes meanwhile."""
    logger = logging.getLogger("memstrata.service")
    handler, level = _Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_request_over_its_rate_is_logged_with_its_key_and_told_when_to_retry(
        served: LiveServer, request_log: _Lines) -> None:
    token = served.key("acme", role="reviewer", users=["alice"], rate_per_minute=2)
    key_id = served.keys.authenticate(token).id
    with served.client(token) as http:
        statuses = [http.post("/v1/whoami").status_code for _ in range(3)]
        page = http.get("/review")
        mcp = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={"Accept": "application/json, text/event-stream"})
    assert statuses == [200, 200, 429]
    refused = [line for line in request_log.lines if line["status"] == 429]
    assert len(refused) == 3
    assert all(line["key"] == key_id and line["tenant"] == "acme"
               and line["role"] == "reviewer" for line in refused)
    assert page.status_code == 429 and int(page.headers["Retry-After"]) >= 1
    assert "text/html" in page.headers["content-type"]
    assert mcp.status_code == 429 and int(mcp.headers["Retry-After"]) >= 1


def test_an_agent_key_cannot_sign_in_to_the_inspector(served: LiveServer) -> None:
    agent = served.key("acme", role="agent", users=["alice"])
    reviewer = served.key("acme", role="reviewer", users=["alice"])
    with served.client() as http:
        refused = http.post("/login", data={"key": agent},
                            headers={"Origin": served.url})
        assert refused.status_code == 403
        assert COOKIE not in refused.cookies and "set-cookie" not in refused.headers
        assert "reviewer or admin" in refused.text and "this key is agent" in refused.text
        assert 'id="signin"' in refused.text  # the sign-in form again, to paste another key
        assert http.get("/review").status_code == 303  # not signed in
        signed_in = http.post("/login", data={"key": reviewer},
                              headers={"Origin": served.url})
        assert signed_in.status_code == 303 and signed_in.cookies.get(COOKIE) == reviewer
