"""The curated public surface: sorted, complete, importable, and light to import."""

from __future__ import annotations

import subprocess
import sys

import memstrata


def test_all_is_sorted_and_every_name_resolves() -> None:
    names = list(memstrata.__all__)
    assert names == sorted(names)
    for name in names:
        assert getattr(memstrata, name) is not None, name


def test_exception_tree_has_one_base_and_no_builtin_shadow() -> None:
    errors = [getattr(memstrata, n) for n in memstrata.__all__
              if isinstance(getattr(memstrata, n), type)
              and issubclass(getattr(memstrata, n), BaseException)]
    assert all(issubclass(e, memstrata.MemstrataError) for e in errors)
    assert all(issubclass(e, Exception) for e in errors)
    assert "MemoryError" not in memstrata.__all__


def test_import_does_not_load_heavy_modules() -> None:
    code = ("import sys, memstrata; heavy = [m for m in ('onnxruntime', 'tokenizers', 'mcp', "
            "'psycopg', 'redis', 'httpx') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
