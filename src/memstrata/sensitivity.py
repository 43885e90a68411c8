"""Deprecated path, kept for one release: use :mod:`memstrata.governance.sensitivity`.

Only the names in ``memstrata.__all__`` are public; this module re-exports the public
names of :mod:`memstrata.governance.sensitivity` for code written against the old flat layout.
"""

from __future__ import annotations

import warnings

from .governance.sensitivity import *  # noqa: F403
from .governance.sensitivity import __all__ as __all__

_MOVED = "memstrata.sensitivity moved to memstrata.governance.sensitivity"
warnings.warn(_MOVED + "; the old path goes away in the next release", DeprecationWarning,
              stacklevel=2)
