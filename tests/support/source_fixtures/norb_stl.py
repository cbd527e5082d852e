"""Fixtures for smallNORB (six gzipped NORB binary matrices) and STL-10 (binary tar)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from tests.support.source_fixtures.tiny import source_dir, write_tar

NORB_MAGIC = {np.dtype(np.uint8): 0x1E3D4C55, np.dtype("<i4"): 0x1E3D4C54}
PARTS = {"train": "5x46789x9x18x6x2x96x96-training", "test": "5x01235x9x18x6x2x96x96-testing"}


def norb_bytes(array: np.ndarray) -> bytes:
    """A NORB binary matrix (at least 3 dimensions written, as the format does)."""
    dims = list(array.shape) + [1] * max(0, 3 - array.ndim)
    header = struct.pack("<ii", NORB_MAGIC[array.dtype], array.ndim) + struct.pack(f"<{len(dims)}i", *dims)
    return header + array.tobytes()


def write_smallnorb(data_dir: Path, side: int = 6) -> dict[str, dict[str, np.ndarray]]:
    """Train rows in instances 4, 6, 7, 8, 9 and test rows in 0..3, 5, with small images."""
    folder = source_dir(data_dir, "smallnorb")
    rng = np.random.default_rng(0)
    out = {}
    for split, instances in (("train", [4, 6, 7, 8, 9, 7]), ("test", [0, 5])):
        n = len(instances)
        dat = rng.integers(0, 256, (n, 2, side, side), dtype=np.uint8)
        cat = np.array([i % 5 for i in range(n)], dtype="<i4")
        info = np.array([[inst, 2 * i, 4, i % 6] for i, inst in enumerate(instances)], dtype="<i4")
        for kind, array in (("dat", dat), ("cat", cat), ("info", info)):
            (folder / f"smallnorb-{PARTS[split]}-{kind}.mat.gz").write_bytes(gzip.compress(norb_bytes(array)))
        out[split] = {"dat": dat, "cat": cat, "info": info}
    return out


def write_stl10(data_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """stl10_binary.tar.gz: X before y (so labels must be read first), and an unlabelled part."""
    rng = np.random.default_rng(1)
    members, out = {}, {}
    for split, labels in (("train", [1, 10, 3, 3, 3, 3, 3, 3, 3, 3]), ("test", [2, 4])):
        images = rng.integers(0, 256, (len(labels), 3, 96, 96), dtype=np.uint8)
        members[f"stl10_binary/{split}_X.bin"] = images.tobytes()
        out[split] = (images, np.array(labels, dtype=np.uint8))
    members["stl10_binary/unlabeled_X.bin"] = bytes(3 * 96 * 96)
    for split, (_, labels) in out.items():
        members[f"stl10_binary/{split}_y.bin"] = labels.tobytes()
    members["stl10_binary/class_names.txt"] = "\n".join(
        ["airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck"]
    ).encode()
    members["stl10_binary/fold_indices.txt"] = b"0 1\n"
    write_tar(source_dir(data_dir, "stl10") / "stl10_binary.tar.gz", members)
    return out


__all__ = ["norb_bytes", "write_smallnorb", "write_stl10"]
