"""The one HTTP stack of memstrata's providers (LLM clients and the OpenAI-compatible
embedder).

Contract:
- One pooled ``httpx.Client`` per :class:`HTTPClient`, opened on first request (thread-safe)
  and closed by :meth:`HTTPClient.close` (or ``with``).
- Retries are bounded (``max_retries``, default 2) and only on 429, 500, 502, 503, 504,
  529 and dropped connections, with exponential backoff that honours ``Retry-After`` /
  ``retry-after-ms``, each wait capped at ``max_wait``. Timeouts and refused connections
  are not retried: the caller already waited, or nothing is listening.
- Every failure is a :class:`~memstrata.errors.ProviderError` naming the provider, the
  model, the HTTP status (``details["status"]``) and what to do (``hint``); the server's
  own message is quoted, redacted of the API key, which never appears in a message,
  a log line or ``repr``.
"""

from __future__ import annotations

import email.utils
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Self

import httpx

from ..errors import ConfigError, ProviderError

log = logging.getLogger(__name__)

DEFAULT_MAX_RETRIES = 2
DEFAULT_BACKOFF = 0.5
DEFAULT_MAX_WAIT = 20.0
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
_EXCERPT = 300


def excerpt(text: str, limit: int = _EXCERPT) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def server_message(body_text: str) -> str:
    """The human part of an error body (OpenAI, Anthropic, llama.cpp, Ollama, FastAPI)."""
    try:
        body = json.loads(body_text)
    except json.JSONDecodeError:
        return excerpt(body_text)
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and error.get("message"):
            return excerpt(str(error["message"]))
        for key in ("error", "detail", "message"):
            if body.get(key):
                value = body[key]
                return excerpt(value if isinstance(value, str) else json.dumps(value))
    return excerpt(body_text)


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After``."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


STATUS_HINTS: dict[int, str] = {
    400: "the server rejected the request; check the model name and parameters",
    401: "the API key was rejected; set {key_env} (or pass api_key=)",
    403: "the API key lacks access to this model; check {key_env} and the account",
    404: "model or endpoint not found; check the model name and base_url",
    408: "the server timed out; retry or raise timeout=",
    413: "the request is too large; shorten the prompt",
    422: "the server rejected the request; check the model name and parameters",
    429: "rate limited; wait, lower concurrency or raise max_retries=",
    529: "the provider is overloaded; retry later",
}


class HTTPClient:
    """The one HTTP stack of memstrata's providers: one pooled ``httpx.Client``, bounded
    retries, error translation (see the module docstring)."""

    #: How messages name the provider; ``key_env`` names where its key comes from.
    provider: str = "http"
    key_env: str = "the API key"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout: float,
        headers: Mapping[str, str] | None,
        max_retries: int,
        backoff: float,
        max_wait: float,
        sleep: Callable[[float], None],
        provider: str | None = None,
    ) -> None:
        if provider is not None:
            self.provider = provider
        if not model:
            raise ConfigError(f"{self.provider}: a model name is required")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"{self.provider}: base_url must start with http:// or https://, got {base_url!r}"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.backoff = backoff
        self.max_wait = max_wait
        self._api_key = api_key or None
        self._extra_headers = dict(headers or {})
        self._sleep = sleep
        self._client: httpx.Client | None = None  # created on first request
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close pooled connections; the client reopens them if used again."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    @property
    def label(self) -> str:
        """How errors name this client: provider and model, never the key."""
        return f"{self.provider} ({self.model} at {self.base_url})"

    def _auth_headers(self) -> dict[str, str]:
        """Bearer authentication (providers with another scheme override this)."""
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _redact(self, text: str) -> str:
        if self._api_key and len(self._api_key) >= 4:
            text = text.replace(self._api_key, "***")
        return text

    def _wait_before_retry(self, attempt: int, response: httpx.Response | None) -> float:
        asked = retry_after(response.headers) if response is not None else None
        wait = asked if asked is not None else self.backoff * (2**attempt)
        return min(wait, self.max_wait)

    def post(
        self,
        path: str,
        payload: Mapping[str, Any],
        *,
        give_up_if: Callable[[int, str], bool] | None = None,
    ) -> Any:
        """POST JSON, retrying transient failures; return the decoded JSON body."""
        url = self.base_url + path
        with self._client_lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout)
        headers = {**self._extra_headers, **self._auth_headers()}
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                response = self._client.post(url, json=payload, headers=headers)
            except httpx.TimeoutException as exc:
                raise ProviderError(
                    f"{self.label} did not answer within {self.timeout:g} s",
                    hint="raise timeout=, use a smaller model, or check the server's load",
                    provider=self.provider,
                    status=None,
                ) from exc
            except httpx.ConnectError as exc:
                raise ProviderError(
                    f"cannot connect to {self.label}: {self._redact(str(exc))}",
                    hint="is the server running, and is base_url right (often ending in /v1)?",
                    provider=self.provider,
                    status=None,
                ) from exc
            except httpx.TransportError as exc:
                if attempt < self.max_retries:
                    wait = self._wait_before_retry(attempt, None)
                    log.warning(
                        "%s: %s; retry %d in %.2f s",
                        self.label,
                        type(exc).__name__,
                        attempt + 1,
                        wait,
                    )
                    self._sleep(wait)
                    attempt += 1
                    continue
                raise ProviderError(
                    f"{self.label} dropped the connection: {self._redact(str(exc))}",
                    hint="retry later; check proxies and the server log",
                    provider=self.provider,
                    status=None,
                ) from exc
            status = response.status_code
            log.debug(
                "POST %s model=%s -> %d in %.2f s",
                url,
                self.model,
                status,
                time.monotonic() - started,
            )
            if status < 400:
                try:
                    return response.json()
                except ValueError as exc:
                    raise ProviderError(
                        f"{self.label} answered HTTP {status} with a body that is not JSON: "
                        f"{self._redact(excerpt(response.text))!r}",
                        hint="is base_url pointing at the API (often ending in /v1)?",
                        provider=self.provider,
                        status=status,
                    ) from exc
            body_text = self._redact(response.text)
            if give_up_if is not None and give_up_if(status, body_text):
                raise self._status_error(status, body_text, attempt)
            if status in RETRY_STATUSES and attempt < self.max_retries:
                wait = self._wait_before_retry(attempt, response)
                log.warning(
                    "%s answered HTTP %d; retry %d in %.2f s", self.label, status, attempt + 1, wait
                )
                self._sleep(wait)
                attempt += 1
                continue
            raise self._status_error(status, body_text, attempt)

    def _status_error(self, status: int, body_text: str, retries: int) -> ProviderError:
        return http_error(self.label, self.provider, self.key_env, status, body_text, retries)


def http_error(
    label: str, provider: str, key_env: str, status: int, body_text: str, retries: int
) -> ProviderError:
    """The ProviderError for an HTTP error status (the hint says what to do)."""
    if status >= 500 and status != 529:
        hint = "the server failed; check its log and retry later"
    else:
        hint = STATUS_HINTS.get(status, "check the request and the server")
    after = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
    return ProviderError(
        f"{label} answered HTTP {status}{after}: {server_message(body_text)}",
        hint=hint.format(key_env=key_env),
        provider=provider,
        status=status,
        body=body_text[:2000],
    )


__all__ = ["DEFAULT_BACKOFF", "DEFAULT_MAX_RETRIES", "DEFAULT_MAX_WAIT", "RETRY_STATUSES",
           "HTTPClient", "excerpt", "http_error", "retry_after", "server_message"]
