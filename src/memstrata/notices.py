"""Notices memstrata says once per process, through the ``memstrata`` logger.

Contract: :func:`say_once` logs a warning the first time a key is said and returns whether
it did; :func:`said` tells whether a key was said (a caller may skip the work of deciding
to say it again). One set for the process: the notice that search is lexical only (no
embedder installed) and the notice that records are written without vectors into a store
that has them.
"""

from __future__ import annotations

import logging
from typing import Any

_SAID: set[str] = set()


def said(key: str) -> bool:
    """Whether the notice ``key`` was said in this process."""
    return key in _SAID


def say_once(key: str, message: str, *args: Any) -> bool:
    """Log ``message % args`` as a warning unless ``key`` was said before; returns whether
    it was logged now."""
    if key in _SAID:
        return False
    _SAID.add(key)
    logging.getLogger("memstrata").warning(message, *args)
    return True


__all__ = ["said", "say_once"]
