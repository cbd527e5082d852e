"""Sources that are tables of pixel values rather than image files.

- ``semeion``: ``semeion.data``, one digit per line: 256 binary pixels (16x16) then a 10-way
  one-hot label; pixels are scaled to 0/255 (no official split).
- ``landsat``: ``sat.trn`` / ``sat.tst`` (official train / test), one 3x3 patch per line:
  36 values (4 spectral bands per pixel) then the class code 1..7 (code 6 never occurs); as
  in the reference the fourth band is dropped, giving 3x3 RGB-like images, label = code - 1.
- ``path_mnist``: ``hmnist_28_28_RGB.csv`` inside ``colorectal-histology-mnist.zip``,
  columns ``pixel0000``..``pixel2351`` (28x28x3) and ``label`` 1..8 (label - 1); read in
  chunks with pandas, so the CSV is never whole in memory.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.mnist import DIGITS
from workers.ingest.writers.parquet_writer import ImageRow

LANDSAT = (
    "red soil",
    "cotton crop",
    "grey soil",
    "damp grey soil",
    "soil with vegetation stubble",
    "mixture class",
    "very damp grey soil",
)
PATH_MNIST = ("tumor", "stroma", "complex", "lympho", "debris", "mucosa", "adipose", "empty")


def _semeion_rows(path: Path) -> Iterator[ImageRow]:
    with path.open() as lines:
        for number, line in enumerate(lines, 1):
            values = line.split()
            if not values:
                continue
            if len(values) < 266:
                raise ValueError(f"semeion.data line {number}: {len(values)} values, not 266.")
            pixels = (np.array([float(v) for v in values[:256]]).reshape(16, 16) > 0.5) * np.uint8(255)
            label = int(np.argmax([int(float(v)) for v in values[256:266]]))
            yield ImageRow(image=pixels.astype(np.uint8), label=label)


@reader("semeion")
def read_semeion(files: SourceFolder) -> ConvertedSource:
    return ConvertedSource(rows=_semeion_rows(files.path("semeion.data")), class_names=DIGITS)


def _landsat_rows(files: SourceFolder) -> Iterator[ImageRow]:
    for name, split in (("sat.trn", "train"), ("sat.tst", "test")):
        with files.path(name).open() as lines:
            for number, line in enumerate(lines, 1):
                values = line.split()
                if not values:
                    continue
                if len(values) != 37:
                    raise ValueError(f"{name} line {number}: {len(values)} values, not 37.")
                patch = np.array([int(float(v)) for v in values[:36]]).reshape(3, 3, 4)[..., :3]
                yield ImageRow(image=patch.clip(0, 255).astype(np.uint8), label=int(values[36]) - 1, split=split)


@reader("landsat")
def read_landsat(files: SourceFolder) -> ConvertedSource:
    return ConvertedSource(rows=_landsat_rows(files), class_names=LANDSAT, official_split=True)


PIXELS = [f"pixel{i:04d}" for i in range(28 * 28 * 3)]


def _path_mnist_rows(path: Path) -> Iterator[ImageRow]:
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == "hmnist_28_28_RGB.csv"]
        if not names:
            raise ValueError(f"{path.name} has no hmnist_28_28_RGB.csv.")
        with archive.open(names[0]) as handle:
            for chunk in pd.read_csv(handle, chunksize=1024):
                pixels = chunk[PIXELS].to_numpy().reshape(-1, 28, 28, 3).clip(0, 255).astype(np.uint8)
                for image, label in zip(pixels, chunk["label"].to_numpy(), strict=True):
                    yield ImageRow(image=image, label=int(label) - 1)


@reader("path_mnist")
def read_path_mnist(files: SourceFolder) -> ConvertedSource:
    return ConvertedSource(rows=_path_mnist_rows(files.path("colorectal-histology-mnist.zip")), class_names=PATH_MNIST)


__all__ = ["LANDSAT", "PATH_MNIST", "read_landsat", "read_path_mnist", "read_semeion"]
