"""The rules every input meets, defined once: text, names, numbers, flags, dates, id lists.

Two forms of each rule:

- *field rules* (:func:`clean_text`, :func:`check_name`, :func:`unit_interval`) raise
  ``ValueError``; pydantic models use them through the annotated types of
  :mod:`memstrata.models`, and :func:`memstrata.models.build` turns pydantic's error into
  memstrata's :class:`~memstrata.errors.ValidationError`;
- *argument rules* (:func:`text_arg`, :func:`int_arg`, :func:`bool_arg`, :func:`date_arg`,
  :func:`ids_arg`) raise :class:`~memstrata.errors.ValidationError` with a hint, for the
  plain keyword arguments of public methods.

Text rules: a ``str`` (never bytes, numbers or None unless the caller allows None), valid
UTF-8 (no lone surrogates), no NUL bytes, stripped, within the field's size limit.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from .clock import ensure_utc
from .errors import ValidationError

MAX_NAME = 128
MAX_CLAIM = 1000
MAX_TEXT = 8000
MAX_SOURCE = 500
#: The largest ``k`` (ranked results) any search or recall returns.
MAX_K = 100
#: The range of an integer column (64-bit): no integer argument may leave it.
MAX_INT = 2**63 - 1
#: What a scope or principal name may hold besides letters and digits: ``|`` and ``=`` too,
#: as identity providers' user ids do (``auth0|5f7c...``, ``google-oauth2|1042``, base64
#: padding); never a space, ``;`` (the scope key's separator), ``,`` (the CLI's lists) or
#: ``*`` (a wildcard).
NAME_MARKS = ". @ : + - / _ | ="
#: The hint of a name that holds anything else.
NAME_HINT = f"names use letters, digits and {NAME_MARKS}"
_NAME_RE = re.compile(r"^[\w.@:+\-/|=]+$")
#: A date without a time of day (``until`` then takes in the whole day).
_BARE_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def clean_text(value: Any, *, field: str, max_len: int, allow_empty: bool = False) -> str:
    """Check one text value against the text rules; returns it stripped (``ValueError``)."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise ValueError(f"{field} contains a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{field} is not valid UTF-8 (lone surrogate)") from exc
    value = value.strip()
    if not value and not allow_empty:
        raise ValueError(f"{field} must not be empty")
    if len(value) > max_len:
        raise ValueError(f"{field} is {len(value)} characters; the limit is {max_len}")
    return str(value)


def check_name(value: Any, field: str) -> str | None:
    """A scope or principal name: letters, digits and :data:`NAME_MARKS` (``ValueError``)."""
    if value is None:
        return None
    text = clean_text(value, field=field, max_len=MAX_NAME)
    if not _NAME_RE.match(text):
        raise ValueError(f"{field} {text!r} may only contain letters, digits and {NAME_MARKS}")
    return text


def unit_interval(value: Any, field: str = "confidence") -> float:
    """A number from 0 to 1 (not a bool, not a string) (``ValueError``)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{field} must be a number between 0 and 1")
    return float(value)


def slot_name(value: Any, field: str) -> str:
    """A fact's subject or attribute: text, lower-cased, inner whitespace collapsed."""
    text = clean_text(value, field=field, max_len=MAX_NAME)
    return re.sub(r"\s+", " ", text.lower())


def readers_list(value: Any) -> list[str] | None:
    """``None`` (the whole scope) or a non-empty list of principal names, sorted."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise ValueError("readers must be a list of principal names or None")
    out: list[str] = sorted({str(check_name(x, "reader")) for x in value})
    if not out:
        raise ValueError("readers must name at least one principal (None means the whole scope)")
    from .governance.sensitivity import scan

    if any(scan(name).has_secret for name in out):  # stored and listed as it is
        raise ValueError("a reader name contains a secret; nothing was stored (name the "
                         "principal, never a credential)")
    return out


def utc_or_none(value: Any, field: str) -> datetime | None:
    """An aware UTC datetime from a datetime or ISO text (``ValueError``)."""
    if value is None:
        return None
    try:
        return ensure_utc(value, field=field)
    except ValidationError as exc:
        raise ValueError(exc.message) from exc


# -- argument rules (ValidationError) -------------------------------------------------


def text_arg(value: Any, field: str, *, max_len: int = MAX_TEXT, allow_empty: bool = False,
             hint: str | None = None) -> str:
    """:func:`clean_text` raising :class:`ValidationError`."""
    try:
        return clean_text(value, field=field, max_len=max_len, allow_empty=allow_empty)
    except ValueError as exc:
        raise ValidationError(str(exc), hint=hint or _text_hint(field, max_len, allow_empty)
                              ) from None


def _text_hint(field: str, max_len: int, allow_empty: bool = False) -> str:
    """What a text argument must be, as a hint."""
    return (f"give {field} as {'' if allow_empty else 'non-empty '}text of at most "
            f"{max_len:,} characters")


def name_arg(value: Any, field: str) -> str | None:
    """:func:`check_name` raising :class:`ValidationError` (None passes)."""
    try:
        return check_name(value, field)
    except ValueError as exc:
        raise ValidationError(str(exc), hint=NAME_HINT) from None


def int_arg(value: Any, field: str, *, low: int | None = None, high: int | None = None) -> int:
    """An ``int`` (not a bool, not a string) within ``[low, high]``."""
    span = (f" from {low} to {high}" if low is not None and high is not None else
            f" of at least {low}" if low is not None else "")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{field} must be an integer{span}, got {value!r}",
                              hint=f"pass {field}= as a number, e.g. {low or 1}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValidationError(f"{field} must be an integer{span}, got {value!r}",
                              hint=f"give {field}{span}")
    if not -MAX_INT <= value <= MAX_INT:
        raise ValidationError(f"{field} is out of range, got {value!r}",
                              hint="integers are stored in 64 bits")
    return value


def tenant_arg(value: Any) -> str:
    """A tenant name (the one a call without a scope acts in): :func:`name_arg`, required."""
    name = name_arg(value, "tenant")
    if name is None:
        raise ValidationError("tenant must be a name, got None",
                              hint="e.g. tenant='acme' (default 'default')")
    return name


def choice_arg(value: Any, field: str, choices: Sequence[str], *,
               hint: str | None = None) -> str:
    """One of ``choices``, exactly (``"ACTIVE"`` or ``"all"`` is refused, so a typo never
    reads as "none match")."""
    if not isinstance(value, str) or value not in choices:
        raise ValidationError(f"{field} must be one of {', '.join(choices)}, got {value!r}",
                              hint=hint or f"pass {field}={choices[0]!r}")
    return value


def bool_arg(value: Any, field: str) -> bool:
    """A real ``bool`` (``"maybe"`` or ``1`` is refused, so a typo never means True)."""
    if not isinstance(value, bool):
        raise ValidationError(f"{field} must be True or False, got {value!r}",
                              hint=f"pass {field}=True or {field}=False")
    return value


def date_arg(value: Any, field: str) -> datetime | None:
    """None, an aware datetime or ISO-8601 text (a bare date is read as UTC midnight)."""
    if value is None:
        return None
    if not isinstance(value, datetime | str):
        raise ValidationError(f"{field} must be an ISO-8601 date or an aware datetime, got "
                              f"{type(value).__name__}", hint="e.g. 2026-05-01")
    return ensure_utc(value, field=field)


def dates_arg(since: Any, until: Any) -> tuple[datetime | None, datetime | None]:
    """A date range, ``since`` to ``until`` (each may be open), both ends included: an
    ``until`` given as a bare date (``2026-03-01``) takes in that whole day (UTC). A range
    that ends before it begins is refused, not answered with nothing."""
    start, end = date_arg(since, "since"), date_arg(until, "until")
    if end is not None and isinstance(until, str) and _BARE_DATE_RE.match(until.strip()):
        end += timedelta(days=1, microseconds=-1)
    if start is not None and end is not None and start > end:
        raise ValidationError(f"since ({start.isoformat()}) is after until "
                              f"({end.isoformat()})", hint="swap them, or leave one out")
    return start, end


#: What a reference names: ``fact:ID``, ``episode:ID``, ``checkpoint:TASK@N``.
REF_LAYERS = ("fact", "episode", "checkpoint")
_REF_HINT = "references look like fact:ID, episode:ID or checkpoint:TASK@N"


def ref_arg(value: Any, field: str = "ref") -> tuple[str, str]:
    """A reference split into its layer and what names the record in it (``checkpoint``:
    ``TASK@N``); ValidationError for another form."""
    ref = text_arg(value, field, max_len=MAX_NAME + 20)
    layer, colon, ident = ref.partition(":")
    if not colon or layer not in REF_LAYERS or not ident:
        raise ValidationError(f"not a reference: {ref!r}", hint=_REF_HINT)
    if layer == "checkpoint":
        task, at, version = ident.rpartition("@")
        if not at or not task or not version.isdigit():
            raise ValidationError(f"not a checkpoint reference: {ref!r}",
                                  hint="checkpoint references name the task and the "
                                       "version: checkpoint:TASK@N")
    return layer, ident


def ids_arg(value: Any, field: str) -> list[str]:
    """A non-empty list of record ids or references (:func:`ref_arg`): the bare ids (a
    checkpoint's ``TASK@N``)."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | set | frozenset):
        raise ValidationError(f"{field} must be a list of ids, got {type(value).__name__}",
                              hint=f"e.g. {field}=['fact:01J...']")
    out = []
    for item in value:
        text = text_arg(item, field, max_len=MAX_NAME + 20)
        out.append(ref_arg(text, field)[1] if ":" in text else text)
    if not out:
        raise ValidationError(f"{field} is empty", hint="name at least one record")
    return out


def options_arg(options: Mapping[str, Any], allowed: Collection[str], call: str) -> None:
    """The ``**options`` of a public method name only what it accepts."""
    unknown = sorted(str(k) for k in options if k not in allowed)
    if unknown:
        raise ValidationError(f"{call} got unknown option(s) {', '.join(map(repr, unknown))}",
                              hint="options: " + ", ".join(sorted(allowed)))


def record_id_arg(value: Any, layer: str) -> str:
    """One record id, given bare or as a reference (``fact:ID``)."""
    text = text_arg(value, f"{layer} id", max_len=MAX_NAME + 20,
                    hint=f"pass the id or the reference, e.g. {layer}:01J...")
    return text.removeprefix(f"{layer}:")


__all__ = [
    "MAX_CLAIM",
    "MAX_INT",
    "MAX_K",
    "MAX_NAME",
    "MAX_SOURCE",
    "MAX_TEXT",
    "NAME_HINT",
    "NAME_MARKS",
    "bool_arg",
    "check_name",
    "clean_text",
    "date_arg",
    "dates_arg",
    "ids_arg",
    "int_arg",
    "name_arg",
    "options_arg",
    "readers_list",
    "record_id_arg",
    "slot_name",
    "text_arg",
    "unit_interval",
    "utc_or_none",
]
