"""Helpers for the archive layouts many sources share, each reading one member at a time.

Sources arrive as zips, tars (plain or compressed, sometimes nested in a zip), IDX files and
CIFAR-style binary batches. These helpers stream them: a tar is read in ``r|*`` mode (one
pass, nothing seeks back or extracts), a zip member is read when its row is made, so
converting a source needs memory for one image, never for the archive.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

import numpy as np

from services.core.errors import DatasetFormatError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".ppm", ".pgm", ".pbm", ".pnm", ".tif", ".tiff", ".webp")
_JUNK = ("__MACOSX", ".DS_Store", "Thumbs.db")
Keep = Callable[[str], bool]


@dataclass(frozen=True)
class Member:
    """One file of an archive: its path inside the archive and its bytes."""

    name: str
    data: bytes

    @property
    def parts(self) -> tuple[str, ...]:
        return PurePosixPath(self.name).parts


def is_junk(name: str) -> bool:
    """Resource forks and OS droppings that archives made on Macs and Windows carry."""
    parts = PurePosixPath(name).parts
    return any(p in _JUNK or p.startswith("._") for p in parts)


def is_image(name: str) -> bool:
    """A member that holds an image (by suffix), not junk."""
    return name.lower().endswith(IMAGE_SUFFIXES) and not is_junk(name)


def _is_zip(path: Path) -> bool:
    return zipfile.is_zipfile(path)


def member_names(path: Path, keep: Keep | None = None, *, zip_stored_order: bool = False) -> list[str]:
    """The file names inside a zip (sorted, or as stored with ``zip_stored_order``) or tar
    (archive order); headers only, though a compressed tar is decompressed once to find them."""
    if _is_zip(path):
        with zipfile.ZipFile(path) as archive:
            names = [i.filename for i in archive.infolist() if not i.is_dir()]
            names = names if zip_stored_order else sorted(names)
    else:
        with tarfile.open(path, "r:*") as archive:  # a plain tar is skimmed, not read
            names = [m.name for m in archive if m.isfile()]
    return [n for n in names if keep is None or keep(n)]


def iter_members(path: Path, keep: Keep | None = None, *, zip_stored_order: bool = False) -> Iterator[Member]:
    """The files of a zip (sorted by name, as the reference reads most zips, or in the order
    stored in the archive with ``zip_stored_order``) or a tar (in archive order), read one at
    a time; ``keep`` filters names."""
    if _is_zip(path):
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            for info in infos if zip_stored_order else sorted(infos, key=lambda i: i.filename):
                if not info.is_dir() and (keep is None or keep(info.filename)):
                    yield Member(info.filename, archive.read(info))
        return
    with path.open("rb") as raw:
        yield from iter_tar(raw, keep)


def iter_tar(fileobj: IO[bytes], keep: Keep | None = None) -> Iterator[Member]:
    """The files of a (compressed) tar read from a stream, e.g. a tar member of a zip."""
    with tarfile.open(fileobj=fileobj, mode="r|*") as archive:
        for info in archive:
            if info.isfile() and (keep is None or keep(info.name)):
                handle = archive.extractfile(info)
                if handle is not None:
                    yield Member(info.name, handle.read())


def iter_images(path: Path) -> Iterator[Member]:
    """The image members of a zip or tar, in :func:`iter_members`'s order."""
    return iter_members(path, is_image)


def parent_name(name: str) -> str:
    """The folder an archive member is in (``a/b/cat/1.jpg`` -> ``cat``)."""
    return PurePosixPath(name).parent.name


def folder_classes(names: Iterable[str]) -> list[str]:
    """Sorted names of the folders holding the given members: one folder per class."""
    return sorted({parent_name(n) for n in names})


def open_compressed(path: Path) -> IO[bytes]:
    """A file, decompressed on read when it is gzip, bzip2 or xz (by its magic bytes)."""
    with path.open("rb") as probe:
        head = probe.read(6)
    if head.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb")
    if head.startswith(b"BZh"):
        return bz2.open(path, "rb")
    if head.startswith(b"\xfd7zXZ"):
        return lzma.open(path, "rb")
    return path.open("rb")


_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (MNIST's format; gzip or plain) as an array of its declared shape."""
    with open_compressed(path) as handle:
        return parse_idx(handle.read(), path.name)


def parse_idx(data: bytes, where: str) -> np.ndarray:
    """IDX bytes (already decompressed) as an array of their declared shape."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise DatasetFormatError(f"{where} is not an IDX file (magic {data[:4]!r}).")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_TYPES[data[2]])
    body = np.frombuffer(data, dtype=dtype, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise DatasetFormatError(f"{where}: header says {shape}, body has {body.size} values.")
    return body.reshape(shape)


def cifar_records(data: bytes, label_bytes: int, where: str) -> Iterator[tuple[bytes, np.ndarray]]:
    """The records of a CIFAR binary batch: ``label_bytes`` label bytes, then a 3x32x32 image
    stored plane by plane; yields the label bytes and the image as ``[32, 32, 3]`` uint8."""
    size = label_bytes + 3 * 32 * 32
    if len(data) % size:
        raise DatasetFormatError(f"{where}: {len(data)} bytes is not a whole number of {size}-byte CIFAR records.")
    records = np.frombuffer(data, dtype=np.uint8).reshape(-1, size)
    for record in records:
        yield bytes(record[:label_bytes]), record[label_bytes:].reshape(3, 32, 32).transpose(1, 2, 0)


__all__ = [
    "IMAGE_SUFFIXES",
    "Keep",
    "Member",
    "cifar_records",
    "folder_classes",
    "is_image",
    "is_junk",
    "iter_images",
    "iter_members",
    "iter_tar",
    "member_names",
    "open_compressed",
    "parent_name",
    "parse_idx",
    "read_idx",
]
