"""Pascal VOC 2005, 2006, 2007 and 2012: image folders, per-class lists and XML annotations.

- 2005 (dm_nevis handler): the images of chosen ``PNGImages/<folder>`` folders, each folder
  mapped to one of four classes; ``voc2005_1`` is the train part, ``voc2005_2`` the test part.
- 2006 (dm_nevis handler): ``ImageSets/<class>_{trainval,test}.txt``; an image listed ``1``
  for several classes keeps the class of the last list read, as the reference's dict does.
- 2007 / 2012 (TFDS ``voc``): ``ImageSets/Main/{train,val,test}.txt`` and the set of object
  names in ``Annotations/<id>.xml`` (multi-label, difficult objects included). 2012's test
  part has no annotations, so only train and val are read (the split rule draws test from val).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from xml.etree import ElementTree

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members
from workers.ingest.readers.member_scan import base_name, clean_name, collect, stem, text_lines
from workers.ingest.writers.parquet_writer import ImageRow

VOC2005_CLASSES = ("car", "motorbike", "bike", "person")
VOC2005_TRAIN = {
    "car": ("Caltech_cars", "ETHZ_sideviews-cars", "TUGraz_cars"),
    "motorbike": ("Caltech_motorbikes_side",),
    "bike": ("TUGraz_bike",),
    "person": ("TUGraz_person",),
}
VOC2005_TEST = {
    "car": ("car", "voiture"),
    "bike": ("bicycle", "bike", "velo"),
    "motorbike": ("motocyclette", "motorbike", "motorcycle"),
    "person": ("INRIA_graz-person-test", "INRIA_inria-person-test", "pedestrian", "pieton"),
}
VOC_LABELS = (
    "aeroplane",
    "bicycle",
    "bird",
    "boat",
    "bottle",
    "bus",
    "car",
    "cat",
    "chair",
    "cow",
    "diningtable",
    "dog",
    "horse",
    "motorbike",
    "person",
    "pottedplant",
    "sheep",
    "sofa",
    "train",
    "tvmonitor",
)


def _folder_labels(root: str, folders: Mapping[str, tuple[str, ...]]) -> dict[str, int]:
    """``VOC2005_1/PNGImages/<folder>`` -> class index."""
    return {
        f"{root}/PNGImages/{folder}": VOC2005_CLASSES.index(label)
        for label, names in folders.items()
        for folder in names
    }


def _voc2005_rows(path: Path, root: str, folders: Mapping[str, tuple[str, ...]], split: str) -> Iterator[ImageRow]:
    labels = _folder_labels(root, folders)
    seen = set()
    for member in iter_members(path, lambda n: n.lower().endswith("png")):
        folder = clean_name(member.name).rsplit("/", 1)[0]
        if folder in labels:
            seen.add(folder)
            yield ImageRow(image=member.data, label=labels[folder], split=split)
    absent = sorted(set(labels) - seen)
    if absent:
        raise DatasetFormatError(
            f"{path.name} has no PNG images in {absent}; the reference reads every one of these folders."
        )


@reader("pascal_voc2005")
def read_pascal_voc2005(files: SourceFolder) -> ConvertedSource:
    train, test = files.path("voc2005_1.tar.gz"), files.path("voc2005_2.tar.gz")

    def rows() -> Iterator[ImageRow]:
        yield from _voc2005_rows(train, "VOC2005_1", VOC2005_TRAIN, "train")
        yield from _voc2005_rows(test, "VOC2005_2", VOC2005_TEST, "test")

    return ConvertedSource(
        rows=rows(),
        class_names=VOC2005_CLASSES,
        official_split=True,
        source_facts={"labels": "PNGImages folder mapped to a class"},
    )


_VOC2006_LISTS = "VOCdevkit/VOC2006/ImageSets/"


def _voc2006_lists(path: Path, part: str) -> dict[str, list[str]]:
    """Class -> image ids listed positive (`` 1``) in ``ImageSets/<class>_<part>.txt``, in
    the archive's order of the list files."""
    suffix = f"_{part}.txt"
    found = collect(path, lambda n: n.startswith(_VOC2006_LISTS) and n.endswith(suffix))
    lists: dict[str, list[str]] = {}
    for name, data in found.items():
        cls = base_name(name)[: -len(suffix)]
        lists[cls] = [line.split()[0] for line in text_lines(data) if line.split()[-1] == "1"]
    if not lists:
        raise DatasetFormatError(f"{path.name} has no {_VOC2006_LISTS}<class>{suffix} lists.")
    return lists


def _voc2006_rows(path: Path, positives: dict[str, list[str]], classes: list[str], split: str) -> Iterator[ImageRow]:
    label_of: dict[str, int] = {}
    for cls, ids in positives.items():  # a later list overwrites an earlier one
        for image_id in ids:
            label_of[image_id + ".png"] = classes.index(cls)
    for member in iter_members(path, lambda n: base_name(n) in label_of):
        yield ImageRow(image=member.data, label=label_of[base_name(member.name)], split=split)


@reader("pascal_voc2006")
def read_pascal_voc2006(files: SourceFolder) -> ConvertedSource:
    trainval, test = files.path("voc2006_trainval.tar"), files.path("voc2006_test.tar")
    train_lists = _voc2006_lists(trainval, "trainval")
    test_lists = _voc2006_lists(test, "test")
    classes = list(train_lists)
    unknown = sorted(set(test_lists) - set(classes))
    if unknown:
        raise DatasetFormatError(f"{test.name} lists classes {unknown} that {trainval.name} does not.")

    def rows() -> Iterator[ImageRow]:
        yield from _voc2006_rows(trainval, train_lists, classes, "train")
        yield from _voc2006_rows(test, test_lists, classes, "test")

    return ConvertedSource(
        rows=rows(),
        class_names=classes,
        official_split=True,
        source_facts={"labels": "ImageSets/<class>_<part>.txt positives; the last list read wins"},
    )


def _object_names(xml: bytes, where: str) -> list[int]:
    """The sorted distinct classes of an annotation's objects (TFDS ``labels``)."""
    try:
        root = ElementTree.fromstring(xml)  # noqa: S314
    except ElementTree.ParseError as exc:
        raise DatasetFormatError(f"{where}: not readable XML ({exc}).") from None
    names = set()
    for obj in root.findall("object"):
        name = (obj.findtext("name") or "").strip().lower()
        if name not in VOC_LABELS:
            raise DatasetFormatError(f"{where}: object class {name!r} is not a VOC class.")
        names.add(VOC_LABELS.index(name))
    return sorted(names)


def _voc_index(path: Path, year: str, sets: tuple[str, ...]) -> dict[str, tuple[str, list[int]]]:
    """Image id -> (split, classes) for the ids of ``ImageSets/Main/<set>.txt``."""
    base = f"VOCdevkit/VOC{year}/"
    lists = {f"{base}ImageSets/Main/{s}.txt": s for s in sets}
    found = collect(path, lambda n: n in lists or (n.startswith(base + "Annotations/") and n.endswith(".xml")))
    index: dict[str, tuple[str, list[int]]] = {}
    for list_name, part in lists.items():
        if list_name not in found:
            raise DatasetFormatError(f"{path.name} has no {list_name}.")
        split = "val" if part == "val" else part
        for image_id in text_lines(found[list_name]):
            xml_name = f"{base}Annotations/{image_id}.xml"
            if xml_name not in found:
                raise DatasetFormatError(f"{path.name} has no {xml_name} for image {image_id} of {list_name}.")
            index[image_id] = (split, _object_names(found[xml_name], f"{path.name}:{xml_name}"))
    return index


def _voc_rows(path: Path, year: str, index: dict[str, tuple[str, list[int]]]) -> Iterator[ImageRow]:
    folder = f"VOCdevkit/VOC{year}/JPEGImages/"
    left = set(index)
    for member in iter_members(path, lambda n: clean_name(n).startswith(folder)):
        image_id = stem(member.name)
        if image_id in left:
            left.discard(image_id)
            split, labels = index[image_id]
            yield ImageRow(image=member.data, label=labels, split=split)
    if left:
        raise DatasetFormatError(f"{path.name} lacks {len(left)} listed images, e.g. {folder}{sorted(left)[0]}.jpg.")


def _read_voc(files: SourceFolder, year: str, trainval_name: str, test_name: str | None) -> ConvertedSource:
    trainval = files.path(trainval_name)
    parts = [(trainval, _voc_index(trainval, year, ("train", "val")))]
    if test_name is not None:
        test = files.path(test_name)
        parts.append((test, _voc_index(test, year, ("test",))))

    def rows() -> Iterator[ImageRow]:
        for path, index in parts:
            yield from _voc_rows(path, year, index)

    facts = {"labels": "object names in Annotations/<id>.xml (difficult included), as TFDS"}
    if test_name is None:
        facts["test"] = "the source's test part has no annotations and is not read"
    return ConvertedSource(rows=rows(), class_names=VOC_LABELS, kind="multi", official_split=True, source_facts=facts)


@reader("voc_2007")
def read_voc_2007(files: SourceFolder) -> ConvertedSource:
    return _read_voc(files, "2007", "VOCtrainval_06-Nov-2007.tar", "VOCtest_06-Nov-2007.tar")


@reader("voc_2012")
def read_voc_2012(files: SourceFolder) -> ConvertedSource:
    return _read_voc(files, "2012", "VOCtrainval_11-May-2012.tar", None)


__all__ = ["VOC2005_CLASSES", "VOC_LABELS"]
