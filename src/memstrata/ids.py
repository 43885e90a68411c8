"""Sortable identifiers (ULID: 48-bit millisecond time + 80 random bits, Crockford base32).

IDs sort by creation time within a process (monotonic: same-millisecond IDs
increment the random part), so ``ORDER BY id`` is insertion order.
"""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id() -> str:
    """A new 26-character ULID."""
    global _last_ms, _last_rand
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            _last_rand = (_last_rand + 1) & ((1 << 80) - 1)
        else:
            _last_rand = int.from_bytes(os.urandom(10), "big")
        _last_ms = ms
        return _encode(ms, 10) + _encode(_last_rand, 16)


def is_id(text: str) -> bool:
    """True if ``text`` has the shape of a ULID."""
    return len(text) == 26 and all(c in _ALPHABET for c in text.upper())


__all__ = ["is_id", "new_id"]
