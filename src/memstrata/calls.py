"""Calls to the Python API that do not fit a method's signature raise a memstrata error.

Contract: :func:`checked_calls` decorates a public class. Its constructor and each of its
public methods (and class methods) raises :class:`~memstrata.errors.ArgumentError`, a
:class:`~memstrata.errors.ValidationError` that is also a ``TypeError``, when the call names
an argument the method does not take, leaves out one it needs or passes too many
positional ones; the hint shows the method's signature. The method's body does not run,
so nothing is written. A call that fits runs unchanged (one more frame); a ``TypeError``
raised inside a call that fits is not touched. The tools, MCP and HTTP refuse unknown
arguments through their argument models (:mod:`memstrata.arguments`) instead.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import ArgumentError, MemstrataError

T = TypeVar("T", bound=type)


def checked_calls(cls: T) -> T:
    """``cls`` with every public method (and class method) checked (module docstring)."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") and name != "__init__":
            continue
        if inspect.isfunction(member):
            setattr(cls, name, _checked(member, cls.__name__))
        elif isinstance(member, classmethod) and inspect.isfunction(member.__func__):
            setattr(cls, name, classmethod(_checked(member.__func__, cls.__name__)))
    return cls


def _checked(fn: Callable[..., Any], owner: str) -> Callable[..., Any]:
    signature = inspect.signature(fn)
    shown = signature.replace(parameters=[  # without self and the annotations
        p.replace(annotation=inspect.Parameter.empty)
        for p in signature.parameters.values() if p.name not in ("self", "cls")],
        return_annotation=inspect.Signature.empty)
    name = owner if fn.__name__ == "__init__" else f"{owner}.{fn.__name__}"

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TypeError as exc:
            if isinstance(exc, MemstrataError):
                raise
            try:
                signature.bind(*args, **kwargs)
            except TypeError as unfit:
                raise ArgumentError(f"{name}(): {unfit}",
                                    hint=f"call it as {name}{shown}") from None
            raise

    return call


__all__ = ["checked_calls"]
