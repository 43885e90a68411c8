"""Run-scoped working memory (DESIGN §2): the scratchpad; the only writer of ``scratch``.

Contract:
- Keys live inside one run of one scope; nothing is shared across runs and nothing is
  ever promoted to durable memory.
- ``write`` returns a receipt (``wrote KEY (N chars)``), never an echo of the value.
  ``read`` is the agent-facing read: the value, or the message ``KEY is not set`` when it
  is missing or expired; the result is a :class:`ScratchRead` (a ``str``) whose ``found``
  tells a stored value from the message. ``get`` returns the value or ``default``.
  ``list`` returns the live keys under a prefix.
- Every entry expires after its TTL (default 24 h; a ``timedelta`` or seconds, measured on
  the injected clock); the run's entries are discarded when the run ends.
- A run that has ended takes no writes (when the scratchpad knows the run log, ``runs=``,
  as ``run.scratch`` does): ``write`` and ``write_many`` to it raise
  :class:`~memstrata.errors.Conflict` and store nothing, on every store. The run log is
  asked before the write and again after it: a write that raced the end is removed
  again, so it never outlives the discard (a failure of that second look is logged, not
  raised: the write itself stands). Reads, lists and deletes still answer (an
  ended run's scratchpad is empty). ``discard`` empties the scratchpad; it does not end
  the run (a session's ``clear`` keeps writing).
- Keys and values are screened: a secret in a value is redacted before it is stored (a
  JSON value string by string, so it stays valid JSON); a key holding one is refused
  (:func:`memstrata.governance.safety.refuse_secret`: a redacted key would merge two).
  ``write_many`` writes several entries all or none; ``items`` reads the entries under a
  prefix in one go.
- Storage is a :class:`~memstrata.store.base.ScratchStore`: this module's
  :class:`SQLScratchStore` by default, Redis (native TTL) when configured
  (:mod:`memstrata.store.redis_scratch`).
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ..calls import checked_calls
from ..clock import Clock
from ..errors import BackendError, Conflict, ValidationError
from ..governance.safety import identifier_arg, redact_secrets, redact_value
from ..inputs import text_arg
from ..models import Scope
from ..scoping import SCOPE_COLUMNS, exact_sql, owned_sql, scope_values
from ..store.base import Database, Row, ScratchStore
from ..store.sql import contains_sql, like_param
from .runs import Runs

log = logging.getLogger("memstrata.scratch")
DEFAULT_TTL = timedelta(hours=24)
#: The longest a scratch entry may live (an expiry time must stay a valid date).
MAX_TTL = timedelta(days=36_500)
MAX_VALUE = 200_000
MAX_KEY = 200


_TTL_HINT = f"e.g. ttl=3600 or timedelta(hours=1), at most {MAX_TTL.days} days"


def ttl_arg(ttl: Any, field: str = "ttl") -> timedelta:
    """A positive ``timedelta``, or a positive number of seconds."""
    if isinstance(ttl, timedelta):
        value = ttl
    elif isinstance(ttl, int | float) and not isinstance(ttl, bool):
        try:
            value = timedelta(seconds=float(ttl))
        except (ValueError, OverflowError):  # NaN, infinity, beyond a timedelta
            raise ValidationError(f"{field} must be a finite number of seconds, got {ttl!r}",
                                  hint=_TTL_HINT) from None
    else:
        raise ValidationError(f"{field} must be a timedelta or a number of seconds, got "
                              f"{type(ttl).__name__}", hint=_TTL_HINT)
    if value <= timedelta(0):
        raise ValidationError(f"{field} must be positive, got {value}",
                              hint=_TTL_HINT)
    if value > MAX_TTL:
        raise ValidationError(f"{field} must be at most {MAX_TTL.days} days, got {value}",
                              hint=_TTL_HINT)
    return value


class ScratchRead(str):
    """What ``read`` returns: the value, or ``KEY is not set``; ``found`` tells which."""

    found: bool
    value: str | None

    def __new__(cls, text: str, *, found: bool, value: str | None) -> ScratchRead:
        out = super().__new__(cls, text)
        out.found = found
        out.value = value
        return out


class SQLScratchStore:
    """Scratch entries in the main database (the embedded default)."""

    table = "scratch"
    #: Entries live in the database: a forget deletes them in its own transaction.
    transactional = True

    def __init__(self, db: Database) -> None:
        self._db = db

    def put(self, scope: Scope, run_id: str, key: str, value: str, now: datetime,
            expires_at: datetime) -> None:
        self.put_many(scope, run_id, [(key, value)], now, expires_at)

    def put_many(self, scope: Scope, run_id: str, items: Sequence[tuple[str, str]],
                 now: datetime, expires_at: datetime) -> None:
        with self._db.transaction(scope.tenant) as tx:
            tx.executemany(
                f"INSERT INTO scratch ({SCOPE_COLUMNS}, run_id, key, value, written_at, "
                "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant, scope_key, run_id, key) DO UPDATE SET "
                "value = excluded.value, written_at = excluded.written_at, "
                "expires_at = excluded.expires_at",
                [(*scope_values(scope), run_id, key, value, now, expires_at)
                 for key, value in items],
            )

    def get(self, scope: Scope, run_id: str, key: str, now: datetime) -> str | None:
        with self._db.transaction(scope.tenant, write=False) as tx:
            row = tx.one("SELECT value FROM scratch WHERE tenant = ? AND run_id = ? AND key = ? "
                         "AND scope_key = ? AND expires_at > ?",
                         (scope.tenant, run_id, key, scope.key, now))
        return None if row is None else str(row["value"])

    def keys(self, scope: Scope, run_id: str, prefix: str, now: datetime) -> list[str]:
        return [r["key"] for r in self._live(scope, run_id, prefix, now, "key")]

    def entries(self, scope: Scope, run_id: str, prefix: str,
                now: datetime) -> list[tuple[str, str]]:
        return [(r["key"], str(r["value"]))
                for r in self._live(scope, run_id, prefix, now, "key, value")]

    def _live(self, scope: Scope, run_id: str, prefix: str, now: datetime,
              columns: str) -> list[Row]:
        """The run's unexpired entries whose key starts with ``prefix``, by key."""
        with self._db.transaction(scope.tenant, write=False) as tx:
            return tx.all(f"SELECT {columns} FROM scratch WHERE tenant = ? AND run_id = ? AND "
                          "scope_key = ? AND expires_at > ? AND substr(key, 1, ?) = ? "
                          "ORDER BY key", (scope.tenant, run_id, scope.key, now, len(prefix),
                                           prefix))

    def delete(self, scope: Scope, run_id: str, key: str) -> bool:
        with self._db.transaction(scope.tenant) as tx:
            return tx.execute("DELETE FROM scratch WHERE tenant = ? AND run_id = ? AND key = ? "
                              "AND scope_key = ?", (scope.tenant, run_id, key, scope.key)) > 0

    def discard(self, scope: Scope, run_id: str) -> int:
        with self._db.transaction(scope.tenant) as tx:
            return tx.execute("DELETE FROM scratch WHERE tenant = ? AND run_id = ? AND "
                              "scope_key = ?", (scope.tenant, run_id, scope.key))

    def sweep(self, now: datetime) -> int:
        return sum(self.sweep_tenant(tenant, now) for tenant in self._db.tenants())

    def sweep_tenant(self, tenant: str, now: datetime) -> int:
        """Delete the tenant's expired entries (inside the caller's transaction when one is
        open: retention sweeps a tenant's scratch with its records, all or nothing)."""
        with self._db.transaction(tenant) as tx:
            return tx.execute("DELETE FROM scratch WHERE tenant = ? AND expires_at <= ?",
                              (tenant, now))

    def forget(self, scope: Scope, match: str | None, *, dry_run: bool = False,
               exact: bool = False) -> int:
        where, params = exact_sql(scope) if exact else owned_sql(scope)
        if match is not None:
            where += f" AND ({contains_sql('r.value')} OR {contains_sql('r.key')})"
            params += [like_param(match), like_param(match)]
        with self._db.transaction(scope.tenant) as tx:
            if dry_run:
                row = tx.one(f"SELECT count(*) AS n FROM scratch AS r WHERE {where}", params)
                return int(row["n"]) if row else 0
            return tx.execute(f"DELETE FROM scratch AS r WHERE {where}", params)

    def close(self) -> None:
        """Nothing to release: the database is closed by its owner."""


def _prefix(prefix: Any) -> str:
    if not isinstance(prefix, str) or "\x00" in prefix or len(prefix) > MAX_KEY:
        raise ValidationError(f"prefix must be a string of at most {MAX_KEY} characters",
                              hint="a key prefix, e.g. 'search/'; '' lists every key")
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("prefix is not valid UTF-8 (lone surrogate)",
                              hint="pass the prefix as text that encodes to UTF-8") from None
    return prefix


@checked_calls
class Scratch:
    """The scratchpad of one run; reached as ``run.scratch``."""

    def __init__(self, store: ScratchStore, clock: Clock, scope: Scope, run_id: str,
                 ttl: timedelta | float = DEFAULT_TTL, *, runs: Runs | None = None) -> None:
        self._store = store
        self._clock = clock
        self.scope = scope
        self.run_id = run_id
        self.ttl = ttl_arg(ttl)
        #: The run log asked whether the run has ended (None: a scratchpad of no run).
        self._runs = runs

    def _refuse_if_ended(self, keys: Sequence[str]) -> None:
        """Conflict when the run has ended; ``keys`` (just written) are removed first."""
        if self._runs is None or not self._runs.ended(self.scope, self.run_id):
            return
        for key in keys:
            self._store.delete(self.scope, self.run_id, key)
        raise Conflict(f"run {self.run_id!r} has ended: its scratchpad takes no more writes; "
                       "nothing was written",
                       hint="scratch holds values only while its run is open: write inside "
                            "the run (with mem.run(...) as run), or open a new run")

    def _put(self, entries: Sequence[tuple[str, str]], life: timedelta) -> None:
        """Write ``entries`` if the run is open (asked again after: see the docstring)."""
        self._refuse_if_ended(())
        now = self._clock.now()
        self._store.put_many(self.scope, self.run_id, entries, now, now + life)
        try:
            self._refuse_if_ended([key for key, _ in entries])
        except BackendError:
            # the write committed while the run was open; only the look for a race with
            # its end failed, and a failure must not report a stored write as refused
            log.warning("scratch: could not check run %r again after a write", self.run_id)

    @staticmethod
    def _key(key: Any) -> str:
        return identifier_arg(key, "key", max_len=MAX_KEY)

    def write(self, key: str, value: Any, *, ttl: timedelta | float | None = None) -> str:
        """Store ``value`` under ``key`` for this run; returns a receipt, not the value."""
        key, text = self._entry(key, value)
        life = self.ttl if ttl is None else ttl_arg(ttl)
        self._put([(key, text)], life)
        return f"wrote {key} ({len(text)} chars)"

    def write_many(self, values: Sequence[tuple[str, Any]], *,
                   ttl: timedelta | float | None = None) -> int:
        """Store several ``(key, value)`` pairs at once: every one is checked and screened
        first, then all are written or none. Returns how many."""
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise ValidationError("write_many takes a list of (key, value) pairs")
        entries = []
        for n, pair in enumerate(values):
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise ValidationError(f"entry {n} is not a (key, value) pair",
                                      hint="nothing was written")
            entries.append(self._entry(*pair))
        life = self.ttl if ttl is None else ttl_arg(ttl)
        if entries:
            self._put(entries, life)
        return len(entries)

    def _entry(self, key: Any, value: Any) -> tuple[str, str]:
        """The checked key and the screened text of one entry (a JSON value is redacted
        string by string, so it stays valid JSON)."""
        key = self._key(key)
        if isinstance(value, str):
            text = redact_secrets(text_arg(value, "value", max_len=MAX_VALUE,
                                           allow_empty=True))[0]
        else:
            try:
                text = json.dumps(redact_value(value), sort_keys=True, ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                raise ValidationError(f"scratch value for {key!r} is not text or JSON",
                                      hint="nothing was written") from exc
            text = text_arg(text, "value", max_len=MAX_VALUE, allow_empty=True)
        return key, text

    def read(self, key: str) -> ScratchRead:
        """The value, or ``KEY is not set`` when missing or expired (see ``.found``)."""
        key = self._key(key)
        value = self._store.get(self.scope, self.run_id, key, self._clock.now())
        if value is None:
            return ScratchRead(f"{key} is not set", found=False, value=None)
        return ScratchRead(value, found=True, value=value)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value, or ``default`` (None) when missing or expired."""
        value = self._store.get(self.scope, self.run_id, self._key(key), self._clock.now())
        return default if value is None else value

    def list(self, prefix: str = "") -> list[str]:
        """Live keys starting with ``prefix``, sorted."""
        return self._store.keys(self.scope, self.run_id, _prefix(prefix), self._clock.now())

    def items(self, prefix: str = "") -> builtins.list[tuple[str, str]]:
        """(key, value) of the live entries starting with ``prefix``, by key, in one read."""
        return self._store.entries(self.scope, self.run_id, _prefix(prefix),
                                   self._clock.now())

    def delete(self, key: str) -> str:
        """Remove one key; returns the receipt ``deleted KEY`` when this call removed it, else
        ``KEY is not set`` (:meth:`remove`)."""
        key = self._key(key)
        return f"deleted {key}" if self.remove(key) else f"{key} is not set"

    def remove(self, key: str) -> bool:
        """Remove one key; whether this call removed it (the delete is conditional: of
        concurrent removals of one key, exactly one is True)."""
        return self._store.delete(self.scope, self.run_id, self._key(key))

    def discard(self) -> int:
        """Drop every entry of this run; returns how many were dropped."""
        return self._store.discard(self.scope, self.run_id)


__all__ = ["DEFAULT_TTL", "SQLScratchStore", "Scratch", "ScratchRead", "ttl_arg"]
