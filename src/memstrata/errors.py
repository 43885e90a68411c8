"""The one exception tree of memstrata.

Every error the library raises on purpose derives from :class:`MemstrataError`;
lower-level errors (sqlite3, psycopg, redis, httpx) are translated at the
boundary with ``raise X(...) from exc`` so callers catch one family::

    MemstrataError
    ├── ValidationError      bad input; nothing was stored
    │   └── ArgumentError    a Python call named an argument the method does not
    │                        take, or left out one it needs (also a TypeError)
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

from typing import Any, ClassVar


class MemstrataError(Exception):
    """Base class of every error memstrata raises on purpose.

    ``hint`` says what to do next; CLI and MCP adapters print it. Every error has one: a
    raise that names none gets its class's :attr:`default_hint`.
    """

    #: What to do next when the raise gives no more specific hint.
    default_hint: ClassVar[str] = "the message says what went wrong"

    def __init__(self, message: str, *, hint: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or self.default_hint
        self.details = details

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} ({self.hint})"
        return self.message


class ValidationError(MemstrataError, ValueError):
    """Input failed schema, size or type checks; nothing was written."""

    default_hint = "correct the input the message names and try again; nothing was stored"


class ArgumentError(ValidationError, TypeError):
    """A call to the Python API did not fit the method's signature: an unknown keyword, a
    missing required argument, too many positional ones. Also a ``TypeError``, which is
    what Python raises for such a call, so code catching that keeps working."""

    default_hint = "call the method with the arguments its signature names (help(method))"


class NotFound(MemstrataError, LookupError):
    """The requested record, task, key or procedure does not exist in this scope."""

    default_hint = ("check the reference and the scope: a record outside the caller's scope "
                    "or readers is not found either")


class Conflict(MemstrataError):
    """The request contradicts the current state of a record."""

    default_hint = "read the record's current state, then retry with a request that fits it"


class PolicyRejected(MemstrataError):
    """The write policy refused a write; ``details['reason']`` says why."""

    default_hint = "the reason says which rule refused it; store what the policy allows"


class AccessDenied(MemstrataError, PermissionError):
    """Scope or readers forbid this operation (e.g. an unscoped forget)."""

    default_hint = "call with a scope or key that may do this"


class Unauthenticated(AccessDenied):
    """The request carries no API key, or one that is unknown or revoked."""

    default_hint = "send a valid API key (Authorization: Bearer <key>)"


class RateLimited(MemstrataError):
    """The key sent more requests than its rate allows; ``details['retry_after']`` is the
    number of seconds to wait."""

    default_hint = "wait the seconds in retry_after, then retry"


class ConfigError(MemstrataError):
    """Configuration, URL or environment cannot be used."""

    default_hint = ("check the store URL, the environment and the installed extras "
                    "(memstrata doctor)")


class BackendError(MemstrataError):
    """The storage backend failed; the transaction was rolled back."""

    default_hint = "retry; if it persists, check the store with memstrata doctor"


class ProviderError(MemstrataError):
    """An embedding or LLM provider failed or returned unusable output."""

    default_hint = "check the provider's settings and that it is reachable, then retry"


class ActivationRefused(MemstrataError):
    """A procedure version was not activated because eval cases failed."""

    default_hint = "fix the version until its eval cases pass, then activate it again"


__all__ = [
    "AccessDenied",
    "ActivationRefused",
    "ArgumentError",
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
