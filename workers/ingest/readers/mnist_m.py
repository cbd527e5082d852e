"""MNIST-M: ``mnist_m.tar.gz`` with ``mnist_m/mnist_m_{train,test}/*.png`` and the label lists
``mnist_m/mnist_m_{train,test}_labels.txt`` (lines ``<file>.png <digit>``).

As in the reference, the two lists are merged by file name (test entries win) and every
PNG whose name is listed gets that label; train and test are pooled (the stream draws a
random split over all rows, and ``prepare`` removes exact duplicates). The tar is read twice:
the label lists first, then the images one at a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import is_image, iter_members
from workers.ingest.readers.mnist import DIGITS
from workers.ingest.writers.parquet_writer import ImageRow

LINE = re.compile(r"(\d+\.png) (\d+)")
LISTS = ("mnist_m_train_labels.txt", "mnist_m_test_labels.txt")


def _labels(archive: Path) -> dict[str, int]:
    found = {m.name.rsplit("/", 1)[-1]: m.data for m in iter_members(archive, lambda n: PurePosixPath(n).name in LISTS)}
    missing = [name for name in LISTS if name not in found]
    if missing:
        raise ValueError(f"{archive.name} lacks {', '.join(missing)}.")
    labels: dict[str, int] = {}
    for name in LISTS:  # train first, so test entries override
        for line in found[name].decode().splitlines():
            match = LINE.search(line)
            if match:
                labels[match[1]] = int(match[2])
    return labels


def _rows(archive: Path, labels: dict[str, int]) -> Iterator[ImageRow]:
    for member in iter_members(archive, lambda n: is_image(n) and PurePosixPath(n).name in labels):
        yield ImageRow(image=member.data, label=labels[PurePosixPath(member.name).name])


@reader("mnist_m")
def read_mnist_m(files: SourceFolder) -> ConvertedSource:
    archive = files.path("mnist_m.tar.gz")
    return ConvertedSource(rows=_rows(archive, _labels(archive)), class_names=DIGITS)


__all__ = ["read_mnist_m"]
