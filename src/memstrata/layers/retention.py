"""Retention (DESIGN §8): expire what has outlived its time.

``sweep(db, clock, facts, episodes, scratch)`` visits every tenant (``db.tenants()``) in a
maintenance transaction: facts past ``expires_at`` are recorded ``expired`` (they stay in
history), episodes past ``expires_at`` are deleted (with their index entries, by trigger),
and scratch entries past their TTL are deleted. After deletions the backend compacts, so
the expired text leaves the files. Each layer changes its own table; this module only
composes them. Returns the counts per layer.
"""

from __future__ import annotations

from ..clock import Clock
from ..store.base import Database, ScratchStore
from .episodes import Episodes
from .facts import Facts


def sweep(db: Database, clock: Clock, facts: Facts, episodes: Episodes,
          scratch: ScratchStore) -> dict[str, int]:
    """Expire scratch by TTL, facts and episodes by ``expires_at``."""
    now = clock.now()
    out = {"scratch": scratch.sweep(now), "facts": 0, "episodes": 0}
    for tenant in db.tenants():
        with db.transaction(tenant, maintenance=True) as tx:
            out["facts"] += facts.expire_due(tx, tenant, now)
            out["episodes"] += episodes.delete_expired(tx, tenant, now)
    if out["episodes"]:
        db.compact()
    return out


__all__ = ["sweep"]
