"""Scratch entries in Redis: native TTL, run-scoped keys, prefix scans (never KEYS).

Contract (the :class:`memstrata.store.base.ScratchStore` protocol):
- One Redis string per entry under ``ms:{tenant}:{scope_key}:{run_id}:{key}``; tenant,
  scope key and run id are percent-encoded, so neither ``:`` nor a glob character in them
  can make one run's prefix match another's. The user's key stays readable at the end.
- The value is JSON ``{"v": value, "e": expiry (epoch s), "w": written (epoch s), "u", "p",
  "a": scope fields}``; it is written with ``SET ... EX ttl`` where ttl is
  ``expires_at - now`` (at least one second), so Redis drops it on its own clock. Reads
  also compare ``e`` with the caller's clock (the injectable clock of memstrata), so TTL
  behaves the same as the SQL store in tests and after clock skew.
- ``keys``, ``discard``, ``sweep`` and ``forget`` walk ``SCAN MATCH`` cursors (bounded
  work per call to Redis, never ``KEYS``) and delete with ``UNLINK`` in batches.
- ``forget`` deletes the entries *owned* by the scope (same tenant; every field the
  scope names equal), optionally only those whose key or value contains ``match``
  (case-insensitive), like the SQL store.
- Redis errors become :class:`BackendError`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import redis

from ..errors import BackendError
from ..models import Scope
from .sql import text_contains

_GLOB = str.maketrans({c: "\\" + c for c in "*?[]\\"})
_BATCH = 500


def _part(value: str) -> str:
    return quote(value, safe="")


def _glob(value: str) -> str:
    """``value`` as a literal inside a SCAN MATCH pattern."""
    return value.translate(_GLOB)


class RedisScratchStore:
    """Scratch entries in Redis (selected by ``scratch_url=`` or ``$MEMSTRATA_SCRATCH_URL``)."""

    #: Redis is not the database: a forget deletes its entries after the database commits.
    transactional = False

    def __init__(self, client: redis.Redis, *, namespace: str = "ms") -> None:
        self._r = client
        self._ns = _part(namespace)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisScratchStore:
        """``redis://host:port/db`` (or ``rediss://``, ``unix://``); ``namespace`` option."""
        namespace = options.pop("namespace", "ms")
        options.setdefault("socket_timeout", 10)
        options.setdefault("socket_connect_timeout", 5)
        try:
            client = redis.Redis.from_url(url, **options)
            client.ping()
        except redis.RedisError as exc:
            raise BackendError(f"cannot reach Redis at {_mask(url)}: {exc}",
                               hint="check the URL and that redis-server is running") from exc
        return cls(client, namespace=namespace)

    def close(self) -> None:
        self._r.close()

    # -- keys -----------------------------------------------------------
    def _run_prefix(self, scope: Scope, run_id: str) -> str:
        return f"{self._ns}:{_part(scope.tenant)}:{_part(scope.key)}:{_part(run_id)}:"

    def _name(self, scope: Scope, run_id: str, key: str) -> str:
        return self._run_prefix(scope, run_id) + key

    def _scan(self, pattern: str) -> Iterator[bytes]:
        try:
            yield from self._r.scan_iter(match=pattern, count=_BATCH)
        except redis.RedisError as exc:
            raise BackendError(f"Redis scan failed: {exc}") from exc

    def _entries(self, pattern: str) -> Iterator[tuple[bytes, dict[str, Any]]]:
        """(name, entry) for live keys matching ``pattern``, fetched in batches."""
        batch: list[bytes] = []
        for name in self._scan(pattern):
            batch.append(name)
            if len(batch) >= _BATCH:
                yield from self._fetch(batch)
                batch = []
        if batch:
            yield from self._fetch(batch)

    def _fetch(self, names: list[bytes]) -> Iterator[tuple[bytes, dict[str, Any]]]:
        try:
            values = self._r.mget(names)
        except redis.RedisError as exc:
            raise BackendError(f"Redis read failed: {exc}") from exc
        for name, raw in zip(names, values, strict=True):
            if raw is not None:  # expired between SCAN and MGET
                yield name, json.loads(raw)

    def _unlink(self, names: list[bytes]) -> int:
        removed = 0
        try:
            for start in range(0, len(names), _BATCH):
                removed += int(self._r.unlink(*names[start:start + _BATCH]))
        except redis.RedisError as exc:
            raise BackendError(f"Redis delete failed: {exc}") from exc
        return removed

    # -- the ScratchStore protocol ------------------------------------------
    def put(self, scope: Scope, run_id: str, key: str, value: str, now: datetime,
            expires_at: datetime) -> None:
        self.put_many(scope, run_id, [(key, value)], now, expires_at)

    def put_many(self, scope: Scope, run_id: str, items: Sequence[tuple[str, str]],
                 now: datetime, expires_at: datetime) -> None:
        ttl = max(1, math.ceil((expires_at - now).total_seconds()))
        try:
            pipe = self._r.pipeline(transaction=True)  # MULTI/EXEC: all or none
            for key, value in items:
                entry = {"v": value, "e": expires_at.timestamp(), "w": now.timestamp(),
                         "u": scope.user, "p": scope.project, "a": scope.agent}
                pipe.set(self._name(scope, run_id, key), json.dumps(entry), ex=ttl)
            pipe.execute()
        except redis.RedisError as exc:
            raise BackendError(f"Redis write failed: {exc}") from exc

    def get(self, scope: Scope, run_id: str, key: str, now: datetime) -> str | None:
        try:
            raw = self._r.get(self._name(scope, run_id, key))
        except redis.RedisError as exc:
            raise BackendError(f"Redis read failed: {exc}") from exc
        if raw is None:
            return None
        entry = json.loads(raw)
        return str(entry["v"]) if entry["e"] > now.timestamp() else None

    def keys(self, scope: Scope, run_id: str, prefix: str, now: datetime) -> list[str]:
        return [key for key, _ in self.entries(scope, run_id, prefix, now)]

    def entries(self, scope: Scope, run_id: str, prefix: str,
                now: datetime) -> list[tuple[str, str]]:
        run = self._run_prefix(scope, run_id)
        cut = now.timestamp()
        return sorted((name.decode()[len(run):], str(entry["v"])) for name, entry in
                      self._entries(_glob(run + prefix) + "*") if entry["e"] > cut)

    def delete(self, scope: Scope, run_id: str, key: str) -> bool:
        return self._unlink([self._name(scope, run_id, key).encode()]) > 0

    def discard(self, scope: Scope, run_id: str) -> int:
        return self._unlink(list(self._scan(_glob(self._run_prefix(scope, run_id)) + "*")))

    def sweep(self, now: datetime) -> int:
        """Delete entries past their expiry on the caller's clock (Redis's own TTL removes
        them on the server clock anyway)."""
        return self._sweep(f"{_glob(self._ns)}:*", now)

    def sweep_tenant(self, tenant: str, now: datetime) -> int:
        """:meth:`sweep` for one tenant's entries."""
        return self._sweep(f"{_glob(self._ns)}:{_glob(_part(tenant))}:*", now)

    def _sweep(self, pattern: str, now: datetime) -> int:
        cut = now.timestamp()
        return self._unlink([name for name, entry in self._entries(pattern)
                             if entry["e"] <= cut])

    def forget(self, scope: Scope, match: str | None, *, dry_run: bool = False,
               exact: bool = False) -> int:
        """Delete (unless ``dry_run``: count) entries owned by ``scope`` (with ``exact``:
        of exactly ``scope``) whose key or value contains ``match``
        (:func:`~memstrata.store.sql.text_contains`)."""
        tenant_prefix = f"{self._ns}:{_part(scope.tenant)}:"
        doomed: list[bytes] = []
        for name, entry in self._entries(_glob(tenant_prefix) + "*"):
            if any((exact or want is not None) and entry[field] != want for field, want in
                   (("u", scope.user), ("p", scope.project), ("a", scope.agent))):
                continue
            if match is not None:
                key = name.decode().split(":", 4)[4]
                if not (text_contains(key, match) or text_contains(str(entry["v"]), match)):
                    continue
            doomed.append(name)
        return len(doomed) if dry_run else self._unlink(doomed)


def _mask(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(parts.password, "***", 1)))


__all__ = ["RedisScratchStore"]
