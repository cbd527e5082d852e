"""Field checkers for stream manifests: each returns the checked value or raises.

These are the building blocks of :func:`workers.stream.manifest.parse_manifest`. Every
failure is a :class:`~services.core.errors.ManifestError` with one message shape, so a
user can find the fault without reading code::

    Invalid stream manifest mini.json, task 3: the 'split.fractions' field must sum to 1
    for split kind 'random'. Got 0.9 instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from services.core.errors import ManifestError

# "<source>:<name>": lower-case, no dots or slashes, because keys become object-store paths.
DATASET_KEY_RE = re.compile(r"^[a-z][a-z0-9_]*:[a-z0-9][a-z0-9_-]*$")
STREAM_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._+-]*$")
YEAR_RANGE = (1900, 2100)
IMAGE_SIZE_RANGE = (8, 512)  # the same bounds as Settings.image_size
FRACTION_SUM_TOLERANCE = 1e-6

_MISSING = object()


def describe(value: Any) -> str:
    """A short, typed rendering of a bad value for an error message."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


@dataclass(frozen=True)
class Where:
    """Which manifest, and which task in it, a check is about."""

    origin: str
    task: int | None = None  # 1-based position in ``tasks``

    def at_task(self, position: int) -> Where:
        return Where(self.origin, position)

    def error(self, field: str, must: str, got: Any = _MISSING) -> ManifestError:
        """Build the error; the caller raises it (so tracebacks point at the check)."""
        place = f"Invalid stream manifest {self.origin}"
        if self.task is not None:
            place += f", task {self.task}"
        message = f"{place}: the {field!r} field {must}."
        if got is not _MISSING:
            message += f" Got {describe(got)} instead."
        return ManifestError(message)


def check_object(value: Any, where: Where, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise where.error(field, "must be a JSON object", value)
    return value


def check_fields(
    doc: Mapping[str, Any], where: Where, *, required: Collection[str], optional: Collection[str] = (), prefix: str = ""
) -> None:
    """Reject missing required fields and any field the format does not define."""
    for name in required:
        if name not in doc:
            raise where.error(prefix + name, "is required but missing")
    allowed = set(required) | set(optional)
    for name in doc:
        if name not in allowed:
            known = ", ".join(sorted(allowed))
            raise where.error(prefix + str(name), f"is not part of the format (allowed: {known})")


def check_int(value: Any, where: Where, field: str, *, lo: int, hi: int | None = None) -> int:
    # bool is an int subclass; `true` is never a valid count or year.
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(field, _int_range_text(lo, hi), value)
    if value < lo or (hi is not None and value > hi):
        raise where.error(field, _int_range_text(lo, hi), value)
    return value


def check_optional_int(value: Any, where: Where, field: str, *, lo: int, hi: int | None = None) -> int | None:
    return None if value is None else check_int(value, where, field, lo=lo, hi=hi)


def _int_range_text(lo: int, hi: int | None) -> str:
    upper = "inf)" if hi is None else f"{hi}]"
    return f"must be an int in [{lo}, {upper}"


def check_str(
    value: Any,
    where: Where,
    field: str,
    *,
    pattern: re.Pattern[str] | None = None,
    hint: str = "",
    allow_empty: bool = False,
) -> str:
    if not isinstance(value, str):
        raise where.error(field, "must be a string", value)
    if not allow_empty and not value.strip():
        raise where.error(field, "must be a non-empty string", value)
    if pattern is not None and not pattern.fullmatch(value):
        raise where.error(field, f"must look like {hint or pattern.pattern}", value)
    return value


def check_choice(value: Any, where: Where, field: str, choices: Collection[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise where.error(field, f"must be one of {listed}", value)
    return value


def check_fractions(value: Any, where: Where, field: str, *, names: tuple[str, ...], kind: str) -> dict[str, float]:
    """Fractions over exactly ``names``, each in (0, 1], summing to 1."""
    obj = check_object(value, where, field)
    if set(obj) != set(names):
        must = f"must have exactly the keys {', '.join(names)} for split kind {kind!r}"
        raise where.error(field, must, dict(obj))
    out: dict[str, float] = {}
    for name in names:  # canonical order, whatever the file's order
        share = obj[name]
        if isinstance(share, bool) or not isinstance(share, (int, float)):
            raise where.error(f"{field}.{name}", "must be a number in (0, 1]", share)
        if not math.isfinite(share) or not 0 < share <= 1:
            raise where.error(f"{field}.{name}", "must be a number in (0, 1]", share)
        out[name] = float(share)
    total = sum(out.values())
    if abs(total - 1.0) > FRACTION_SUM_TOLERANCE:
        raise where.error(field, f"must sum to 1 for split kind {kind!r}", round(total, 9))
    return out


__all__ = [
    "DATASET_KEY_RE",
    "FRACTION_SUM_TOLERANCE",
    "IMAGE_SIZE_RANGE",
    "STREAM_NAME_RE",
    "VERSION_RE",
    "YEAR_RANGE",
    "Where",
    "check_choice",
    "check_fields",
    "check_fractions",
    "check_int",
    "check_object",
    "check_optional_int",
    "check_str",
    "describe",
]
