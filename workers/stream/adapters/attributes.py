"""Per-row attributes from a dataset's JSON sidecar, for split rules that need them.

A split rule such as "split by view angle" or "subject-disjoint" needs one value per row
(see :class:`~workers.stream.split_rule.SplitRule`). The sidecar gives them in an optional
``attributes`` block, one entry per attribute, as either

- a list with one int or string per row: ``"attributes": {"subject": [1, 1, 2, ...]}``, or
- ``{"row_mod": m}``: the value of row ``i`` is ``i % m``, for data stored in a fixed cycle
  (``"angle_bin": {"row_mod": 72}`` for 72 views per object, rows sorted by object).

Sidecars written before this block existed may still describe the view of each row in words;
the two documented forms below are read as ``angle_bin`` (the reference's 72 bins of 5
degrees, 0 = 0-4 degrees), and nothing else is guessed:

- ``"view_rule": "the angle in degrees of row i is 5 * (i % 72)"`` (COIL-100), and
- ``"view_rule": "the view index (0..71, 5 degree steps) of row i is i % 72"`` (COIL-20).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from services.core.errors import DatasetFormatError

ANGLE_BIN = "angle_bin"
_VIEW_RULES = (
    re.compile(r"^the angle in degrees of row i is 5 \* \(i % 72\)$"),
    re.compile(r"^the view index \(0\.\.71, 5 degree steps\) of row i is i % 72$"),
)


def read_attributes(key: str, meta: Mapping[str, Any], n: int) -> dict[str, np.ndarray]:
    """The sidecar's per-row attributes (name -> int64 or str array [n]).

    Raises:
        DatasetFormatError: the ``attributes`` block is malformed (naming the attribute).
    """
    block = meta.get("attributes", {})
    if not isinstance(block, Mapping):
        raise DatasetFormatError(f"Dataset {key!r}: 'attributes' must be an object of per-row attributes.")
    out = {str(name): _column(key, str(name), spec, n) for name, spec in block.items()}
    view_rule = str(meta.get("view_rule", ""))
    if ANGLE_BIN not in out and any(p.match(view_rule) for p in _VIEW_RULES):
        out[ANGLE_BIN] = np.arange(n, dtype=np.int64) % 72
    return out


def _column(key: str, name: str, spec: Any, n: int) -> np.ndarray:
    where = f"Dataset {key!r}: attribute {name!r}"
    if isinstance(spec, Mapping):
        cycle = spec.get("row_mod")
        if set(spec) != {"row_mod"} or isinstance(cycle, bool) or not isinstance(cycle, int) or cycle < 1:
            raise DatasetFormatError(
                f'{where} must be a list of {n} values or {{"row_mod": <int >= 1>}}; got {dict(spec)}.'
            )
        return np.arange(n, dtype=np.int64) % cycle
    if not isinstance(spec, list) or len(spec) != n:
        size = len(spec) if isinstance(spec, list) else type(spec).__name__
        raise DatasetFormatError(f"{where} must list one value per row ({n}); got {size}.")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in spec):
        return np.asarray(spec, dtype=np.int64)
    if all(isinstance(v, str) for v in spec):
        return np.asarray(spec, dtype=str)
    raise DatasetFormatError(f"{where} must hold only ints or only strings.")


__all__ = ["ANGLE_BIN", "read_attributes"]
