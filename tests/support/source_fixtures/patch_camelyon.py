"""Fixture for PatchCamelyon: six gzipped HDF5 files of tiny patch arrays and their labels."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import h5py
import numpy as np

from tests.support.source_fixtures.tiny import source_dir


def _h5(name: str, array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as opened:
        opened.create_dataset(name, data=array)
    return gzip.compress(buffer.getvalue())


def write_patch_camelyon(data_dir: Path, side: int = 8) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Returns (patches, labels) per part (train 10 rows, valid 3, test 2)."""
    folder = source_dir(data_dir, "patch_camelyon")
    rng = np.random.default_rng(0)
    out = {}
    for part, n in (("train", 10), ("valid", 3), ("test", 2)):
        x = rng.integers(0, 256, (n, side, side, 3), dtype=np.uint8)
        y = (np.arange(n) % 2).astype(np.uint8).reshape(n, 1, 1, 1)
        (folder / f"camelyonpatch_level_2_split_{part}_x.h5.gz").write_bytes(_h5("x", x))
        (folder / f"camelyonpatch_level_2_split_{part}_y.h5.gz").write_bytes(_h5("y", y))
        out[part] = (x, y.reshape(-1))
    return out


__all__ = ["write_patch_camelyon"]
