"""Deprecated path, kept for one release: use :mod:`memstrata.interfaces.tools`.

Only the names in ``memstrata.__all__`` are public; this module re-exports the public
names of :mod:`memstrata.interfaces.tools` for code written against the old flat layout.
"""

from __future__ import annotations

import warnings

from .interfaces.tools import *  # noqa: F403
from .interfaces.tools import __all__ as __all__

_MOVED = "memstrata.tools moved to memstrata.interfaces.tools"
warnings.warn(_MOVED + "; the old path goes away in the next release", DeprecationWarning,
              stacklevel=2)
