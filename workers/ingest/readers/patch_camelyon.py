"""PatchCamelyon: six gzipped HDF5 files, ``camelyonpatch_level_2_split_{train,valid,test}_
{x,y}.h5.gz``; ``x`` holds ``[N, 96, 96, 3]`` uint8 patches, ``y`` ``[N, 1, 1, 1]`` labels
(1: the centre holds tumour tissue). Official train / valid / test, as TFDS reads them.

h5py reads the file through the gzip stream (no copy on disk); the patches are read a block
of rows at a time, front to back, so the stream only moves forward.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator

import h5py
import numpy as np

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.writers.parquet_writer import ImageRow

PARTS = (("train", "train"), ("valid", "val"), ("test", "test"))
BLOCK = 512
CLASSES = ("no tumour", "tumour")


def _array(files: SourceFolder, part: str, kind: str) -> Iterator[np.ndarray]:
    """Blocks of rows of one file's single dataset (``x`` or ``y``)."""
    with (
        gzip.open(files.path(f"camelyonpatch_level_2_split_{part}_{kind}.h5.gz"), "rb") as raw,
        h5py.File(raw, "r") as opened,
    ):
        data = opened[kind]
        for start in range(0, data.shape[0], BLOCK):
            yield np.asarray(data[start : start + BLOCK])


def _rows(files: SourceFolder) -> Iterator[ImageRow]:
    for part, split in PARTS:
        labels = np.concatenate(list(_array(files, part, "y"))).reshape(-1)
        done = 0
        for block in _array(files, part, "x"):
            for image in block:
                yield ImageRow(image=image, label=int(labels[done]), split=split)
                done += 1
        if done != len(labels):
            raise ValueError(f"PatchCamelyon {part}: {done} patches but {len(labels)} labels.")


@reader("patch_camelyon")
def read_patch_camelyon(files: SourceFolder) -> ConvertedSource:
    return ConvertedSource(rows=_rows(files), class_names=CLASSES, official_split=True)


__all__ = ["BLOCK", "CLASSES", "PARTS", "read_patch_camelyon"]
