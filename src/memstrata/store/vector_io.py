"""The files of a vector segment on disk (:mod:`memstrata.store.vector_segment`): the header
``P.json``, the JSON line files ``P.codes`` and ``P.readers``, and their space.

Contract: :func:`read_header` trusts a header only with every count a whole number
(``erased`` defaults to 0 for files written before it existed); :func:`append_lines` cuts
what a crashed writer left past the header's count before it appends, and flushes;
:func:`overwrite_lines` rewrites lines in place at their length (never longer), so a
header's byte counts stay true; :func:`allocate` reserves disk space, so a full disk is an
``OSError``, not a SIGBUS; :func:`remove_files` deletes a segment's files but its lock.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The header's counts: whole numbers, none negative (the generation of new files is -1).
_COUNTS = ("n", "cap", "max_rowid", "generation", "low_n", "codes_bytes", "readers_bytes",
           "erased")


def allocate(path: Path, size: int, want: int) -> None:
    """Grow ``path`` from ``size`` to ``want`` bytes with the space reserved on disk
    (``posix_fallocate``; a plain resize where the platform has none)."""
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is None:
        os.truncate(path, want)
        return
    with path.open("r+b") as f:
        fallocate(f.fileno(), size, want - size)


def append_lines(path: Path, at: int, lines: list[str]) -> int:
    """Write JSON lines at byte ``at`` (what a crashed writer left past the header's count is
    cut off first); returns the bytes written."""
    if not lines:
        return 0
    data = ("\n".join(lines) + "\n").encode()
    cut(path, at)
    with path.open("ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return len(data)


def cut(path: Path, size: int) -> None:
    """Cut off what a crashed writer left past the header's ``size`` (flushed)."""
    if path.stat().st_size > size:
        with path.open("r+b") as f:
            f.truncate(size)
            os.fsync(f.fileno())


def overwrite_lines(path: Path, size: int,
                     new: Callable[[int, bytes], bytes | None]) -> bool:
    """Overwrite lines of the first ``size`` bytes of ``path`` in place, flushed to disk:
    ``new(index, line)`` is a line's replacement (None: kept), padded with spaces to the
    line's length. False, with nothing written, when a replacement is longer than its
    line (the file keeps its length and line breaks: its header's counts stay true)."""
    with path.open("r+b") as f:
        lines = f.read(size).split(b"\n")
        changed = False
        for i, line in enumerate(lines):
            out = new(i, line)
            if out is None:
                continue
            if len(out) > len(line):
                return False
            lines[i] = out.ljust(len(line))
            changed = True
        if changed:
            f.seek(0)
            f.write(b"\n".join(lines))
            f.flush()
            os.fsync(f.fileno())
    return True


def read_header(path: Path) -> dict[str, Any] | None:
    """The header at ``path`` (``P.json``), or None when it is missing or lacks a field
    (garbled: no header)."""
    try:
        head = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(head, dict):
        return None
    head.setdefault("erased", 0)  # earlier versions' files: no line was ever overwritten
    if not isinstance(head.get("epoch"), str) or any(
            type(head.get(k)) is not int or head[k] < (-1 if k == "generation" else 0)
            for k in _COUNTS) or not all(
            isinstance(head.get(k), str) for k in ("store", "model", "tenant")):
        return None
    return head


def files_on_disk(directory: Path | None) -> set[tuple[str, str]]:
    """(tenant, ``model:dims``) of the segment files in ``directory``, by their headers."""
    if directory is None or not directory.is_dir():
        return set()
    heads = (read_header(path) for path in directory.glob("*.json"))
    return {(h["tenant"], h["model"]) for h in heads if h is not None}


def segment_name(tenant: str, layer: str) -> str:
    """A file-name-safe name for the (tenant, layer) segment."""
    import hashlib

    return f"{hashlib.sha256(tenant.encode()).hexdigest()[:24]}.{layer}"


def remove_files(prefix: Path) -> None:
    """Delete a segment's files (after a reindex clears the tenant)."""
    for path in prefix.parent.glob(prefix.name + ".*"):
        if not path.name.endswith(".lock"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


__all__ = ["allocate", "append_lines", "cut", "files_on_disk", "overwrite_lines",
           "read_header", "remove_files", "segment_name"]
