"""Calls to the Python API that do not fit a method's signature raise a memstrata error.

Contract: :func:`checked_calls` decorates a public class. Its constructor and each of its
public methods (static and class methods too) raises :class:`~memstrata.errors.ArgumentError`, a
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
    """``cls`` with its constructor and every public method (static and class methods too)
    checked (module docstring). A function under two names (an alias) gets one wrapper."""
    made: dict[Any, Callable[..., Any]] = {}

    def checked(fn: Callable[..., Any]) -> Callable[..., Any]:
        if fn not in made:
            made[fn] = _checked(fn, cls)
        return made[fn]

    for name, member in list(vars(cls).items()):
        if name.startswith("_") and name != "__init__":
            continue
        if inspect.isfunction(member):
            setattr(cls, name, checked(member))
        elif isinstance(member, classmethod | staticmethod) and \
                inspect.isfunction(member.__func__):
            setattr(cls, name, type(member)(checked(member.__func__)))
    return cls


def _checked(fn: Callable[..., Any], owner: type) -> Callable[..., Any]:
    signature = inspect.signature(fn)
    shown = signature.replace(parameters=[  # without self and the annotations
        p.replace(annotation=inspect.Parameter.empty)
        for p in signature.parameters.values() if p.name not in ("self", "cls")],
        return_annotation=inspect.Signature.empty)

    def named(args: tuple[Any, ...]) -> str:
        # the class the caller holds (Facts, for a method FactReads defines)
        first = args[0] if args else None
        held = first if isinstance(first, type) and issubclass(first, owner) else (
            type(first) if isinstance(first, owner) else owner)
        return held.__name__ if fn.__name__ == "__init__" else \
            f"{held.__name__}.{fn.__name__}"

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
                name = named(args)
                raise ArgumentError(f"{name}(): {unfit}",
                                    hint=f"call it as {name}{shown}") from None
            raise

    return call


__all__ = ["checked_calls"]
