"""MNIST and Fashion-MNIST: four gzip IDX files each (train and t10k images and labels).

Both ship the official train (60k) / test (10k) parts, kept as the rows' splits; the stream's
``official_test`` rule then draws dev and dev_test from train.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import read_idx
from workers.ingest.writers.parquet_writer import ImageRow

PARTS = (("train", "train"), ("t10k", "test"))
DIGITS = tuple(str(d) for d in range(10))
FASHION = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


def idx_rows(files: SourceFolder) -> Iterator[ImageRow]:
    """Each part's images with their labels, train first; one part in memory at a time."""
    for prefix, split in PARTS:
        images = read_idx(files.path(f"{prefix}-images-idx3-ubyte.gz"))
        labels = read_idx(files.path(f"{prefix}-labels-idx1-ubyte.gz"))
        if len(images) != len(labels):
            raise ValueError(f"{files.source.key} {prefix}: {len(images)} images but {len(labels)} labels.")
        for image, label in zip(images, labels, strict=True):
            yield ImageRow(image=image, label=int(label), split=split)


def _idx_source(files: SourceFolder, names: Sequence[str]) -> ConvertedSource:
    return ConvertedSource(rows=idx_rows(files), class_names=names, official_split=True)


@reader("mnist")
def read_mnist(files: SourceFolder) -> ConvertedSource:
    return _idx_source(files, DIGITS)


@reader("fashion_mnist")
def read_fashion_mnist(files: SourceFolder) -> ConvertedSource:
    return _idx_source(files, FASHION)


__all__ = ["DIGITS", "FASHION", "PARTS", "idx_rows", "read_fashion_mnist", "read_mnist"]
