"""FULL-stream sources whose class is read off each image's path inside one or more archives
(a folder name, or a file-name prefix), with no official split: the stream draws a random
split over all rows (``prepare`` removes exact duplicates where the reference de-duplicates).

Per source, what names the class (facts from the reference's handlers):

- ``coil20``: ``coil-20-proc/obj<N>__<view>.png``, object N (20 classes ``obj1``..).
- ``mpeg7``: GIF file name ``<class>-<n>.gif``; the ``confusion``/``shapedata`` files skipped.
- ``umist``: the subject folder of ``face.tar.gz``.
- ``kth_tips``, ``kth_tips_2a``, ``kth_tips_2b``: the material folder of each PNG (above the
  ``sample_*`` folder in 2a and 2b).
- ``uiuc_texture``: the class folder in each of the five zips.
- ``umd``: folder ``1``..``25`` of the two zips (label = number - 1).
- ``flickr_material_database``: ``image/<material>/*.jpg`` (the masks folder is not used).
- ``animal``: the class folder in each of the two zips.
- ``tubercolosis``: ``Normal`` / ``Tuberculosis`` folders.
- ``covid_19_xray``: the nearest folder named ``COVID``, ``Lung_Opacity``, ``Normal`` or
  ``Viral Pneumonia`` (later releases add ``images``/``masks`` folders; masks are skipped).
- ``not_mnist``: letter folders ``A``..``J`` under ``notMNIST_small/notMNIST_small`` only.
- ``synthetic_covid19_xray``: ``G1`` (Normal) / ``G2`` (Pneumonia) in two zips.
- ``scenes8``: file-name prefix before ``_`` (8 outdoor categories).
- ``aberdeen``: file-name prefix (letters and ``_``), with the reference's merges of one
  person's two spellings (``marieg`` -> ``marie``, ...).
- ``cmu_amp_expression``: first letter ``A``..``M`` of ``<letter><nn>.bmp`` (13 people).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.class_folders import ClassOf, by_folder
from workers.ingest.readers.layouts import parent_name


def _name(path: str) -> str:
    return PurePosixPath(path).name


def _from_files(
    files: SourceFolder, class_of: ClassOf, class_names: Sequence[str] | None = None, *, sort_by_number: bool = False
) -> ConvertedSource:
    """Every catalogue file of the source, read in catalogue order, classes by ``class_of``."""
    archives = [files.path(f.name) for f in files.source.files]
    converted = by_folder(archives, class_of=class_of, class_names=class_names)
    if sort_by_number and class_names is None:
        names = sorted(converted.class_names, key=int)
        return by_folder(archives, class_of=class_of, class_names=names)
    return converted


COIL20 = re.compile(r"obj(\d+)__\d+\.png")


def _coil20(path: str) -> str | None:
    match = COIL20.fullmatch(_name(path))
    return f"obj{int(match[1])}" if match and "coil-20-proc" in path else None


@reader("coil20")
def read_coil20(files: SourceFolder) -> ConvertedSource:
    return _from_files(files, _coil20, [f"obj{i}" for i in range(1, 21)])


def _mpeg7(path: str) -> str | None:
    label = _name(path).split("-")[0]
    skip = "confusion" in label or "shapedata" in label or not path.lower().endswith(".gif")
    return None if skip else label


@reader("mpeg7")
def read_mpeg7(files: SourceFolder) -> ConvertedSource:
    return _from_files(files, _mpeg7)


@reader("umist")
def read_umist(files: SourceFolder) -> ConvertedSource:
    return _from_files(files, parent_name)


def _material(path: str) -> str | None:
    parent = PurePosixPath(path).parent
    folder = parent.parent if parent.name.startswith("sample") else parent
    return folder.name if path.endswith(".png") and folder.name else None


for _key in ("kth_tips", "kth_tips_2a", "kth_tips_2b"):
    reader(_key)(lambda files: _from_files(files, _material))


@reader("uiuc_texture")
def read_uiuc_texture(files: SourceFolder) -> ConvertedSource:
    return _from_files(files, parent_name)


def _umd(path: str) -> str | None:
    folder = parent_name(path)
    return folder if folder.isdigit() else None


@reader("umd")
def read_umd(files: SourceFolder) -> ConvertedSource:
    return _from_files(files, _umd, sort_by_number=True)


@reader("flickr_material_database")
def read_flickr_material_database(files: SourceFolder) -> ConvertedSource:
    return _from_files(files, lambda p: parent_name(p) if p.startswith("image/") else None)


@reader("animal")
def read_animal(files: SourceFolder) -> ConvertedSource:
    return _from_files(files, parent_name)


@reader("tubercolosis")
def read_tubercolosis(files: SourceFolder) -> ConvertedSource:
    names = ("Normal", "Tuberculosis")
    return _from_files(files, lambda p: parent_name(p) if parent_name(p) in names else None, names)


COVID_CLASSES = ("COVID", "Lung_Opacity", "Normal", "Viral Pneumonia")


def _covid(path: str) -> str | None:
    folders = PurePosixPath(path).parts[:-1]
    if "masks" in folders:
        return None
    return next((f for f in reversed(folders) if f in COVID_CLASSES), None)


@reader("covid_19_xray")
def read_covid_19_xray(files: SourceFolder) -> ConvertedSource:
    return _from_files(files, _covid, COVID_CLASSES)


NOT_MNIST = tuple("ABCDEFGHIJ")


@reader("not_mnist")
def read_not_mnist(files: SourceFolder) -> ConvertedSource:
    def letter(path: str) -> str | None:
        return parent_name(path) if path.startswith("notMNIST_small/notMNIST_small/") else None

    return _from_files(files, letter, NOT_MNIST)


@reader("synthetic_covid19_xray")
def read_synthetic_covid19_xray(files: SourceFolder) -> ConvertedSource:
    groups = {"G1": "Normal", "G2": "Pneumonia"}
    converted = _from_files(files, lambda p: parent_name(p) if parent_name(p) in groups else None, ("G1", "G2"))
    return ConvertedSource(rows=converted.rows, class_names=[groups[g] for g in ("G1", "G2")])


@reader("scenes8")
def read_scenes8(files: SourceFolder) -> ConvertedSource:
    return _from_files(files, lambda p: _name(p).split("_")[0])


ABERDEEN_MERGES = {
    "marieg": "marie",
    "heatherg": "heather",
    "kayg": "kay",
    "neilg": "neil",
    "graemeg": "graeme",
    "dhawleyg": "dhawley",
    "clean_adrian": "adrian",
    "jsheenang": "jsheenan",
}


def _aberdeen(path: str) -> str | None:
    match = re.match(r"[a-zA-Z_]+", PurePosixPath(_name(path)).stem)
    return ABERDEEN_MERGES.get(match[0], match[0]) if match else None


@reader("aberdeen")
def read_aberdeen(files: SourceFolder) -> ConvertedSource:
    return _from_files(files, _aberdeen)


CMU_PEOPLE = tuple("ABCDEFGHIJKLM")


@reader("cmu_amp_expression")
def read_cmu_amp_expression(files: SourceFolder) -> ConvertedSource:
    def person(path: str) -> str | None:
        return _name(path)[0] if re.fullmatch(r"[A-M]\d\d\.bmp", _name(path)) else None

    return _from_files(files, person, CMU_PEOPLE)


__all__ = [
    "ABERDEEN_MERGES",
    "CMU_PEOPLE",
    "COVID_CLASSES",
    "NOT_MNIST",
    "read_aberdeen",
    "read_animal",
    "read_cmu_amp_expression",
    "read_coil20",
    "read_covid_19_xray",
    "read_flickr_material_database",
    "read_mpeg7",
    "read_not_mnist",
    "read_scenes8",
    "read_synthetic_covid19_xray",
    "read_tubercolosis",
    "read_uiuc_texture",
    "read_umd",
    "read_umist",
]
