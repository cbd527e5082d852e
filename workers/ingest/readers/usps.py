"""USPS: two bzip2 LIBSVM files (``usps.bz2`` train, ``usps.t.bz2`` test) of 16x16 digits.

Each line is ``<label 1..10> <index>:<value> ...`` with 256 values in [-1, 1]; like the
reference, values are mapped linearly to [0, 255] (truncated to uint8) and the label is the
first field minus one. The source's train / test parts are kept as the rows' splits.
"""

from __future__ import annotations

import bz2
from collections.abc import Iterator

import numpy as np

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.mnist import DIGITS
from workers.ingest.writers.parquet_writer import ImageRow

SIDE = 16


def parse_line(line: str, where: str) -> tuple[int, np.ndarray]:
    """One LIBSVM line as (label, 16x16 uint8 image)."""
    label, *pairs = line.split()
    values = np.zeros(SIDE * SIDE)  # LIBSVM leaves out zeros
    for pair in pairs:
        index, _, value = pair.partition(":")
        if not 1 <= int(index) <= SIDE * SIDE:
            raise ValueError(f"{where}: pixel index {index} is outside 1..{SIDE * SIDE}.")
        values[int(index) - 1] = float(value)
    pixels = ((values + 1.0) / 2.0 * 255.0).clip(0, 255).astype(np.uint8)
    return int(float(label)) - 1, pixels.reshape(SIDE, SIDE)


def _rows(files: SourceFolder) -> Iterator[ImageRow]:
    for name, split in (("usps.bz2", "train"), ("usps.t.bz2", "test")):
        with bz2.open(files.path(name), "rt") as lines:
            for number, line in enumerate(lines, 1):
                if line.strip():
                    label, image = parse_line(line, f"{name} line {number}")
                    yield ImageRow(image=image, label=label, split=split)


@reader("usps")
def read_usps(files: SourceFolder) -> ConvertedSource:
    return ConvertedSource(rows=_rows(files), class_names=DIGITS, official_split=True)


__all__ = ["SIDE", "parse_line", "read_usps"]
