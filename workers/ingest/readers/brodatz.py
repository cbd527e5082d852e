"""Brodatz: 111 GIFs (``D1.gif``..``D112.gif``, no D14), one texture (class) per file.

As the reference does, each texture is cut into 9 non-overlapping crops on a 3x3 grid of
``width // 3`` x ``height // 3`` cells (x outer, y inner), and the crops are the rows; the
stream's ``per_class_counts`` rule then deals 5/1/1/2 of each class's crops. Class names are
the file stems in sorted order. The catalogue's file list says which files there are, so a
missing texture is an error rather than a smaller dataset.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.writers.parquet_writer import ImageRow

GRID = 3


def crops(pixels: np.ndarray) -> Iterator[np.ndarray]:
    """The 9 grid cells of an image, column by column (x outer, y inner)."""
    height, width = pixels.shape[:2]
    cell_h, cell_w = height // GRID, width // GRID
    for i in range(GRID):
        for j in range(GRID):
            yield pixels[j * cell_h : (j + 1) * cell_h, i * cell_w : (i + 1) * cell_w]


def _rows(paths: Sequence[Path]) -> Iterator[ImageRow]:
    for label, path in enumerate(paths):
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("L"))
        for number, crop in enumerate(crops(pixels)):
            yield ImageRow(image=np.ascontiguousarray(crop), label=label, attributes={"crop": number})


@reader("brodatz")
def read_brodatz(files: SourceFolder) -> ConvertedSource:
    names = sorted(Path(f.name).stem for f in files.source.files)
    paths = [files.path(f"{name}.gif") for name in names]
    return ConvertedSource(rows=_rows(paths), class_names=names)


__all__ = ["GRID", "crops", "read_brodatz"]
