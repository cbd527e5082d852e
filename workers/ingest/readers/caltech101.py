"""Caltech 101 as TFDS builds it: ``101_ObjectCategories.tar.gz`` with
``101_ObjectCategories/<Category>/image_NNNN.jpg`` (101 categories and ``BACKGROUND_Google``).

The class is the folder name lower-cased (102 classes, sorted). There is no official split;
TFDS makes one: with numpy's global seed 1234 set once, it draws 30 images per class (in its
directory listing order) for train and leaves the rest to test. Directory listing order is
the file system's, so here classes and file names are taken sorted, which keeps the rule
(30 per class, one RandomState(1234) stream over the classes) and makes it reproducible;
the chosen files may differ from a given TFDS build's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import numpy as np

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members, member_names, parent_name
from workers.ingest.writers.parquet_writer import ImageRow

TRAIN_PER_CLASS = 30
SEED = 1234


def _is_jpeg(name: str) -> bool:
    return name.endswith(".jpg") and not PurePosixPath(name).name.startswith("._")


def train_files(names: list[str], seed: int = SEED) -> set[str]:
    """The members TFDS's rule puts in train: 30 per class, one seeded draw over the classes."""
    by_class: dict[str, list[str]] = {}
    for name in names:
        by_class.setdefault(parent_name(name), []).append(name)
    rng = np.random.RandomState(seed)
    chosen: set[str] = set()
    for folder in sorted(by_class):
        members = sorted(by_class[folder], key=lambda n: PurePosixPath(n).name)
        if len(members) < TRAIN_PER_CLASS:
            raise ValueError(
                f"Caltech 101 class {folder!r} has {len(members)} images, fewer "
                f"than the {TRAIN_PER_CLASS} its train split takes."
            )
        chosen.update(rng.choice(members, TRAIN_PER_CLASS, replace=False).tolist())
    return chosen


def _rows(archive: Path, index: dict[str, int], train: set[str]) -> Iterator[ImageRow]:
    for member in iter_members(archive, _is_jpeg):
        yield ImageRow(
            image=member.data,
            label=index[parent_name(member.name).lower()],
            split="train" if member.name in train else "test",
        )


@reader("caltech101")
def read_caltech101(files: SourceFolder) -> ConvertedSource:
    archive = files.path("101_ObjectCategories.tar.gz")
    names = member_names(archive, _is_jpeg)
    classes = sorted({parent_name(n).lower() for n in names})
    index = {name: label for label, name in enumerate(classes)}
    return ConvertedSource(
        rows=_rows(archive, index, train_files(names)),
        class_names=classes,
        official_split=True,
        source_facts={"split": "TFDS rule: 30 train images per class, seed 1234"},
    )


__all__ = ["SEED", "TRAIN_PER_CLASS", "read_caltech101", "train_files"]
