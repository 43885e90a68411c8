"""Storage: the backend seam and the engines behind it.

- :mod:`.base`: the protocols only (:class:`Database`, :class:`Tx`, :class:`VectorIndex`,
  :class:`ScratchStore`, :class:`Capabilities`);
- :mod:`.engines`: which engine serves a URL (a registry by scheme, :func:`open_database`);
- :mod:`.sqlite` (+ :mod:`.sqlite_schema`, :mod:`.sqlite_vectors`): the embedded default;
- :mod:`.postgres` (+ :mod:`.pg_schema`, :mod:`.pg_vectors`): PostgreSQL with pgvector;
- :mod:`.redis_scratch`: scratch in Redis; :mod:`.doctor`: invariant checks;
- :mod:`.lexical`, :mod:`.sql`, :mod:`.migrations`: helpers the engines share.

The layers speak portable SQL with ``?`` placeholders through :class:`Tx`; nothing above
this package branches on the engine.
"""

from __future__ import annotations

from .base import Capabilities, Database, ScratchStore, Tx, VectorIndex
from .engines import open_database, register_engine

__all__ = ["Capabilities", "Database", "ScratchStore", "Tx", "VectorIndex", "open_database",
           "register_engine"]
