"""The filters of the LangGraph store's ``search(filter=...)``
(:mod:`memstrata.interfaces.langgraph_store`), as LangGraph's own stores read them.

Contract: :func:`check_filter` refuses a filter it cannot read (a typed
:class:`~memstrata.errors.ValidationError`, before anything is read); :func:`matches` tells
whether an item's value matches one field's filter: equal values, nested mappings field by
field, lists item by item, and the comparison operators of :data:`OPERATORS` (``$gt``...
compare as numbers; a value that is not one matches none of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError


def matches(item_value: Any, wanted: Any) -> bool:
    """Whether ``item_value`` matches the filter ``wanted`` of its field."""
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(item_value, op, arg) for op, arg in wanted.items())
        return isinstance(item_value, Mapping) and all(
            matches(item_value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (isinstance(item_value, list | tuple) and len(item_value) == len(wanted)
                and all(matches(a, b) for a, b in zip(item_value, wanted, strict=True)))
    return bool(item_value == wanted)


def check_filter(flt: Any) -> None:
    """Refuse a filter the comparison does not understand, before anything is read."""
    if flt is None:
        return
    if not isinstance(flt, Mapping):
        raise ValidationError("filter must be a mapping of field to value")
    for key, wanted in flt.items():
        if str(key).startswith("$") and key not in OPERATORS:
            raise ValidationError(f"unsupported filter operator {key!r}",
                                  hint="use " + ", ".join(OPERATORS))
        if isinstance(wanted, Mapping):
            check_filter(wanted)


OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValidationError(f"unsupported filter operator {op!r}",
                              hint="use $eq, $ne, $gt, $gte, $lt or $lte")
    try:
        a, b = float(value), float(arg)
    except (TypeError, ValueError):
        return False
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


__all__ = ["OPERATORS", "check_filter", "matches"]
