"""API keys of ``memstrata serve``: who may call, in which tenant, as which role; the only
writer of ``api_keys``.

Contract:
- A key is shown once, at creation: ``msk.<tenant>.<id>.<secret>`` (the tenant is
  base64url-encoded, the secret 32 random bytes). Only the SHA-256 of the secret is
  stored (the secret is random, so a slow hash adds nothing); checking compares digests
  in constant time.
- A key is bound to one tenant, a role (:data:`ROLES`, each including the one before:
  ``agent`` < ``reviewer`` < ``admin``), optionally to lists of users, projects and
  agents, a principal (the reader name restricted records are checked against), the
  actor its writes are attributed to, and a rate (requests per minute; ``None``: the
  server's default).
- :meth:`KeyStore.authenticate` reads the key row inside a transaction of the key's own
  tenant, so on PostgreSQL the lookup itself runs under that tenant's row-level security
  (the table is FORCEd like every tenant table): no key can see another tenant's keys.
  Unknown, malformed and revoked keys all raise :class:`~memstrata.errors.Unauthenticated`
  with the same message (no oracle).
- :meth:`ApiKey.scope_for` is the only place a request's scope is made: from the key,
  narrowed by the request's ``X-Memstrata-User``/``-Project``/``-Agent`` headers only
  within the key's lists; a name outside them, or another tenant, is refused
  (:class:`~memstrata.errors.AccessDenied`).
- A key bound to users, projects or agents manages keys only within them
  (:meth:`ApiKey.reaches`, :meth:`ApiKey.check_mint`): an admin key of alice creates keys
  bound to alice (reading as alice or as its own principal), and lists and revokes only
  those; another key is not found for it. An unbound admin key manages the tenant's.
- Revoking is immediate (the next request is refused) and kept: a revoked key's row stays,
  with ``revoked_at``, so ``keys list`` shows what existed.
- :meth:`KeyStore.revoke_labelled` revokes the active keys of a label in every tenant that
  holds keys (:meth:`KeyStore.tenants`), each in its own tenant's transaction: what
  ``serve`` does with the earlier startup keys at each start.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import hashlib
import hmac
import json
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ...clock import Clock, from_text
from ...errors import AccessDenied, NotFound, Unauthenticated, ValidationError
from ...governance.safety import refuse_secret, screened_arg
from ...ids import new_id
from ...inputs import NAME_HINT, check_name, int_arg
from ...models import Scope
from ...store.base import Database, Row

Role = Literal["agent", "reviewer", "admin"]
#: Roles in order: each may do everything the ones before it may.
ROLES: tuple[Role, ...] = ("agent", "reviewer", "admin")
#: Actors a key's writes may be attributed to.
KEY_ACTORS = ("agent", "user", "tool", "system", "import")
PREFIX = "msk"
_BAD_KEY = "the API key is unknown, malformed or revoked"
_BAD_HINT = ("send 'Authorization: Bearer msk....'; an admin creates keys with "
             "`memstrata keys create`")
_COLUMNS = ("tenant, id, secret_hash, role, users, projects, agents, principal, actor, label, "
            "rate_per_minute, created_at, revoked_at")


def role_at_least(role: str, needed: str) -> bool:
    """May a key of ``role`` do what ``needed`` may?"""
    return ROLES.index(role) >= ROLES.index(needed)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _names(values: Sequence[str] | None, field: str) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise ValidationError(f"{field} must be a list of names", hint="e.g. ['alice']")
    out = []
    for v in values:
        try:
            name = check_name(v, field)
        except ValueError as exc:
            raise ValidationError(str(exc), hint=NAME_HINT
                                  ) from None
        if name is not None and name not in out:
            out.append(name)
    if not out:
        raise ValidationError(f"{field} is empty", hint=f"leave {field} out to allow any")
    return out


class ApiKey(BaseModel):
    """One key as stored (never its secret)."""

    model_config = ConfigDict(frozen=True)

    id: str
    tenant: str
    role: Role
    users: list[str] | None = None
    projects: list[str] | None = None
    agents: list[str] | None = None
    principal: str | None = None
    actor: str = "agent"
    label: str | None = None
    rate_per_minute: int | None = None
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def may(self, needed: str) -> bool:
        """Does this key's role include ``needed``?"""
        return role_at_least(self.role, needed)

    def scope_for(self, *, tenant: str | None = None, user: str | None = None,
                  project: str | None = None, agent: str | None = None) -> Scope:
        """The scope of a request made with this key (see the module docstring)."""
        if tenant is not None and tenant != self.tenant:
            raise AccessDenied(f"this key belongs to tenant {self.tenant!r}; it cannot act in "
                               f"{tenant!r}", hint="use a key of that tenant")
        fields = {}
        for name, asked, allowed in (("user", user, self.users),
                                     ("project", project, self.projects),
                                     ("agent", agent, self.agents)):
            if asked is None:
                fields[name] = allowed[0] if allowed is not None and len(allowed) == 1 else None
                if allowed is not None and len(allowed) > 1:
                    raise AccessDenied(f"this key may act for several {name}s; name one",
                                       hint=f"send X-Memstrata-{name.capitalize()}: one of "
                                            f"{', '.join(allowed)}")
            elif allowed is not None and asked not in allowed:
                raise AccessDenied(f"this key may not act for {name} {asked!r}",
                                   hint=f"it may act for: {', '.join(allowed)}")
            else:
                fields[name] = asked
        try:
            return Scope(tenant=self.tenant, **fields)
        except ValueError as exc:
            raise ValidationError(f"bad scope header: {exc}",
                                  hint=NAME_HINT) from None

    @property
    def bound(self) -> bool:
        """Whether the key is bound to some users, projects or agents."""
        return any(v is not None for v in (self.users, self.projects, self.agents))

    def _within(self, users: Sequence[str] | None, projects: Sequence[str] | None,
                agents: Sequence[str] | None) -> str | None:
        """The first of this key's lists that a key bound to these would leave (None: every
        one of them holds it)."""
        for field, mine, theirs in (("users", self.users, users),
                                    ("projects", self.projects, projects),
                                    ("agents", self.agents, agents)):
            if mine is not None and (theirs is None or not set(theirs) <= set(mine)):
                return field
        return None

    def reaches(self, other: ApiKey) -> bool:
        """Whether this key may see and revoke ``other``: it acts only where this one may."""
        return other.tenant == self.tenant and self._within(
            other.users, other.projects, other.agents) is None

    def check_mint(self, users: Sequence[str] | None, projects: Sequence[str] | None,
                   agents: Sequence[str] | None, principal: str | None) -> None:
        """AccessDenied unless a key with these bounds and principal acts only where this
        key may and reads only as it does (a bound key gives no other principal)."""
        field = self._within(users, projects, agents)
        if field is not None:
            allowed = getattr(self, field)
            raise AccessDenied(f"this key may create keys only for its own {field}",
                               hint=f"pass {field} within: {', '.join(allowed)}")
        if self.bound and principal is not None and principal != self.principal:
            raise AccessDenied("this key may not create a key that reads as another "
                               "principal",
                               hint="leave the principal out (the key reads as its user)"
                                    + (f" or pass {self.principal!r}" if self.principal
                                       else ""))

    def summary(self) -> dict[str, Any]:
        """What ``keys list`` shows (JSON-able)."""
        return self.model_dump(mode="json")


def _key_from_row(row: Row) -> ApiKey:
    def listed(raw: Any) -> list[str] | None:
        return None if raw is None else list(json.loads(raw))

    return ApiKey(id=row["id"], tenant=row["tenant"], role=row["role"],
                  users=listed(row["users"]), projects=listed(row["projects"]),
                  agents=listed(row["agents"]), principal=row["principal"],
                  actor=row["actor"], label=row["label"],
                  rate_per_minute=row["rate_per_minute"],
                  created_at=_when(row["created_at"]),
                  revoked_at=None if row["revoked_at"] is None else from_text(row["revoked_at"]))


def _when(raw: Any) -> datetime:
    when = from_text(raw)
    if when is None:
        raise ValidationError("a key row without created_at", hint="run `memstrata doctor`")
    return when


def parse_token(token: str) -> tuple[str, str, str]:
    """``(tenant, key id, secret)`` of a token, or Unauthenticated."""
    parts = token.strip().split(".") if isinstance(token, str) else []
    if len(parts) != 4 or parts[0] != PREFIX:
        raise Unauthenticated(_BAD_KEY, hint=_BAD_HINT)
    try:
        tenant = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)).decode()
        check_name(tenant, "tenant")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise Unauthenticated(_BAD_KEY, hint=_BAD_HINT) from None
    if not tenant or not parts[2].isalnum() or not parts[3]:
        raise Unauthenticated(_BAD_KEY, hint=_BAD_HINT)
    return tenant, parts[2], parts[3]


def make_token(tenant: str, key_id: str, secret: str) -> str:
    encoded = base64.urlsafe_b64encode(tenant.encode()).decode().rstrip("=")
    return f"{PREFIX}.{encoded}.{key_id}.{secret}"


class KeyStore:
    """The API keys of a store, one tenant at a time."""

    table = "api_keys"

    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def create(self, tenant: str, *, role: str = "agent", users: Sequence[str] | None = None,
               projects: Sequence[str] | None = None, agents: Sequence[str] | None = None,
               principal: str | None = None, actor: str | None = None,
               label: str | None = None, rate_per_minute: int | None = None
               ) -> tuple[ApiKey, str]:
        """Create a key; returns it and its token (shown once, never stored)."""
        try:
            tenant_name = check_name(tenant, "tenant")
            principal = check_name(principal, "principal")
        except ValueError as exc:
            raise ValidationError(str(exc), hint=NAME_HINT
                                  ) from None
        if tenant_name is None:
            raise ValidationError("a key needs a tenant", hint="pass --tenant")
        if principal is not None:  # shown in `keys list` and matched as it is
            refuse_secret(principal, "principal")
        if role not in ROLES:
            raise ValidationError(f"role must be one of {', '.join(ROLES)}, not {role!r}",
                                  hint="agent: propose, log, read; reviewer: also review; "
                                       "admin: also keys, forget, procedures")
        actor = actor or ("agent" if role == "agent" else "user")
        if actor not in KEY_ACTORS:
            raise ValidationError(f"actor must be one of {', '.join(KEY_ACTORS)}",
                                  hint="the actor is who this key's writes are attributed to")
        if label is not None:
            label = screened_arg(label, "label", max_len=200)
        if rate_per_minute is not None:
            rate_per_minute = int_arg(rate_per_minute, "rate_per_minute", low=1, high=1_000_000)
        lists = [_names(v, f) for v, f in ((users, "users"), (projects, "projects"),
                                            (agents, "agents"))]
        key_id, secret = new_id().lower(), secrets.token_urlsafe(32)
        now = self._clock.now()
        with self._db.transaction(tenant_name) as tx:
            tx.execute(f"INSERT INTO api_keys ({_COLUMNS}) VALUES "
                       "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                       (tenant_name, key_id, _digest(secret), role,
                        *[None if v is None else json.dumps(v) for v in lists],
                        principal, actor, label, rate_per_minute, now))
        key = ApiKey(id=key_id, tenant=tenant_name, role=role,
                     users=lists[0], projects=lists[1], agents=lists[2], principal=principal,
                     actor=actor, label=label, rate_per_minute=rate_per_minute, created_at=now)
        return key, make_token(tenant_name, key_id, secret)

    def list(self, tenant: str, *, include_revoked: bool = True) -> list[ApiKey]:
        """The tenant's keys, oldest first."""
        with self._db.transaction(tenant, write=False) as tx:
            rows = tx.all(f"SELECT {_COLUMNS} FROM api_keys WHERE tenant = ? ORDER BY created_at, "
                          "id", (tenant,))
        keys = [_key_from_row(r) for r in rows]
        return keys if include_revoked else [k for k in keys if k.active]

    def get(self, tenant: str, key_id: str) -> ApiKey:
        with self._db.transaction(tenant, write=False) as tx:
            row = tx.one(f"SELECT {_COLUMNS} FROM api_keys WHERE tenant = ? AND id = ?",
                         (tenant, key_id))
        if row is None:
            raise NotFound(f"no key {key_id!r} in tenant {tenant!r}",
                           hint="`memstrata keys list` shows the keys")
        return _key_from_row(row)

    def revoke(self, tenant: str, key_id: str) -> ApiKey:
        """Revoke a key now (idempotent); returns it."""
        if not isinstance(key_id, str) or not key_id.isalnum():
            raise ValidationError(f"not a key id: {key_id!r}", hint="`memstrata keys list`")
        with self._db.transaction(tenant) as tx:
            tx.execute("UPDATE api_keys SET revoked_at = ? WHERE tenant = ? AND id = ? AND "
                       "revoked_at IS NULL", (self._clock.now(), tenant, key_id.lower()))
        return self.get(tenant, key_id.lower())

    def tenants(self) -> builtins.list[str]:
        """Every tenant that may hold keys, sorted: the store's registry (on PostgreSQL a
        process's first write of a tenant registers it, a key's included) and, on an
        engine without row security (SQLite registers the tenants of record rows only),
        the tenants the key table names."""
        names = set(self._db.tenants())
        if not self._db.capabilities.tenant_isolation:
            # no tenant hides another's rows here: the transaction's tenant is only a name
            with self._db.transaction(Scope().tenant, write=False) as tx:
                names.update(r["tenant"] for r in tx.all("SELECT DISTINCT tenant FROM "
                                                         "api_keys"))
        return sorted(names)

    def revoke_labelled(self, label: str) -> builtins.list[ApiKey]:
        """Revoke now the active keys with this label in every tenant (:meth:`tenants`),
        each in a transaction of its tenant (row security applies); returns them as they
        were before. ``serve`` revokes the earlier startup keys so, whatever tenant each
        start served."""
        revoked: builtins.list[ApiKey] = []
        for tenant in self.tenants():
            with self._db.transaction(tenant) as tx:
                rows = tx.all(f"SELECT {_COLUMNS} FROM api_keys WHERE tenant = ? AND label = ? "
                              "AND revoked_at IS NULL ORDER BY created_at, id", (tenant, label))
                if rows:
                    tx.execute("UPDATE api_keys SET revoked_at = ? WHERE tenant = ? AND "
                               "label = ? AND revoked_at IS NULL",
                               (self._clock.now(), tenant, label))
            revoked += [_key_from_row(r) for r in rows]
        return revoked

    def authenticate(self, token: str) -> ApiKey:
        """The active key a token names, or Unauthenticated."""
        tenant, key_id, secret = parse_token(token)
        with self._db.transaction(tenant, write=False) as tx:
            row = tx.one(f"SELECT {_COLUMNS} FROM api_keys WHERE tenant = ? AND id = ?",
                         (tenant, key_id))
        if row is None or not hmac.compare_digest(row["secret_hash"], _digest(secret)):
            raise Unauthenticated(_BAD_KEY, hint=_BAD_HINT)
        key = _key_from_row(row)
        if not key.active:
            raise Unauthenticated(_BAD_KEY, hint=_BAD_HINT)
        return key


__all__ = ["KEY_ACTORS", "ROLES", "ApiKey", "KeyStore", "Role", "make_token", "parse_token",
           "role_at_least"]
