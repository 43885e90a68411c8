"""Scope and readers filters as SQL, used by every read and destructive path.

Two relations between a record's scope and a request's scope:
- *applies*: same tenant and each set field of the record equals the
  request's (DESIGN §4). Reads use it: a user-level preference follows the
  user into every project; an (alice, docs-site) fact reaches neither bob nor
  alice's other projects.
- *owned*: same tenant and the record's fields equal every field the request
  names. Forget and exports use it: forgetting alice's data never touches a
  tenant-wide record that other users rely on.

Readers: a record with ``readers`` set is visible only to those principals;
the principal of a request defaults to its user.

By-id calls name their caller with :func:`resolve_caller`: a scope (the record must apply
to it and be readable) or, without one, the operator of a tenant.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from .errors import ValidationError
from .inputs import name_arg
from .models import Scope, make_scope

_FIELDS = (("s_user", "user"), ("s_project", "project"), ("s_agent", "agent"))


def applies_sql(scope: Scope, alias: str = "r") -> tuple[str, list[Any]]:
    """WHERE fragment selecting rows whose scope applies to ``scope``."""
    parts = [f"{alias}.tenant = ?"]
    params: list[Any] = [scope.tenant]
    for col, attr in _FIELDS:
        value = getattr(scope, attr)
        if value is None:
            parts.append(f"{alias}.{col} IS NULL")
        else:
            parts.append(f"({alias}.{col} IS NULL OR {alias}.{col} = ?)")
            params.append(value)
    return " AND ".join(parts), params


def owned_sql(scope: Scope, alias: str = "r") -> tuple[str, list[Any]]:
    """WHERE fragment selecting rows inside ``scope`` (for forget/export)."""
    parts = [f"{alias}.tenant = ?"]
    params: list[Any] = [scope.tenant]
    for col, attr in _FIELDS:
        value = getattr(scope, attr)
        if value is not None:
            parts.append(f"{alias}.{col} = ?")
            params.append(value)
    return " AND ".join(parts), params


def exact_sql(scope: Scope, alias: str = "r") -> tuple[str, list[Any]]:
    """WHERE fragment selecting rows of exactly this scope."""
    p = f"{alias}." if alias else ""
    return f"{p}tenant = ? AND {p}scope_key = ?", [scope.tenant, scope.key]


def shared_beyond(record: Scope, caller: Scope) -> bool:
    """Whether a record that applies to ``caller`` applies beyond it too: a field the
    caller's scope sets is open in the record's (a project-wide fact seen by one user of the
    project). Such a record is shared with scopes the caller does not own."""
    return any(getattr(caller, attr) is not None and getattr(record, attr) is None
               for _, attr in _FIELDS)


def scope_values(scope: Scope) -> list[Any]:
    """Values for the leading columns (tenant, s_user, s_project, s_agent, scope_key)."""
    return [scope.tenant, scope.user, scope.project, scope.agent, scope.key]


SCOPE_COLUMNS = "tenant, s_user, s_project, s_agent, scope_key"


def scope_from_row(row: dict[str, Any]) -> Scope:
    """The scope of a stored row (scopes are immutable: one object per distinct scope)."""
    return _scope_of(row["tenant"], row["s_user"], row["s_project"], row["s_agent"])


@functools.lru_cache(maxsize=4096)
def _scope_of(tenant: str, user: str | None, project: str | None, agent: str | None) -> Scope:
    return Scope(tenant=tenant, user=user, project=project, agent=agent)


def principal_of(scope: Scope, principal: str | None) -> str | None:
    """The principal a read is made for: explicit (a valid name), else the scope's user."""
    return name_arg(principal, "principal") if principal is not None else scope.user


def may_read(readers: list[str] | None, principal: str | None) -> bool:
    """Whether ``principal`` may read a record with these ``readers``: the Python twin of
    the engines' ``readers_clause`` (None: anyone in its scope; a request without a
    principal reads no restricted record)."""
    return readers is None or (principal is not None and principal in readers)


def writer_of(scope: Scope, principal: str | None = None) -> str | None:
    """Who makes a write in ``scope``: ``principal`` (an agent's), else the scope's user;
    None for the tenant's operator (neither), who may reach every record of the scope (as
    by-id calls without a scope do)."""
    return principal if principal is not None else scope.user


def hidden_from_writer(readers: list[str] | None, scope: Scope,
                       principal: str | None = None) -> bool:
    """Whether a write in ``scope`` (by :func:`writer_of`) may not see, match or replace a
    record with these ``readers``."""
    writer = writer_of(scope, principal)
    return writer is not None and not may_read(readers, writer)


def resolve_caller(scope: Scope | dict[str, Any] | None, tenant: str | None,
                   default_tenant: str) -> tuple[str, Scope | None]:
    """Who makes a by-id call: ``(tenant, scope)``.

    With a scope, the record must apply to it and be readable by its principal, else the
    call raises NotFound (no existence leak). Without one, the call is the operator's:
    every record of the tenant (``tenant=``, else the store's default tenant).
    """
    if scope is not None:
        sc = make_scope(scope)
        if tenant is not None and tenant != sc.tenant:
            raise ValidationError(f"tenant={tenant!r} contradicts the scope's tenant "
                                  f"{sc.tenant!r}", hint="pass one of them")
        return sc.tenant, sc
    return name_arg(tenant, "tenant") or default_tenant, None


def dump_readers(readers: list[str] | None) -> str | None:
    return None if readers is None else json.dumps(sorted(readers))


def load_json_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(v) for v in json.loads(value)]


__all__ = [
    "SCOPE_COLUMNS",
    "applies_sql",
    "dump_readers",
    "exact_sql",
    "load_json_list",
    "owned_sql",
    "principal_of",
    "resolve_caller",
    "scope_from_row",
    "scope_values",
]

