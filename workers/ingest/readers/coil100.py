"""COIL-100: ``coil-100.zip`` of ``coil-100/obj<N>__<angle>.png`` (100 objects x 72 views).

As in TFDS's builder (>= 2.0.0): the class is the object (``obj1``..``obj100``), and the
attribute ``angle_bin`` is the view angle in 5-degree bins (0..71), which the stream's
``by_attribute`` rule splits on. There is no official split.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import is_junk, iter_members
from workers.ingest.writers.parquet_writer import ImageRow

OBJECTS = 100
NAME = re.compile(r"obj(\d+)__(\d+)\.png$", re.IGNORECASE)


def _view(name: str) -> re.Match[str] | None:
    return None if is_junk(name) else NAME.fullmatch(PurePosixPath(name).name)


def _rows(archive: Path) -> Iterator[ImageRow]:
    for member in iter_members(archive, lambda n: _view(n) is not None):
        match = _view(member.name)
        assert match is not None
        obj, angle = int(match[1]), int(match[2])
        if not 1 <= obj <= OBJECTS or angle % 5 or not 0 <= angle < 360:
            raise ValueError(f"coil-100.zip: {member.name} is not obj1..100 at a 5-degree angle.")
        yield ImageRow(image=member.data, label=obj - 1, attributes={"angle_bin": angle // 5})


@reader("coil100")
def read_coil100(files: SourceFolder) -> ConvertedSource:
    return ConvertedSource(
        rows=_rows(files.path("coil-100.zip")), class_names=[f"obj{i}" for i in range(1, OBJECTS + 1)]
    )


__all__ = ["read_coil100"]
