"""Fixture for USPS: two bzip2 LIBSVM files of 16x16 images in [-1, 1]."""

from __future__ import annotations

import bz2
from pathlib import Path

import numpy as np

from tests.support.source_fixtures.tiny import source_dir


def libsvm_line(label: int, values: np.ndarray) -> str:
    """A line as the source writes it: label, then ``index:value`` pairs, a trailing space."""
    return f"{label} " + " ".join(f"{i + 1}:{v:.6f}" for i, v in enumerate(values)) + " \n"


def write_usps(data_dir: Path, repeat: int = 1) -> dict[str, list[tuple[int, np.ndarray]]]:
    """usps.bz2 (3 rows) and usps.t.bz2 (2 rows), each ``repeat`` times over; returns
    (label 1..10, values) per part."""
    rng = np.random.default_rng(0)
    parts = {"usps.bz2": [1, 10, 5] * repeat, "usps.t.bz2": [2, 3] * repeat}
    out = {}
    for name, labels in parts.items():
        rows = [(label, rng.uniform(-1, 1, 256)) for label in labels]
        rows[0][1][:3] = (-1.0, 0.0, 1.0)
        text = "".join(libsvm_line(label, values) for label, values in rows)
        (source_dir(data_dir, "usps") / name).write_bytes(bz2.compress(text.encode()))
        out[name] = rows
    return out


__all__ = ["libsvm_line", "write_usps"]
