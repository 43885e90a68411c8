"""Deprecated path, kept for one release: use :mod:`memstrata.governance.injection`.

Only the names in ``memstrata.__all__`` are public; this module re-exports the public
names of :mod:`memstrata.governance.injection` for code written against the old flat layout.
"""

from __future__ import annotations

import warnings

from .governance.injection import *  # noqa: F403
from .governance.injection import __all__ as __all__

_MOVED = "memstrata.injection moved to memstrata.governance.injection"
warnings.warn(_MOVED + "; the old path goes away in the next release", DeprecationWarning,
              stacklevel=2)
