"""Multi-label sources whose labels are attribute tables or finding lists.

- ``celeb_a`` (TFDS, as dm_nevis stacks it): the 40 attributes of ``list_attr_celeba.txt``
  (``1`` = present) over ``img_align_celeba/<file>`` of the zip, in the file's attribute
  order; ``list_eval_partition.txt`` ``0`` / ``1`` / ``2`` are train / val / test.
- ``awa2`` (dm_nevis): each image of ``JPEGImages/<class>/`` gets its class's row of
  ``predicate-matrix-binary.txt`` (85 attributes, named by ``predicates.txt``); images of
  ``trainclasses.txt`` are the train split and of ``testclasses.txt`` the test split. Images
  keep their size (the reference shrinks them to 256 px at most).
- ``nih_chest_xray`` (dm_nevis): ``Data_Entry_2017.csv``'s findings (``|``-separated) of the
  PNGs listed in ``train_val_list.txt`` (train) and ``test_list.txt`` (test).
- ``sun_attributes`` (dm_nevis): votes of ``attributeLabels_continuous.mat`` per image.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator

import numpy as np

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.fine_grained import load_mat, mat_strings
from workers.ingest.readers.layouts import is_junk, iter_members
from workers.ingest.readers.member_scan import base_name, clean_name, collect, need, text_lines
from workers.ingest.writers.parquet_writer import ImageRow

_PARTITION = {"0": "train", "1": "val", "2": "test"}


@reader("celeb_a")
def read_celeb_a(files: SourceFolder) -> ConvertedSource:
    lines = text_lines(files.path("list_attr_celeba.txt").read_bytes())
    names = lines[1].split()
    labels = {}
    for line in lines[2:]:
        fields = line.split()
        if len(fields) != len(names) + 1:
            raise DatasetFormatError(
                f"list_attr_celeba.txt: line {line[:40]!r}... has {len(fields) - 1} values for {len(names)} attributes."
            )
        labels[fields[0]] = [i for i, v in enumerate(fields[1:]) if int(v) == 1]
    split_of = {}
    for line in text_lines(files.path("list_eval_partition.txt").read_bytes()):
        name, part = line.split()[:2]
        split_of[name] = _PARTITION[part]
    archive = files.path("img_align_celeba.zip")

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(archive, lambda n: base_name(n) in labels and not is_junk(n)):
            name = base_name(member.name)
            yield ImageRow(image=member.data, label=labels[name], split=split_of.get(name))

    return ConvertedSource(
        rows=rows(),
        class_names=names,
        kind="multi",
        official_split=True,
        source_facts={"labels": "list_attr_celeba.txt (1 = present)"},
    )


_AWA = "Animals_with_Attributes2/"
_ID_NAME = re.compile(r"^\s*(\d+)\s+(\S+)")


def _numbered(data: bytes, where: str) -> list[str]:
    """Names of a ``<id>\\t<name>`` file, by id (1-based)."""
    entries = {}
    for line in text_lines(data):
        match = _ID_NAME.match(line)
        if not match:
            raise DatasetFormatError(f"{where}: line {line!r} is not '<id> <name>'.")
        entries[int(match.group(1))] = match.group(2)
    return [entries[i] for i in sorted(entries)]


@reader("awa2")
def read_awa2(files: SourceFolder) -> ConvertedSource:
    archive = files.path("AwA2-data.zip")
    with zipfile.ZipFile(archive) as handle:

        def read(name: str) -> bytes:
            return handle.read(_AWA + name)

        classes = _numbered(read("classes.txt"), "classes.txt")
        predicates = _numbered(read("predicates.txt"), "predicates.txt")
        matrix = [[int(float(v)) for v in line.split()] for line in text_lines(read("predicate-matrix-binary.txt"))]
        split_of = {
            **{c: "train" for c in text_lines(read("trainclasses.txt"))},
            **{c: "test" for c in text_lines(read("testclasses.txt"))},
        }
    if len(matrix) != len(classes) or any(len(row) != len(predicates) for row in matrix):
        raise DatasetFormatError(
            f"{archive.name}: predicate-matrix-binary.txt is not {len(classes)} x {len(predicates)}."
        )

    def class_of(name: str) -> str:
        return clean_name(name).rsplit("/", 2)[-2] if name.count("/") >= 2 else ""

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(archive, lambda n: "JPEGImages" in n and class_of(n) in split_of):
            cls = class_of(member.name)
            on = [i for i, v in enumerate(matrix[classes.index(cls)]) if v]
            yield ImageRow(image=member.data, label=on, split=split_of[cls])

    return ConvertedSource(
        rows=rows(),
        class_names=predicates,
        kind="multi",
        official_split=True,
        source_facts={
            "labels": "the class's row of predicate-matrix-binary.txt",
            "test": "images of testclasses.txt (zero-shot split)",
        },
    )


NIH_FINDINGS = (
    "Atelectasis",
    "Consolidation",
    "Infiltration",
    "Pneumothorax",
    "Edema",
    "Emphysema",
    "Fibrosis",
    "Effusion",
    "Pneumonia",
    "Pleural_Thickening",
    "Cardiomegaly",
    "Nodule",
    "Mass",
    "Hernia",
    "No Finding",
)


@reader("nih_chest_xray")
def read_nih_chest_xray(files: SourceFolder) -> ConvertedSource:
    archive = files.path("data.zip")
    with zipfile.ZipFile(archive) as handle:
        train = set(text_lines(handle.read("train_val_list.txt")))
        test = set(text_lines(handle.read("test_list.txt")))
        entries = text_lines(handle.read("Data_Entry_2017.csv"))[1:]  # a header line first
    findings = {}
    for line in entries:
        fields = line.split(",")
        unknown = [f for f in fields[1].split("|") if f not in NIH_FINDINGS]
        if unknown:
            raise DatasetFormatError(f"Data_Entry_2017.csv: {fields[0]} has findings {unknown}.")
        findings[fields[0]] = sorted({NIH_FINDINGS.index(f) for f in fields[1].split("|")})
    split_of = {**{n: "train" for n in train}, **{n: "test" for n in test}}

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(
            archive, lambda n: n.endswith(".png") and not is_junk(n) and base_name(n) in split_of
        ):
            name = base_name(member.name)
            yield ImageRow(image=member.data, label=findings[name], split=split_of[name])

    return ConvertedSource(
        rows=rows(),
        class_names=NIH_FINDINGS,
        kind="multi",
        official_split=True,
        source_facts={"labels": "Data_Entry_2017.csv Finding Labels"},
    )


_SUN = "SUNAttributeDB/"


@reader("sun_attributes")
def read_sun_attributes(files: SourceFolder) -> ConvertedSource:
    """SUN attributes (dm_nevis): ``images.mat`` names ``images/<path>`` in the images tar;
    every attribute of ``attributeLabels_continuous.mat`` ``labels_cv`` with a non-zero vote
    is positive; names from ``attributes.mat``. No official split."""
    tables = files.path("SUNAttributeDB.tar.gz")
    wanted = [_SUN + n for n in ("images.mat", "attributeLabels_continuous.mat", "attributes.mat")]
    found = need(collect(tables, lambda n: n in wanted, want=3), wanted, tables)
    names_mat, votes_mat, attributes_mat = (load_mat(io.BytesIO(d)) for d in found)  # type: ignore[arg-type]
    names = mat_strings(names_mat["images"])
    votes = np.atleast_2d(votes_mat["labels_cv"])
    if len(names) != len(votes):
        raise DatasetFormatError(f"{tables.name}: {len(names)} images but {len(votes)} label rows.")
    labels = {f"images/{n}": np.flatnonzero(v).tolist() for n, v in zip(names, votes)}
    classes = mat_strings(attributes_mat["attributes"])
    images = files.path("SUNAttributeDB_Images.tar.gz")

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(images, lambda n: clean_name(n) in labels):
            yield ImageRow(image=member.data, label=labels[clean_name(member.name)])

    return ConvertedSource(
        rows=rows(), class_names=classes, kind="multi", source_facts={"labels": "labels_cv > 0 (any vote)"}
    )


__all__ = ["NIH_FINDINGS"]
