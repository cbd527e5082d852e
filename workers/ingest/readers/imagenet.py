"""ImageNet 2012 (ILSVRC2012), from the two manually downloaded tars, as TFDS reads them.

- ``ILSVRC2012_img_train.tar`` holds one tar per class, ``<synset>.tar``, of JPEGs; the
  class names are the synsets, sorted (TFDS's ``labels.txt``). Each inner tar is streamed
  from the outer one: nothing is extracted.
- ``ILSVRC2012_img_val.tar`` holds the 50,000 validation JPEGs, flat. Their labels are TFDS's
  ``validation_labels.txt`` (shipped here as ``data/imagenet2012_validation_labels.txt.gz``):
  one synset per image, in the sorted order of the image names.

The train part is the source's train split and validation its test split, which the stream's
``official_test`` rule keeps as test (train drawn 90/5/5 into train / dev / dev-test).
"""

from __future__ import annotations

import gzip
import tarfile
from collections.abc import Iterator
from functools import lru_cache
from importlib import resources
from pathlib import Path

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_tar
from workers.ingest.readers.member_scan import base_name
from workers.ingest.writers.parquet_writer import ImageRow

TRAIN_TAR = "ILSVRC2012_img_train.tar"
VAL_TAR = "ILSVRC2012_img_val.tar"
VALIDATION_LABELS = "data/imagenet2012_validation_labels.txt.gz"


@lru_cache(maxsize=1)
def validation_synsets() -> tuple[str, ...]:
    """TFDS's validation labels: the synset of each validation image, by sorted image name."""
    blob = resources.files(__package__).joinpath(VALIDATION_LABELS).read_bytes()
    return tuple(gzip.decompress(blob).decode("ascii").split())


def _names(path: Path) -> list[str]:
    """The file names of an uncompressed tar, read by seeking from header to header."""
    with tarfile.open(path, "r:") as archive:
        return [m.name for m in archive if m.isfile()]


def class_synsets(train: Path) -> list[str]:
    """The sorted synsets of the per-class tars of the train tar.

    Raises:
        DatasetFormatError: a member is not ``<synset>.tar``.
    """
    names = [base_name(n) for n in _names(train)]
    odd = [n for n in names if not (n.endswith(".tar") and n.startswith("n"))]
    if odd or not names:
        raise DatasetFormatError(
            f"{train.name} should hold only <synset>.tar archives; it holds {odd[:3] or 'nothing'}."
        )
    return sorted(n[:-4] for n in names)


def validation_labels(val: Path, classes: list[str]) -> dict[str, int]:
    """Validation image name -> class index (TFDS: labels zipped with the sorted names)."""
    names = sorted(base_name(n) for n in _names(val))
    synsets = validation_synsets()
    if len(names) > len(synsets):
        raise DatasetFormatError(f"{val.name} holds {len(names)} images; the validation labels cover {len(synsets)}.")
    index = {s: i for i, s in enumerate(classes)}
    labels = {}
    for name, synset in zip(names, synsets):
        if synset not in index:
            raise DatasetFormatError(f"{val.name}: {name}'s label {synset} is not a class of {TRAIN_TAR}.")
        labels[name] = index[synset]
    return labels


def _train_rows(train: Path, index: dict[str, int]) -> Iterator[ImageRow]:
    with tarfile.open(train, "r|") as outer:
        for info in outer:
            if not info.isfile():
                continue
            label = index[base_name(info.name)[:-4]]
            handle = outer.extractfile(info)
            if handle is None:
                continue
            for member in iter_tar(handle):
                yield ImageRow(image=member.data, label=label, split="train")


def _val_rows(val: Path, labels: dict[str, int]) -> Iterator[ImageRow]:
    with val.open("rb") as raw:
        for member in iter_tar(raw):
            yield ImageRow(image=member.data, label=labels[base_name(member.name)], split="test")


@reader("imagenet2012")
def read_imagenet2012(files: SourceFolder) -> ConvertedSource:
    train, val = files.path(TRAIN_TAR), files.path(VAL_TAR)
    classes = class_synsets(train)
    labels = validation_labels(val, classes)
    index = {s: i for i, s in enumerate(classes)}

    def rows() -> Iterator[ImageRow]:
        yield from _train_rows(train, index)
        yield from _val_rows(val, labels)

    return ConvertedSource(
        rows=rows(),
        class_names=classes,
        official_split=True,
        source_facts={
            "labels": "train: per-class tar; validation: TFDS validation_labels.txt",
            "test": "ILSVRC2012 validation",
        },
    )


__all__ = ["TRAIN_TAR", "VAL_TAR", "class_synsets", "validation_labels", "validation_synsets"]
