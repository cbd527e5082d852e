"""Caltech categories (cars 2001, cars 1999, side motorbikes): tars nested in zips.

Each zip from data.caltech.edu holds one tar of images (``Cars_2001/cars_brad.tar`` and so
on); the archive a file comes from is its class, as in the dm_nevis handler, which reads every
tar member except ``README`` and ``.mat`` files. ``faces.tar`` is fetched with the others but
the reference uses no faces. There is no official split (the stream's rule draws at random).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import is_junk, iter_tar
from workers.ingest.writers.parquet_writer import ImageRow

CLASSES = ("car", "motorcycle")
# category -> (zip file, class), categories in the reference's sorted order
CATEGORIES = {
    "cars_1999": ("Cars_1999.zip", "car"),
    "cars_2001": ("Cars_2001.zip", "car"),
    "motorcycles_2001": ("motorbikes_side.zip", "motorcycle"),
}
_IGNORED = re.compile(r"^README$|\.mat$")


def _inner_tar(archive: zipfile.ZipFile, path: Path) -> zipfile.ZipInfo:
    tars = [i for i in archive.infolist() if i.filename.endswith(".tar") and not is_junk(i.filename)]
    if len(tars) != 1:
        raise DatasetFormatError(f"{path.name} should hold one .tar of images; it holds {[i.filename for i in tars]}.")
    return tars[0]


def _rows(path: Path, label: int) -> Iterator[ImageRow]:
    with zipfile.ZipFile(path) as archive, archive.open(_inner_tar(archive, path)) as inner:
        for member in iter_tar(inner, lambda n: not _IGNORED.search(n) and not is_junk(n)):
            yield ImageRow(image=member.data, label=label)


@reader("caltech_categories")
def read_caltech_categories(files: SourceFolder) -> ConvertedSource:
    paths = {c: (files.path(name), CLASSES.index(cls)) for c, (name, cls) in CATEGORIES.items()}

    def rows() -> Iterator[ImageRow]:
        for path, label in paths.values():
            yield from _rows(path, label)

    return ConvertedSource(
        rows=rows(),
        class_names=CLASSES,
        source_facts={
            "labels": "the archive of origin (cars_1999, "
            "cars_2001 -> car; motorbikes_side -> "
            "motorcycle); faces.tar unused"
        },
    )


__all__ = ["CATEGORIES", "CLASSES"]
