"""Floats in JSON documents: +inf, -inf and NaN as strings, everything else as numbers.

JSON has no infinities, and PostgreSQL's JSONB refuses the ``Infinity`` token Python would
write, yet the OFM special case is +inf by definition (METRICS.md §2). Curves therefore go
into the database through :func:`encode` and come back through :func:`decode`, which are
exact inverses on lists of floats and ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

_WORDS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def encode_value(value: Any) -> Any:
    """A number as JSON can hold it: finite floats stay, others become "inf"/"-inf"/"nan"."""
    if value is None or isinstance(value, (bool, str)):
        return value
    number = float(value)
    if math.isnan(number):
        return "nan"
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    return number


def decode_value(value: Any) -> float | None:
    """The inverse of :func:`encode_value` (``None`` stays ``None``)."""
    if value is None:
        return None
    if isinstance(value, str):
        return _WORDS[value]
    return float(value)


def encode(values: Iterable[Any]) -> list[Any]:
    """A list of numbers (or None) as a JSON-safe list.

    Examples:
        >>> encode([1.0, float("inf"), None])
        [1.0, 'inf', None]
    """
    return [encode_value(v) for v in values]


def decode(values: Iterable[Any]) -> list[float | None]:
    """Floats back from :func:`encode`.

    Examples:
        >>> decode([1.0, "inf", None])
        [1.0, inf, None]
    """
    return [decode_value(v) for v in values]


def encode_tree(doc: Any) -> Any:
    """:func:`encode_value` applied to every number of a nested dict / list document."""
    if isinstance(doc, dict):
        return {str(k): encode_tree(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [encode_tree(v) for v in doc]
    if hasattr(doc, "tolist"):  # numpy arrays and scalars
        return encode_tree(doc.tolist())
    if isinstance(doc, (int, float)) and not isinstance(doc, bool):
        return doc if isinstance(doc, int) else encode_value(doc)
    return doc


__all__ = ["decode", "decode_value", "encode", "encode_tree", "encode_value"]
