"""VisTex reference textures (dm_nevis ``vistex``): ``VisTex.tar.gz`` holds, in
``VisionTexture/``, LZW-compressed ``.tar.Z`` archives (and plain tars) that unpack into one
tree. ``<...>/Images/Reference/<class>/<file>.ppm`` entries, mostly symbolic links into the
tree's images by resolution, are the examples, labelled by ``<class>``.

Read in two passes over the inner archives, one decompressed at a time (``ncompress``, as the
reference) into a spooled temporary file: the first finds the reference entries and where
their links point, the second reads the pointed-to images. Class names are sorted (the
reference lists them in file-system walk order). No official split.
"""

from __future__ import annotations

import io
import posixpath
import re
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.member_scan import clean_name
from workers.ingest.writers.parquet_writer import ImageRow

_REFERENCE = re.compile(r"^.+/Images/Reference/(.+)/.+.ppm")
_SPOOL = 64 << 20


def _inner_tars(path: Path) -> Iterator[tarfile.TarFile]:
    """Each tar inside the outer archive, opened seekable (LZW ones decompressed)."""
    import ncompress  # noqa: PLC0415 (only VisTex needs LZW)

    with tarfile.open(path, "r|*") as outer:
        for member in outer:
            name = member.name
            if not member.isfile() or ".tar" not in posixpath.basename(name):
                continue
            handle = outer.extractfile(member)
            if handle is None:
                continue
            with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as spool:
                if name.endswith(".Z"):
                    ncompress.decompress(io.BytesIO(handle.read()), spool)
                else:
                    spool.write(handle.read())
                spool.seek(0)
                with tarfile.open(fileobj=spool, mode="r:*") as inner:
                    yield inner


def _resolve(member: tarfile.TarInfo) -> str:
    name = clean_name(member.name)
    if member.issym():
        return posixpath.normpath(posixpath.join(posixpath.dirname(name), member.linkname))
    if member.islnk():
        return posixpath.normpath(clean_name(member.linkname))
    return name


def _references(path: Path) -> dict[str, list[str]]:
    """Image path in the unpacked tree -> the classes of the reference entries naming it."""
    targets: dict[str, list[str]] = {}
    for inner in _inner_tars(path):
        for member in inner:
            match = _REFERENCE.match(clean_name(member.name))
            if match and (member.isfile() or member.issym() or member.islnk()):
                targets.setdefault(_resolve(member), []).append(match.group(1))
    return targets


@reader("vistex")
def read_vistex(files: SourceFolder) -> ConvertedSource:
    archive = files.path("VisTex.tar.gz")
    targets = _references(archive)
    if not targets:
        raise DatasetFormatError(f"{archive.name} has no .../Images/Reference/<class>/*.ppm.")
    classes = sorted({c for found in targets.values() for c in found})

    def rows() -> Iterator[ImageRow]:
        left = set(targets)
        for inner in _inner_tars(archive):
            for member in inner:
                name = clean_name(member.name)
                if member.isfile() and name in left:
                    left.discard(name)
                    data = inner.extractfile(member).read()  # type: ignore[union-attr]
                    for cls in targets[name]:
                        yield ImageRow(image=data, label=classes.index(cls))
        if left:
            raise DatasetFormatError(
                f"{archive.name}: {len(left)} reference links point at no image, e.g. {sorted(left)[0]}."
            )

    return ConvertedSource(
        rows=rows(),
        class_names=classes,
        source_facts={"labels": "Images/Reference/<class> (links resolved), classes sorted"},
    )


__all__: list[str] = []
