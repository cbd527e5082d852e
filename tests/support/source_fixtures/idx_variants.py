"""Fixtures for EMNIST (balanced, IDX files in gzip.zip) and rotated MNIST (MNIST's files)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from tests.support.source_fixtures.idx_sources import idx_bytes, write_idx_source
from tests.support.source_fixtures.tiny import pixels, source_dir, write_zip


def write_emnist_balanced(data_dir: Path) -> dict[str, list[int]]:
    """gzip.zip with the balanced split's four files (and another split's, to be ignored)."""
    labels = {"train": [0, 46, 10, 3, 3, 3, 3, 3, 3, 3], "test": [12, 5]}
    members = {"gzip/emnist-letters-train-labels-idx1-ubyte.gz": gzip.compress(idx_bytes(np.zeros(1, np.uint8)))}
    for split, values in labels.items():
        images = np.stack([pixels(i, 28, 28, 1) for i in range(len(values))])
        members[f"gzip/emnist-balanced-{split}-images-idx3-ubyte.gz"] = gzip.compress(idx_bytes(images))
        members[f"gzip/emnist-balanced-{split}-labels-idx1-ubyte.gz"] = gzip.compress(
            idx_bytes(np.array(values, np.uint8))
        )
    write_zip(source_dir(data_dir, "emnist_balanced") / "gzip.zip", members)
    return labels


def write_mnist_rotation(data_dir: Path) -> dict[str, np.ndarray]:
    return write_idx_source(data_dir, "mnist_rotation", train=12, test=3)


__all__ = ["write_emnist_balanced", "write_mnist_rotation"]
