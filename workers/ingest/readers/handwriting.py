"""Character sources: Chars74K (English) and CASIA-HWDB 1.1.

- ``chars74k``: ``English{Img,Hnd,Fnt}.tgz``; the PNGs under a ``Bmp`` folder (Img), an
  ``Img`` folder (Hnd) and all PNGs of Fnt; the class is ``SampleNNN`` (1..62: digits, upper,
  lower case). The reference pools the official train and test parts and draws a random split
  (``prepare`` removes exact duplicates as it de-duplicates), so ``Lists.tgz`` is not needed.
- ``casia_hwdb``: ``Gnt1.1Train{Part1,Part2}.zip`` (train) and ``Gnt1.1Test.zip`` (test) of
  ``.gnt`` files: records of a little-endian uint32 length, a 2-byte GB2312 tag, uint16 width
  and height, then the grey bitmap; as in the reference the image is inverted (background 0)
  and the class is the decoded tag (its raw bytes where it does not decode). Classes sorted.
  Each ``.gnt`` is streamed record by record, twice (tags, then images).
"""

from __future__ import annotations

import codecs
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO

import numpy as np

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members
from workers.ingest.writers.parquet_writer import ImageRow

CHARS74K_PARTS = {"EnglishImg.tgz": "Bmp", "EnglishHnd.tgz": "Img", "EnglishFnt.tgz": ""}
CHARS74K_CLASSES = tuple("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def chars74k_class(name: str, marker: str) -> int | None:
    """The class index of a Chars74K member (``.../SampleNNN/...png`` under ``marker``), or None."""
    path = PurePosixPath(name)
    at = name.find("Sample")
    number = name[at + 6 : at + 9] if at >= 0 else ""
    if path.suffix != ".png" or (marker and marker not in path.parts[:-1]) or not number.isdigit():
        return None
    return int(number) - 1 if 1 <= int(number) <= len(CHARS74K_CLASSES) else None


@reader("chars74k")
def read_chars74k(files: SourceFolder) -> ConvertedSource:
    def rows() -> Iterator[ImageRow]:
        for name, marker in CHARS74K_PARTS.items():
            for member in iter_members(files.path(name), lambda n, m=marker: chars74k_class(n, m) is not None):
                yield ImageRow(image=member.data, label=chars74k_class(member.name, marker) or 0)

    return ConvertedSource(rows=rows(), class_names=CHARS74K_CLASSES)


CASIA_PARTS = (("Gnt1.1TrainPart1.zip", "train"), ("Gnt1.1TrainPart2.zip", "train"), ("Gnt1.1Test.zip", "test"))


def tag_name(raw: bytes) -> str:
    """A record's class: its GB2312 tag decoded, else the raw bytes written out."""
    try:
        return codecs.decode(raw, "gb2312")
    except UnicodeDecodeError:
        return repr(raw)


def gnt_records(handle: IO[bytes], where: str, *, pixels: bool = True) -> Iterator[tuple[str, np.ndarray | None]]:
    """The (class, inverted bitmap) records of a ``.gnt`` stream; bitmaps skipped unless ``pixels``."""
    while header := handle.read(10):
        if len(header) < 10:
            raise DatasetFormatError(f"{where}: a record header is cut short.")
        length, raw, width, height = struct.unpack("<I2sHH", header)
        if length != width * height + 10:
            raise DatasetFormatError(f"{where}: record length {length} is not {width}x{height} + 10.")
        data = handle.read(width * height)
        if len(data) < width * height:
            raise DatasetFormatError(f"{where}: a bitmap is cut short.")
        image = 255 - np.frombuffer(data, dtype=np.uint8).reshape(height, width) if pixels else None
        yield tag_name(raw), image


def _gnt_files(path: Path) -> Iterator[tuple[str, IO[bytes]]]:
    with zipfile.ZipFile(path) as archive:
        for name in sorted(archive.namelist()):
            if not name.endswith("/"):
                with archive.open(name) as handle:
                    yield f"{path.name}:{name}", handle


def _casia_rows(files: SourceFolder, index: dict[str, int]) -> Iterator[ImageRow]:
    for file_name, split in CASIA_PARTS:
        for where, handle in _gnt_files(files.path(file_name)):
            for tag, image in gnt_records(handle, where):
                yield ImageRow(image=image, label=index[tag], split=split)  # type: ignore[arg-type]


@reader("casia_hwdb")
def read_casia_hwdb(files: SourceFolder) -> ConvertedSource:
    tags = {
        tag
        for file_name, _ in CASIA_PARTS
        for where, handle in _gnt_files(files.path(file_name))
        for tag, _ in gnt_records(handle, where, pixels=False)
    }
    classes = sorted(tags)
    index = {tag: label for label, tag in enumerate(classes)}
    return ConvertedSource(rows=_casia_rows(files, index), class_names=classes, official_split=True)


__all__ = [
    "CASIA_PARTS",
    "CHARS74K_CLASSES",
    "CHARS74K_PARTS",
    "chars74k_class",
    "gnt_records",
    "read_casia_hwdb",
    "read_chars74k",
    "tag_name",
]
