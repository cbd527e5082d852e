"""Infinite values survive the trip through JSON documents."""

from __future__ import annotations

import json
import math

import numpy as np

from services.store.db import jsonfloats


def test_encode_and_decode_are_inverse_on_floats_and_none() -> None:
    values = [0.0, -1.5, math.inf, -math.inf, None, 1e300]
    encoded = jsonfloats.encode(values)
    assert json.loads(json.dumps(encoded, allow_nan=False)) == encoded  # strict JSON
    assert jsonfloats.decode(encoded) == values
    assert math.isnan(jsonfloats.decode(jsonfloats.encode([math.nan]))[0])


def test_encode_tree_handles_nested_documents_and_numpy() -> None:
    doc = {"a": np.array([1.0, np.inf]), "b": {"c": (np.float64(-np.inf), 3)}, "s": "inf?"}
    assert jsonfloats.encode_tree(doc) == {"a": [1.0, "inf"], "b": {"c": ["-inf", 3]}, "s": "inf?"}
