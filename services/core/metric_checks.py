"""Input checks shared by the metric modules: one error class, one message shape.

Every check turns its input into a float64 ndarray or raises :class:`MetricInputError`
(a ``ValueError``) with the message "The '<param>' parameter of <function> must be <what>.
Got <what it got> instead." so callers can tell exactly which argument to fix.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from services.core.errors import NevisError

CURVE = "a non-empty 1-D sequence of finite numbers"


class MetricInputError(NevisError, ValueError):
    """A metric was given data it is not defined for (empty, NaN, wrong shape, ...)."""


def fail(param: str, func: str, what: str, got: str) -> MetricInputError:
    """Build the error in the project's one message shape (the caller raises it)."""
    return MetricInputError(f"The {param!r} parameter of {func} must be {what}. Got {got} instead.")


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def as_float_array(value: Any, *, param: str, func: str, what: str, ndims: tuple[int, ...]) -> np.ndarray:
    """Return ``value`` as a non-empty, finite float64 array with one of ``ndims`` dims.

    No copy is made when ``value`` already is a float64 ndarray.
    """
    arr = np.asarray(value) if not isinstance(value, np.ndarray) else value
    if arr.dtype.kind not in "biuf":
        if arr.dtype.kind != "O":
            raise fail(param, func, what, f"an array of dtype {arr.dtype} ({_describe(value)})")
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise fail(param, func, what, f"values that are not numbers ({_describe(value)})") from None
    arr = np.asarray(arr, dtype=np.float64)
    if arr.ndim not in ndims:
        shape = "a scalar" if arr.ndim == 0 else f"a {arr.ndim}-D array of shape {arr.shape}"
        raise fail(param, func, what, shape)
    if arr.size == 0:
        got = "an empty sequence" if arr.ndim == 1 else f"an empty array of shape {arr.shape}"
        raise fail(param, func, what, got)
    # A sum is cheap and finite whenever every entry is; only look closer when it is not.
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(arr.sum())
    if not math.isfinite(total):
        bad = ~np.isfinite(arr)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            index = where[0] if len(where) == 1 else where
            raise fail(param, func, what, f"a non-finite value ({arr[where]}) at index {index}")
    return arr


def as_curve(value: Any, *, param: str, func: str) -> np.ndarray:
    """A curve: a non-empty 1-D finite float64 array."""
    return as_float_array(value, param=param, func=func, what=CURVE, ndims=(1,))


def as_number(value: Any, *, param: str, func: str, low: float, low_open: bool = False) -> float:
    """A finite real number >= ``low`` (or > ``low`` when ``low_open``)."""
    bracket = "(" if low_open else "["
    what = f"a finite number in {bracket}{low:g}, inf)"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise fail(param, func, what, _describe(value))
    number = float(value)
    if not math.isfinite(number) or number < low or (low_open and number == low):
        raise fail(param, func, what, _describe(value))
    return number


def as_int(value: Any, *, param: str, func: str, low: int) -> int:
    """An int >= ``low`` (bools are refused: ``True`` is not a patience)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < low:
        raise fail(param, func, f"an int in [{low}, inf)", _describe(value))
    return int(value)


__all__ = ["CURVE", "MetricInputError", "as_curve", "as_float_array", "as_int", "as_number", "fail"]
