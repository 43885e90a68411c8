"""The SQLite driver of the embedded backend: the one place it is imported.

memstrata runs SQLite through sqlean.py (``sqlean-py``, a drop-in build of the standard
``sqlite3`` module with a current SQLite, 3.50 at the time of writing), not through the
interpreter's own ``sqlite3``, whose SQLite is whatever the platform links (3.40 on Debian
bookworm). The reason is forgetting: FTS5's ``secure-delete`` option (SQLite 3.43+)
removes a deleted row's terms from the full-text index in place, so a forget scrubs the
index in time proportional to the forgotten record instead of rewriting the whole index
(``optimize``). A store whose full-text tables were written this way cannot be read by a
SQLite older than 3.43; read it with this module (``from memstrata.store.sqlite_driver
import sqlite3``).

Type checkers see the standard library's module, whose API sqlean.py mirrors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3
else:
    import sqlean as sqlite3

#: The SQLite library version the driver runs (``"3.50.4"``); 3.43 at least.
SQLITE_VERSION: str = sqlite3.sqlite_version

__all__ = ["SQLITE_VERSION", "sqlite3"]
