"""Stanford Cars and FGVC Aircraft (family): fine-grained sources with annotation files.

- Stanford Cars (dm_nevis handler): ``cars_annos.mat`` lists every image of ``car_ims.tgz``
  with its 1-based ``class`` and a ``test`` flag (0: train, 1: test); an image is found by
  its file name. Class names are the file's ``class_names`` (the reference's hard-coded
  list of the same 196 names).
- FGVC Aircraft, family level (dm_nevis handler): ``data/images_family_{trainval,test}.txt``
  lines ``<image id> <family>``, classes in the order of ``data/families.txt``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members
from workers.ingest.readers.member_scan import base_name, clean_name, collect, need, stem, text_lines
from workers.ingest.writers.parquet_writer import ImageRow


def load_mat(path: Path) -> dict:
    """A MATLAB file's variables, cells and structs squeezed (scipy.io)."""
    from scipy.io import loadmat  # noqa: PLC0415 (only .mat sources pay for scipy)

    return loadmat(path, squeeze_me=True)


def mat_strings(value: object) -> list[str]:
    return [str(v) for v in np.atleast_1d(value)]


def _cars_annotations(path: Path) -> tuple[list[str], dict[str, tuple[int, str]]]:
    mat = load_mat(path)
    if "annotations" not in mat:
        raise DatasetFormatError(f"{path.name} has no 'annotations' variable.")
    records = np.atleast_1d(mat["annotations"])
    names = mat_strings(mat["class_names"]) if "class_names" in mat else []
    by_file: dict[str, tuple[int, str]] = {}
    for record in records:
        label = int(record["class"]) - 1
        split = "test" if int(record["test"]) == 1 else "train"
        by_file[base_name(str(record["relative_im_path"]))] = (label, split)
    count = max(label for label, _ in by_file.values()) + 1
    if len(names) < count:
        names = [f"class {i + 1}" for i in range(count)]
    return names, by_file


@reader("stanford_cars")
def read_stanford_cars(files: SourceFolder) -> ConvertedSource:
    images = files.path("car_ims.tgz")
    class_names, by_file = _cars_annotations(files.path("cars_annos.mat"))

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(images, lambda n: base_name(n) in by_file):
            label, split = by_file[base_name(member.name)]
            yield ImageRow(image=member.data, label=label, split=split)

    return ConvertedSource(
        rows=rows(),
        class_names=class_names,
        official_split=True,
        source_facts={"labels": "cars_annos.mat class - 1; test flag"},
    )


_AIRCRAFT = "fgvc-aircraft-2013b/data/"
_ID_AND_NAME = re.compile(r"^(\d+) (.+)$")


def _aircraft_lists(path: Path) -> tuple[list[str], dict[int, tuple[str, str]]]:
    wanted = ("families.txt", "images_family_trainval.txt", "images_family_test.txt")
    found = collect(path, lambda n: n in {_AIRCRAFT + w for w in wanted}, want=len(wanted))
    families, trainval, test = need(found, [_AIRCRAFT + w for w in wanted], path)
    classes = text_lines(families)
    by_id: dict[int, tuple[str, str]] = {}
    for data, split in ((trainval, "train"), (test, "test")):
        for line in text_lines(data):
            match = _ID_AND_NAME.match(line)
            if not match:
                raise DatasetFormatError(f"{path.name}: line {line!r} is not '<id> <family>'.")
            by_id[int(match.group(1))] = (match.group(2), split)
    unknown = sorted({name for name, _ in by_id.values()} - set(classes))
    if unknown:
        raise DatasetFormatError(f"{path.name}: families {unknown} are not in families.txt.")
    return classes, by_id


@reader("fgvc_aircraft_family")
def read_fgvc_aircraft_family(files: SourceFolder) -> ConvertedSource:
    archive = files.path("fgvc-aircraft-2013b.tar.gz")
    classes, by_id = _aircraft_lists(archive)

    def listed(name: str) -> bool:
        name = clean_name(name)
        return "images/" in name and stem(name).isdigit() and int(stem(name)) in by_id

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(archive, listed):
            family, split = by_id[int(stem(member.name))]
            yield ImageRow(image=member.data, label=classes.index(family), split=split)

    return ConvertedSource(
        rows=rows(),
        class_names=classes,
        official_split=True,
        source_facts={"labels": "images_family_{trainval,test}.txt; classes in families.txt order"},
    )


__all__ = ["load_mat", "mat_strings"]
