"""Sources shipped as binary arrays (NORB and STL-10 files) rather than image files.

- ``smallnorb``: six gzipped NORB binary matrices; the image is the first of each stereo pair
  (as TFDS's ``image``), the class ``*-cat``, and ``*-info`` gives the attributes
  ``instance``, ``elevation``, ``azimuth`` and ``lighting`` (the stream splits on instance).
  Images are read from the gzip stream one record at a time.
- ``stl10``: ``stl10_binary.tar.gz`` with ``{train,test}_X.bin`` (``[N, 3, 96, 96]``,
  column-major images) and ``_y.bin`` (1-based); ``class_names.txt``. The labels are read
  first, then each image as the tar streams past (the unlabelled part is skipped).
"""

from __future__ import annotations

import gzip
import struct
import tarfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO

import numpy as np

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members
from workers.ingest.writers.parquet_writer import ImageRow

NORB_TYPES = {
    0x1E3D4C55: np.uint8,
    0x1E3D4C54: np.dtype("<i4"),
    0x1E3D4C51: np.dtype("<f4"),
    0x1E3D4C53: np.dtype("<f8"),
}
NORB_CLASSES = ("four-legged animals", "human figures", "airplanes", "trucks", "cars")
NORB_INFO = ("instance", "elevation", "azimuth", "lighting")


def norb_header(handle: IO[bytes], where: str) -> tuple[np.dtype, tuple[int, ...]]:
    """The element type and shape of a NORB binary matrix; ``handle`` is left at its data."""
    magic, ndim = struct.unpack("<ii", handle.read(8))
    if magic not in NORB_TYPES or not 0 < ndim < 10:
        raise DatasetFormatError(f"{where} is not a NORB binary matrix (magic {magic:#x}).")
    dims = struct.unpack(f"<{max(ndim, 3)}i", handle.read(4 * max(ndim, 3)))
    return np.dtype(NORB_TYPES[magic]), tuple(dims[:ndim])


def _norb_array(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as handle:
        dtype, shape = norb_header(handle, path.name)
        return np.frombuffer(handle.read(), dtype=dtype).reshape(shape)


def _norb_rows(files: SourceFolder) -> Iterator[ImageRow]:
    for part, split in (("5x46789x9x18x6x2x96x96-training", "train"), ("5x01235x9x18x6x2x96x96-testing", "test")):
        labels = _norb_array(files.path(f"smallnorb-{part}-cat.mat.gz")).reshape(-1)
        info = _norb_array(files.path(f"smallnorb-{part}-info.mat.gz")).reshape(len(labels), -1)
        with gzip.open(files.path(f"smallnorb-{part}-dat.mat.gz"), "rb") as handle:
            _, shape = norb_header(handle, f"smallnorb-{part}-dat")
            if shape[0] != len(labels) or shape[1] != 2:
                raise DatasetFormatError(f"smallnorb {split}: images {shape} do not match {len(labels)} labels.")
            side = shape[2] * shape[3]
            for label, facts in zip(labels, info, strict=True):
                pair = np.frombuffer(handle.read(2 * side), dtype=np.uint8)
                yield ImageRow(
                    image=pair[:side].reshape(shape[2], shape[3]),
                    label=int(label),
                    split=split,
                    attributes={k: int(v) for k, v in zip(NORB_INFO, facts, strict=False)},
                )


@reader("smallnorb")
def read_smallnorb(files: SourceFolder) -> ConvertedSource:
    return ConvertedSource(rows=_norb_rows(files), class_names=NORB_CLASSES, official_split=True)


STL_SIDE = 96


def _stl10_labels(archive: Path) -> tuple[list[str], dict[str, np.ndarray]]:
    found = {
        PurePosixPath(m.name).name: m.data
        for m in iter_members(
            archive, lambda n: PurePosixPath(n).name in ("class_names.txt", "train_y.bin", "test_y.bin")
        )
    }
    if len(found) != 3:
        raise DatasetFormatError(f"{archive.name} lacks class_names.txt, train_y.bin or test_y.bin.")
    names = [line.strip() for line in found["class_names.txt"].decode().splitlines() if line.strip()]
    return names, {s: np.frombuffer(found[f"{s}_y.bin"], dtype=np.uint8) for s in ("train", "test")}


def _stl10_rows(archive: Path, labels: dict[str, np.ndarray]) -> Iterator[ImageRow]:
    size = 3 * STL_SIDE * STL_SIDE
    with tarfile.open(archive, "r|*") as opened:
        for info in opened:
            split = PurePosixPath(info.name).name.removesuffix("_X.bin")
            handle = opened.extractfile(info) if split in labels else None
            if handle is None:
                continue
            for label in labels[split]:
                record = np.frombuffer(handle.read(size), dtype=np.uint8)
                if record.size != size:
                    raise DatasetFormatError(f"{info.name} ends before its {len(labels[split])} images.")
                image = record.reshape(3, STL_SIDE, STL_SIDE).transpose(2, 1, 0)
                yield ImageRow(image=np.ascontiguousarray(image), label=int(label) - 1, split=split)


@reader("stl10")
def read_stl10(files: SourceFolder) -> ConvertedSource:
    archive = files.path("stl10_binary.tar.gz")
    names, labels = _stl10_labels(archive)
    return ConvertedSource(rows=_stl10_rows(archive, labels), class_names=names, official_split=True)


__all__ = ["NORB_CLASSES", "NORB_INFO", "STL_SIDE", "norb_header", "read_smallnorb", "read_stl10"]
