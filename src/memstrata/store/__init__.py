"""Storage backends: one :class:`~memstrata.store.base.Database` per engine.

The layers (scratch, checkpoints, ledger, episodes, facts, procedures) speak
portable SQL with ``?`` placeholders through :class:`~memstrata.store.base.Tx`;
each backend supplies its schema (with the invariants enforced by the engine:
triggers, partial unique indexes), its lexical search and its vector index.
``open_database(url)`` picks the backend from the URL.
"""

from __future__ import annotations

from .base import Database, Tx, open_database

__all__ = ["Database", "Tx", "open_database"]
