"""Sources built from IDX files beside plain MNIST: EMNIST (balanced) and rotated MNIST.

- ``emnist_balanced``: ``gzip.zip`` holds ``gzip/emnist-balanced-{train,test}-{images-idx3,
  labels-idx1}-ubyte.gz`` (47 classes, official train / test). Images are kept as stored,
  which is how TFDS (the reference's loader) serves them: transposed relative to upright.
- ``mnist_rotation``: the original MNIST files; as in the reference, every train image is
  rotated by a whole number of degrees drawn from ``randint(0, 360)`` with seed 99999
  (``scipy.ndimage.rotate``, same size), test images are not rotated. The draw order is the
  train order; the reference draws from numpy's global state, so its angles are not
  reproducible exactly, and these stand in for them. The angle is kept as ``attr.angle``.
"""

from __future__ import annotations

import gzip
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from scipy import ndimage

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import parse_idx, read_idx
from workers.ingest.readers.mnist import DIGITS, PARTS
from workers.ingest.writers.parquet_writer import ImageRow

BALANCED = (*DIGITS, *"ABCDEFGHIJKLMNOPQRSTUVWXYZ", *"abdefghnqrt")
ROTATION_SEED = 99_999


def _zip_idx(archive: zipfile.ZipFile, suffix: str) -> np.ndarray:
    names = [n for n in archive.namelist() if n.endswith(suffix)]
    if len(names) != 1:
        raise ValueError(f"gzip.zip should hold one *{suffix}; found {names or 'none'}.")
    return parse_idx(gzip.decompress(archive.read(names[0])), names[0])


def _emnist_rows(path: Path) -> Iterator[ImageRow]:
    with zipfile.ZipFile(path) as archive:
        for split in ("train", "test"):
            images = _zip_idx(archive, f"emnist-balanced-{split}-images-idx3-ubyte.gz")
            labels = _zip_idx(archive, f"emnist-balanced-{split}-labels-idx1-ubyte.gz")
            for image, label in zip(images, labels, strict=True):
                yield ImageRow(image=image, label=int(label), split=split)


@reader("emnist_balanced")
def read_emnist_balanced(files: SourceFolder) -> ConvertedSource:
    return ConvertedSource(rows=_emnist_rows(files.path("gzip.zip")), class_names=BALANCED, official_split=True)


def _rotated_rows(files: SourceFolder) -> Iterator[ImageRow]:
    rng = np.random.RandomState(ROTATION_SEED)
    for prefix, split in PARTS:
        images = read_idx(files.path(f"{prefix}-images-idx3-ubyte.gz"))
        labels = read_idx(files.path(f"{prefix}-labels-idx1-ubyte.gz"))
        for image, label in zip(images, labels, strict=True):
            angle = int(rng.randint(0, high=360)) if split == "train" else 0
            pixels = ndimage.rotate(image, angle, reshape=False) if angle else image
            yield ImageRow(image=pixels, label=int(label), split=split, attributes={"angle": angle})


@reader("mnist_rotation")
def read_mnist_rotation(files: SourceFolder) -> ConvertedSource:
    return ConvertedSource(rows=_rotated_rows(files), class_names=DIGITS, official_split=True)


__all__ = ["BALANCED", "ROTATION_SEED", "read_emnist_balanced", "read_mnist_rotation"]
