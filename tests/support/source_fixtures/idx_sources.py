"""Fixtures for MNIST and Fashion-MNIST: the four gzip IDX files, a few images each."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from tests.support.source_fixtures.tiny import pixels, source_dir


def idx_bytes(array: np.ndarray) -> bytes:
    """An IDX file of uint8 ``array``."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + b"".join(struct.pack(">I", d) for d in array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def write_idx_source(data_dir: Path, key: str, train: int = 5, test: int = 3) -> dict[str, np.ndarray]:
    """The four files of ``key`` (``mnist`` or ``fashion_mnist``); returns labels per part."""
    folder = source_dir(data_dir, key)
    labels = {}
    for prefix, count, seed in (("train", train, 0), ("t10k", test, 100)):
        images = np.stack([pixels(seed + i, 28, 28, 1) for i in range(count)])
        labels[prefix] = np.arange(count, dtype=np.uint8) % 10
        (folder / f"{prefix}-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx_bytes(images)))
        (folder / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(labels[prefix])))
    return labels


__all__ = ["idx_bytes", "write_idx_source"]
