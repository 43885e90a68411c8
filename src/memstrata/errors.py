"""The one exception tree of memstrata.

Every error the library raises on purpose derives from :class:`MemstrataError`;
lower-level errors (sqlite3, psycopg, redis, httpx) are translated at the
boundary with ``raise X(...) from exc`` so callers catch one family::

    MemstrataError
    ├── ValidationError      bad input; nothing was stored
    ├── NotFound             the record, task, key or procedure does not exist
    ├── Conflict             the request contradicts current state (e.g. a
    │                        ledger key already completed with another ref)
    ├── PolicyRejected       the write policy refused the write (carries the
    │                        WriteResult-style reason, never the secret)
    ├── AccessDenied         scope or readers forbid the operation
    │   └── Unauthenticated  no valid API key (memstrata serve)
    ├── RateLimited          a key sent more requests than its limit allows
    ├── ConfigError          configuration or environment is unusable
    ├── BackendError         the storage backend failed (I/O, lock, server)
    ├── ProviderError        an embedder or LLM provider failed or answered
    │                        something unusable
    └── ActivationRefused    a procedure version failed its eval cases

The base is deliberately *not* called ``MemoryError`` (a Python built-in).
"""

from __future__ import annotations

from typing import Any


class MemstrataError(Exception):
    """Base class of every error memstrata raises on purpose.

    ``hint`` says what to do next; CLI and MCP adapters print it.
    """

    def __init__(self, message: str, *, hint: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} ({self.hint})"
        return self.message


class ValidationError(MemstrataError, ValueError):
    """Input failed schema, size or type checks; nothing was written."""


class NotFound(MemstrataError, LookupError):
    """The requested record, task, key or procedure does not exist in this scope."""


class Conflict(MemstrataError):
    """The request contradicts the current state of a record."""


class PolicyRejected(MemstrataError):
    """The write policy refused a write; ``details['reason']`` says why."""


class AccessDenied(MemstrataError, PermissionError):
    """Scope or readers forbid this operation (e.g. an unscoped forget)."""


class Unauthenticated(AccessDenied):
    """The request carries no API key, or one that is unknown or revoked."""


class RateLimited(MemstrataError):
    """The key sent more requests than its rate allows; ``details['retry_after']`` is the
    number of seconds to wait."""


class ConfigError(MemstrataError):
    """Configuration, URL or environment cannot be used."""


class BackendError(MemstrataError):
    """The storage backend failed; the transaction was rolled back."""


class ProviderError(MemstrataError):
    """An embedding or LLM provider failed or returned unusable output."""


class ActivationRefused(MemstrataError):
    """A procedure version was not activated because eval cases failed."""


__all__ = [
    "AccessDenied",
    "ActivationRefused",
    "BackendError",
    "ConfigError",
    "Conflict",
    "MemstrataError",
    "NotFound",
    "PolicyRejected",
    "ProviderError",
    "RateLimited",
    "Unauthenticated",
    "ValidationError",
]
