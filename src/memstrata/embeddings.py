"""Deprecated path, kept for one release: use :mod:`memstrata.providers.embeddings`.

Only the names in ``memstrata.__all__`` are public; this module re-exports the public
names of :mod:`memstrata.providers.embeddings` for code written against the old flat layout.
"""

from __future__ import annotations

import warnings

from .providers.embeddings import *  # noqa: F403
from .providers.embeddings import __all__ as __all__

_MOVED = "memstrata.embeddings moved to memstrata.providers.embeddings"
warnings.warn(_MOVED + "; the old path goes away in the next release", DeprecationWarning,
              stacklevel=2)
