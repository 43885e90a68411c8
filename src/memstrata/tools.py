"""Deprecated path, kept for one release: use :mod:`memstrata.interfaces.tools` (the
dispatcher and the tool list) and :mod:`memstrata.interfaces.tool_schemas` (the
function-calling schemas).

Only the names in ``memstrata.__all__`` are public; this module re-exports the public
names of both for code written against the old flat layout.
"""

from __future__ import annotations

import warnings

from .interfaces import tool_schemas, tools
from .interfaces.tool_schemas import *  # noqa: F403
from .interfaces.tools import *  # noqa: F403

__all__ = sorted({*tools.__all__, *tool_schemas.__all__})

_MOVED = "memstrata.tools moved to memstrata.interfaces.tools"
warnings.warn(_MOVED + "; the old path goes away in the next release", DeprecationWarning,
              stacklevel=2)
