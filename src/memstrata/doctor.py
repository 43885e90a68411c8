"""``memstrata doctor``: re-derive the stored invariants and report what is broken.

Checks: the engine's own integrity check (SQLite ``integrity_check`` and the
FTS5 integrity check), that full-text rows match base rows, one current fact
per slot, no orphan history (supersession links that point nowhere or that
disagree with each other), no orphan vectors, and no scratch entry past its
expiry that a sweep should have removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .memory import Memory


def verify(mem: Memory) -> list[str]:
    problems = list(mem.db.verify())
    # A backend with row-level security (PostgreSQL) shows one tenant per transaction.
    tenants = getattr(mem.db, "tenants", None)
    for tenant in tenants() if tenants is not None else [mem.rt.default_tenant]:
        problems += _verify_tenant(mem, tenant)
    return problems


def _verify_tenant(mem: Memory, tenant: str) -> list[str]:
    problems: list[str] = []
    with mem.db.transaction(tenant, write=False) as tx:
        for row in tx.all(
            "SELECT tenant, scope_key, subject, attribute, count(*) AS n FROM facts "
            "WHERE status = 'active' GROUP BY tenant, scope_key, subject, attribute "
            "HAVING count(*) > 1"
        ):
            problems.append(f"{row['n']} active facts in one slot: {row['tenant']} "
                            f"{row['scope_key']} {row['subject']}/{row['attribute']}")
        for row in tx.all(
            "SELECT f.tenant, f.id, f.superseded_by FROM facts f WHERE f.superseded_by IS NOT "
            "NULL AND NOT EXISTS (SELECT 1 FROM facts g WHERE g.tenant = f.tenant AND "
            "g.id = f.superseded_by)"
        ):
            problems.append(f"orphan history: fact {row['id']} superseded by missing "
                            f"{row['superseded_by']}")
        for row in tx.all(
            "SELECT f.tenant, f.id, f.supersedes FROM facts f WHERE f.supersedes IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM facts g WHERE g.tenant = f.tenant AND "
            "g.id = f.supersedes AND g.superseded_by = f.id)"
        ):
            problems.append(f"orphan history: fact {row['id']} supersedes {row['supersedes']}, "
                            "which is missing or does not point back")
        for row in tx.all(
            "SELECT e.id, e.supersedes FROM episodes e WHERE e.supersedes IS NOT NULL AND NOT "
            "EXISTS (SELECT 1 FROM episodes g WHERE g.tenant = e.tenant AND g.id = e.supersedes)"
        ):
            problems.append(f"orphan history: episode {row['id']} supersedes missing "
                            f"{row['supersedes']}")
        orphan_vectors = tx.one(
            "SELECT count(*) AS n FROM vectors v WHERE NOT EXISTS (SELECT 1 FROM facts f WHERE "
            "f.tenant = v.tenant AND f.id = v.record_id) AND NOT EXISTS (SELECT 1 FROM episodes e "
            "WHERE e.tenant = v.tenant AND e.id = v.record_id)"
        )
        if orphan_vectors and orphan_vectors["n"]:
            problems.append(f"{orphan_vectors['n']} vectors belong to no record")
    return problems


__all__ = ["verify"]
