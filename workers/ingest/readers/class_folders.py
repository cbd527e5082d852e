"""Sources whose archive holds one folder per class (or names the class in the path), with
no official split: the streams draw a random split over all rows.

- ``sketch``: ``sketches_png.zip``, ``png/<class>/<n>.png`` (250 classes; ``filelist.txt``
  ignored).
- ``scenes15``: ``scene_categories.zip``, ``<class>/image_NNNN.jpg`` (15 classes).
- ``caltech256``: ``256_ObjectCategories.tar``, ``NNN.<name>/NNN_NNNN.jpg``; the label is
  ``NNN - 1`` (257 classes with ``257.clutter``), the class name the part after the dot.
- ``ig02``: three zips ``ig02-v1.0-{bikes,cars,people}.zip`` with ``<class>/<n>.image.png``
  beside masks; every ``*.image.png`` of both official parts is a row (the reference pools
  and re-splits them).
- ``uiuc_cars``: ``uiuc.tar.gz``, ``CarData/TrainImages/{pos,neg}-N.pgm``; the original
  training images only (``pos`` = car). The test images have no class and are left out.

Zips are read in name order (as the reference reads them), tars in archive order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path, PurePosixPath

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import folder_classes, is_image, iter_members, member_names, parent_name
from workers.ingest.writers.parquet_writer import ImageRow

ClassOf = Callable[[str], str | None]


def folder_rows(archives: Iterable[Path], class_of: ClassOf, index: dict[str, int]) -> Iterator[ImageRow]:
    """The images of the archives whose class (by path) is in ``index``, one at a time."""

    def keep(name: str) -> bool:
        return is_image(name) and class_of(name) in index

    for archive in archives:
        for member in iter_members(archive, keep):
            yield ImageRow(image=member.data, label=index[class_of(member.name) or ""])


def by_folder(
    archives: Sequence[Path], *, class_of: ClassOf = parent_name, class_names: Sequence[str] | None = None
) -> ConvertedSource:
    """One class per folder; names sorted from the archives unless given."""
    if class_names is None:
        found = [n for a in archives for n in member_names(a, is_image)]
        class_names = sorted({c for n in found if (c := class_of(n)) is not None})
    index = {name: label for label, name in enumerate(class_names)}
    return ConvertedSource(rows=folder_rows(archives, class_of, index), class_names=list(class_names))


@reader("sketch")
def read_sketch(files: SourceFolder) -> ConvertedSource:
    return by_folder([files.path("sketches_png.zip")])


@reader("scenes15")
def read_scenes15(files: SourceFolder) -> ConvertedSource:
    return by_folder([files.path("scene_categories.zip")])


CALTECH256_FOLDER = re.compile(r"(\d{3})\.(.+)")


@reader("caltech256")
def read_caltech256(files: SourceFolder) -> ConvertedSource:
    archive = files.path("256_ObjectCategories.tar")
    numbered = {}
    for folder in folder_classes(member_names(archive, is_image)):
        match = CALTECH256_FOLDER.fullmatch(folder)
        if match:
            numbered[int(match[1])] = folder
    if sorted(numbered) != list(range(1, len(numbered) + 1)):
        raise ValueError(f"{archive.name}: class folders are not numbered 001..{len(numbered):03d}.")
    folders = [numbered[n] for n in sorted(numbered)]
    converted = by_folder([archive], class_names=folders)
    names = [CALTECH256_FOLDER.fullmatch(f)[2] for f in folders]  # type: ignore[index]
    return ConvertedSource(rows=converted.rows, class_names=names)


IG02_CLASSES = ("bikes", "cars", "people")


def _ig02_class(name: str) -> str | None:
    return PurePosixPath(name).parts[0] if name.endswith(".image.png") else None


@reader("ig02")
def read_ig02(files: SourceFolder) -> ConvertedSource:
    archives = [files.path(f"ig02-v1.0-{c}.zip") for c in IG02_CLASSES]
    return by_folder(archives, class_of=_ig02_class, class_names=IG02_CLASSES)


def _uiuc_class(name: str) -> str | None:
    stem = PurePosixPath(name).name
    return stem.split("-", 1)[0] if stem.startswith(("pos-", "neg-")) else None


@reader("uiuc_cars")
def read_uiuc_cars(files: SourceFolder) -> ConvertedSource:
    return by_folder([files.path("uiuc.tar.gz")], class_of=_uiuc_class, class_names=("neg", "pos"))


__all__ = [
    "ClassOf",
    "by_folder",
    "folder_rows",
    "read_caltech256",
    "read_ig02",
    "read_scenes15",
    "read_sketch",
    "read_uiuc_cars",
]
