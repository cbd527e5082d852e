"""Extended Yale B (Kaggle ``extended-yale-dataset-b.zip``): one folder per subject of PGMs
named ``yaleB<id>_P<pose>A<azimuth>E<elevation>.pgm``, beside ``*.info`` lists and
``*_Ambient.pgm`` images without the subject (both skipped, as in the reference).

The class is the subject (28, sorted folder names); the attribute ``pose`` (``P00``..``P08``,
characters 8..10 of the file name) is what the stream's ``by_attribute`` rule splits on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import is_junk, iter_members, member_names
from workers.ingest.writers.parquet_writer import ImageRow

NAME = re.compile(r"(yaleB\d+)_(P\d\d)A[+-]\d+E[+-]\d+\.pgm")


def _face(path: str) -> re.Match[str] | None:
    return None if is_junk(path) else NAME.fullmatch(PurePosixPath(path).name)


def _rows(archive: Path, index: dict[str, int]) -> Iterator[ImageRow]:
    for member in iter_members(archive, lambda n: _face(n) is not None):
        match = _face(member.name)
        assert match is not None
        yield ImageRow(image=member.data, label=index[match[1]], attributes={"pose": match[2]})


@reader("extended_yaleb")
def read_extended_yaleb(files: SourceFolder) -> ConvertedSource:
    archive = files.path("extended-yale-dataset-b.zip")
    subjects = sorted({m[1] for n in member_names(archive) if (m := _face(n))})
    index = {subject: label for label, subject in enumerate(subjects)}
    return ConvertedSource(rows=_rows(archive, index), class_names=subjects)


__all__ = ["read_extended_yaleb"]
