"""Retention (DESIGN §8): expire what has outlived its time.

``sweep(db, clock, facts, episodes, scratch)`` visits every tenant (``db.tenants()``) in a
maintenance transaction: facts past ``expires_at`` are recorded ``expired`` (they stay in
history), episodes past ``expires_at`` are deleted (with their index entries, by trigger),
and scratch entries past their TTL are deleted: in the same transaction when scratch lives
in the database, else (Redis) after every tenant's transaction committed. Each tenant is
all or nothing. A failure after a tenant was swept raises a BackendError that says what
was done (``details["done"]``: the tenants swept and the counts; a second sweep finishes
the job); one before any commit raises as it is (nothing changed). After deletions the
backend compacts, so the expired text leaves the files, and a vector index with files of
its own scrubs the deleted vectors from them; a failure of either is logged, never raised
over the committed sweep, and redone by the next one. Each layer changes its
own table; this module only composes them. Returns the counts per layer.
"""

from __future__ import annotations

import logging

from ..clock import Clock
from ..errors import BackendError, MemstrataError
from ..store.base import Database, ScratchStore, VectorIndex
from .episodes import Episodes
from .facts import Facts


def sweep(db: Database, clock: Clock, facts: Facts, episodes: Episodes,
          scratch: ScratchStore, vectors: VectorIndex | None = None) -> dict[str, int]:
    """Expire scratch by TTL, facts and episodes by ``expires_at``."""
    now = clock.now()
    out = {"scratch": 0, "facts": 0, "episodes": 0}
    in_db = scratch if scratch.transactional else None
    swept: list[str] = []
    try:
        for tenant in db.tenants():
            with db.transaction(tenant, maintenance=True) as tx:
                counts = (facts.expire_due(tx, tenant, now),
                          episodes.delete_expired(tx, tenant, now),
                          in_db.sweep_tenant(tenant, now) if in_db else 0)  # a savepoint
            swept.append(tenant)
            out["facts"] += counts[0]
            out["episodes"] += counts[1]
            out["scratch"] += counts[2]
        if in_db is None:
            out["scratch"] = scratch.sweep(now)
    except MemstrataError as exc:
        if not swept:
            raise
        raise BackendError(f"the sweep stopped: {exc}; it had swept tenants "
                           f"{', '.join(swept)} ({out})", hint="run the sweep again to finish",
                           done={"tenants": swept, "counts": dict(out)}) from exc
    if out["episodes"]:
        try:
            for note in db.compact():
                logging.getLogger("memstrata").warning("swept %s, but not compacted: %s",
                                                       out, note)
        except MemstrataError as exc:
            logging.getLogger("memstrata").warning(
                "swept %s, but compaction failed (%s); the next compaction (a later sweep "
                "that deletes, or a forget) rewrites the files", out, exc)
        try:  # the index's own files lose the deleted episodes' vectors now, embedder or not
            if vectors is not None:
                vectors.sync()
            db.sync_vectors()
        except MemstrataError as exc:
            logging.getLogger("memstrata").warning(
                "swept %s, but the vector files were not scrubbed: %s", out, exc)
    return out


__all__ = ["sweep"]
