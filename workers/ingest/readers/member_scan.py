"""Read an archive's small members (lists, annotations, label files) before its images.

Many sources keep the files that say which image is in which split or class in the same
archive as the images, often *after* them. A reader then makes two passes: this module's
:func:`collect` reads the small members first (stopping as soon as it has all it was asked
for, and seeking over image bytes when the tar is uncompressed), and the reader's rows then
stream the images with :func:`workers.ingest.readers.layouts.iter_members`.
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from services.core.errors import DatasetFormatError

Keep = Callable[[str], bool]


def clean_name(name: str) -> str:
    """An archive member's path without a leading ``./`` (some tars are made from ``.``)."""
    while name.startswith("./"):
        name = name[2:]
    return name


def base_name(name: str) -> str:
    return PurePosixPath(name).name


def stem(name: str) -> str:
    return PurePosixPath(name).stem


def _is_plain_tar(path: Path) -> bool:
    """Not gzip, bzip2 or xz: its members can be listed by seeking over their bytes."""
    with path.open("rb") as probe:
        head = probe.read(6)
    return not head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ"))


def collect(path: Path, keep: Keep, *, want: int | None = None) -> dict[str, bytes]:
    """The members of a zip or tar whose (cleaned) name ``keep`` accepts, by cleaned name.

    ``want``: stop once this many are read (the lists of a source sit at a known number of
    paths; a compressed tar is then not read to its end).
    """
    found: dict[str, bytes] = {}
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                name = clean_name(info.filename)
                if not info.is_dir() and keep(name):
                    found[name] = archive.read(info)
        return found
    mode = "r:" if _is_plain_tar(path) else "r|*"
    with tarfile.open(path, mode) as archive:
        for info in archive:
            name = clean_name(info.name)
            if not info.isfile() or not keep(name):
                continue
            handle = archive.extractfile(info)
            if handle is not None:
                found[name] = handle.read()
            if want is not None and len(found) >= want:
                break
    return found


def need(found: dict[str, bytes], names: Iterable[str], archive: Path) -> list[bytes]:
    """The members ``names`` (matched by path suffix) of what :func:`collect` read.

    Raises:
        DatasetFormatError: one is not in the archive, named with the archive.
    """
    out = []
    for wanted in names:
        hits = [data for name, data in found.items() if name == wanted or name.endswith("/" + wanted)]
        if len(hits) != 1:
            raise DatasetFormatError(
                f"{archive.name} should hold one {wanted!r}; found {len(hits)}. Is it the "
                "source's original archive (check its checksum with `nevis data fetch`)?"
            )
        out.append(hits[0])
    return out


def text_lines(data: bytes) -> list[str]:
    """A list file's non-empty lines, stripped (any line ending)."""
    return [line.strip() for line in data.decode("utf-8", errors="replace").splitlines() if line.strip()]


__all__ = ["base_name", "clean_name", "collect", "need", "stem", "text_lines"]
