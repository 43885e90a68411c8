"""Run-scoped working memory (DESIGN §2): the scratchpad.

Contract:
- Keys live inside one run of one scope; nothing is shared across runs and
  nothing is ever promoted to durable memory.
- ``write`` returns a receipt (``wrote KEY (N chars)``), never an echo of the
  value; ``read`` of a missing or expired key returns ``KEY is not set``;
  ``list`` returns the live keys under a prefix.
- Every entry expires after its TTL (default 24 h, measured on the injected
  clock); the run's entries are discarded when the run ends.
- Values are screened: secrets are redacted before they are stored.
- Storage is a :class:`ScratchStore`: SQL by default, Redis (native TTL) when
  configured (:mod:`memstrata.store.redis_scratch`).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, Protocol

from .errors import ValidationError
from .models import Scope, clean_text
from .runtime import Runtime
from .scoping import SCOPE_COLUMNS, contains_sql, like_param, owned_sql, scope_values

DEFAULT_TTL = timedelta(hours=24)
MAX_VALUE = 200_000


class ScratchStore(Protocol):
    """Where scratch entries live."""

    def put(self, scope: Scope, run_id: str, key: str, value: str, now: datetime,
            expires_at: datetime) -> None: ...

    def get(self, scope: Scope, run_id: str, key: str, now: datetime) -> str | None: ...

    def keys(self, scope: Scope, run_id: str, prefix: str, now: datetime) -> list[str]: ...

    def delete(self, scope: Scope, run_id: str, key: str) -> bool: ...

    def discard(self, scope: Scope, run_id: str) -> int: ...

    def sweep(self, now: datetime) -> int: ...

    def forget(self, scope: Scope, match: str | None) -> int:
        """Delete entries owned by ``scope`` (whose key or value contains ``match``)."""
        ...


class SQLScratchStore:
    """Scratch entries in the main database (the embedded default)."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def put(self, scope: Scope, run_id: str, key: str, value: str, now: datetime,
            expires_at: datetime) -> None:
        with self._rt.db.transaction(scope.tenant) as tx:
            tx.execute(
                f"INSERT INTO scratch ({SCOPE_COLUMNS}, run_id, key, value, written_at, "
                "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant, run_id, key) DO UPDATE SET value = excluded.value, "
                "written_at = excluded.written_at, expires_at = excluded.expires_at",
                (*scope_values(scope), run_id, key, value, now, expires_at),
            )

    def get(self, scope: Scope, run_id: str, key: str, now: datetime) -> str | None:
        with self._rt.db.transaction(scope.tenant, write=False) as tx:
            row = tx.one("SELECT value FROM scratch WHERE tenant = ? AND run_id = ? AND key = ? "
                         "AND scope_key = ? AND expires_at > ?",
                         (scope.tenant, run_id, key, scope.key, now))
        return None if row is None else str(row["value"])

    def keys(self, scope: Scope, run_id: str, prefix: str, now: datetime) -> list[str]:
        with self._rt.db.transaction(scope.tenant, write=False) as tx:
            rows = tx.all("SELECT key FROM scratch WHERE tenant = ? AND run_id = ? AND "
                          "scope_key = ? AND expires_at > ? AND substr(key, 1, ?) = ? "
                          "ORDER BY key", (scope.tenant, run_id, scope.key, now, len(prefix),
                                           prefix))
        return [r["key"] for r in rows]

    def delete(self, scope: Scope, run_id: str, key: str) -> bool:
        with self._rt.db.transaction(scope.tenant) as tx:
            return tx.execute("DELETE FROM scratch WHERE tenant = ? AND run_id = ? AND key = ? "
                              "AND scope_key = ?", (scope.tenant, run_id, key, scope.key)) > 0

    def discard(self, scope: Scope, run_id: str) -> int:
        with self._rt.db.transaction(scope.tenant) as tx:
            return tx.execute("DELETE FROM scratch WHERE tenant = ? AND run_id = ?",
                              (scope.tenant, run_id))

    def sweep(self, now: datetime) -> int:
        # A backend with row-level security (PostgreSQL) shows one tenant per transaction.
        tenants = getattr(self._rt.db, "tenants", None)
        removed = 0
        for tenant in tenants() if tenants is not None else [self._rt.default_tenant]:
            with self._rt.db.transaction(tenant) as tx:
                removed += tx.execute("DELETE FROM scratch WHERE expires_at <= ?", (now,))
        return removed

    def forget(self, scope: Scope, match: str | None) -> int:
        where, params = owned_sql(scope, "scratch")
        if match is not None:
            where += (f" AND ({contains_sql('scratch.value')} OR "
                      f"{contains_sql('scratch.key')})")
            params += [like_param(match), like_param(match)]
        with self._rt.db.transaction(scope.tenant) as tx:
            return tx.execute(f"DELETE FROM scratch WHERE {where}", params)


class Scratch:
    """The scratchpad of one run; reached as ``run.scratch``."""

    def __init__(self, store: ScratchStore, rt: Runtime, scope: Scope, run_id: str,
                 ttl: timedelta = DEFAULT_TTL) -> None:
        self._store = store
        self._rt = rt
        self.scope = scope
        self.run_id = run_id
        self.ttl = ttl

    @staticmethod
    def _key(key: Any) -> str:
        try:
            return clean_text(key, field="key", max_len=200)
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc

    def write(self, key: str, value: Any, *, ttl: timedelta | None = None) -> str:
        """Store ``value`` under ``key`` for this run; returns a receipt, not the value."""
        from .safety import redact_secrets

        key = self._key(key)
        if not isinstance(value, str):
            try:
                value = json.dumps(value, sort_keys=True)
            except (TypeError, ValueError) as exc:
                raise ValidationError(f"scratch value for {key!r} is not text or JSON") from exc
        try:
            value = clean_text(value, field="value", max_len=MAX_VALUE, allow_empty=True)
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc
        value, _ = redact_secrets(value)
        now = self._rt.clock.now()
        self._store.put(self.scope, self.run_id, key, value, now, now + (ttl or self.ttl))
        return f"wrote {key} ({len(value)} chars)"

    def read(self, key: str) -> str:
        """The value, or ``KEY is not set`` when missing or expired."""
        key = self._key(key)
        value = self._store.get(self.scope, self.run_id, key, self._rt.clock.now())
        return f"{key} is not set" if value is None else value

    def get(self, key: str) -> str | None:
        """The value or None (for code that prefers None to the message)."""
        return self._store.get(self.scope, self.run_id, self._key(key), self._rt.clock.now())

    def list(self, prefix: str = "") -> list[str]:
        if not isinstance(prefix, str):
            raise ValidationError("prefix must be a string")
        return self._store.keys(self.scope, self.run_id, prefix, self._rt.clock.now())

    def delete(self, key: str) -> str:
        removed = self._store.delete(self.scope, self.run_id, self._key(key))
        return f"deleted {key}" if removed else f"{key} is not set"

    def discard(self) -> int:
        """Drop every entry of this run; returns how many were dropped."""
        return self._store.discard(self.scope, self.run_id)


__all__ = ["DEFAULT_TTL", "SQLScratchStore", "Scratch", "ScratchStore"]
