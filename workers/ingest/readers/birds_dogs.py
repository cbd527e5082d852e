"""CUB-200-2011 and Stanford Dogs, as their TFDS builders read them.

- ``caltech_birds2011``: ``CUB_200_2011/images/<NNN.Name>/<file>.jpg`` in the tgz; the label
  is ``NNN - 1`` and the class name ``Name`` lowercased; ``train_test_split.txt`` (``1``:
  train) against ``images.txt`` gives the split. ``segmentations.tgz`` is not needed to
  classify.
- ``stanford_dogs``: ``Images/<synset-Breed>/<file>.jpg`` in ``images.tar``; the label is the
  folder lowercased, class names the sorted folders of ``train_list.mat``; an image is in
  train or test by its file name in ``train_list.mat`` / ``test_list.mat`` (``lists.tar``).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.fine_grained import load_mat, mat_strings
from workers.ingest.readers.layouts import iter_members
from workers.ingest.readers.member_scan import base_name, clean_name, collect, need, text_lines
from workers.ingest.writers.parquet_writer import ImageRow

_CUB = "CUB_200_2011/"
_CUB_FOLDER = re.compile(r"^(\d+)\.(\w+)$")


def _cub_index(path: Path) -> tuple[list[str], dict[str, str]]:
    """(class names, ``<folder>/<file>`` -> split)."""
    wanted = [_CUB + n for n in ("images.txt", "train_test_split.txt", "classes.txt")]
    found = collect(path, lambda n: n in wanted, want=len(wanted))
    images, split_list, classes = need(found, wanted, path)
    names = {}
    for line in text_lines(classes):
        match = _CUB_FOLDER.match(line.split()[-1])
        if not match:
            raise DatasetFormatError(f"{path.name}: classes.txt line {line!r} is not 'N NNN.Name'.")
        names[int(match.group(1)) - 1] = match.group(2).lower()
    if sorted(names) != list(range(len(names))):
        raise DatasetFormatError(f"{path.name}: classes.txt does not number 1..{len(names)}.")
    is_train = dict(line.split()[:2] for line in text_lines(split_list))
    split_of = {}
    for line in text_lines(images):
        image_id, rel = line.split()[:2]
        if image_id not in is_train:
            raise DatasetFormatError(f"{path.name}: image {image_id} is not in train_test_split.txt.")
        split_of[rel] = "train" if int(is_train[image_id]) == 1 else "test"
    return [names[i] for i in range(len(names))], split_of


@reader("caltech_birds2011")
def read_caltech_birds2011(files: SourceFolder) -> ConvertedSource:
    archive = files.path("CUB_200_2011.tgz")
    classes, split_of = _cub_index(archive)

    def listed(name: str) -> bool:
        parts = PurePosixPath(clean_name(name)).parts
        return len(parts) >= 2 and parts[-3:-2] == ("images",) and "/".join(parts[-2:]) in split_of

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(archive, listed):
            parts = PurePosixPath(clean_name(member.name)).parts
            label = int(_CUB_FOLDER.match(parts[-2]).group(1)) - 1  # type: ignore[union-attr]
            yield ImageRow(image=member.data, label=label, split=split_of["/".join(parts[-2:])])

    return ConvertedSource(
        rows=rows(),
        class_names=classes,
        official_split=True,
        source_facts={"labels": "image folder NNN.Name (TFDS caltech_birds2011)"},
    )


def _dog_list(data: bytes) -> list[str]:
    mat = load_mat(io.BytesIO(data))  # type: ignore[arg-type]
    return mat_strings(mat["file_list"])


@reader("stanford_dogs")
def read_stanford_dogs(files: SourceFolder) -> ConvertedSource:
    images = files.path("images.tar")
    lists = files.path("lists.tar")
    found = collect(lists, lambda n: base_name(n) in ("train_list.mat", "test_list.mat"), want=2)
    train, test = (_dog_list(d) for d in need(found, ["train_list.mat", "test_list.mat"], lists))
    classes = sorted({PurePosixPath(p).parent.name.lower() for p in train})
    split_of = {**{base_name(p): "test" for p in test}, **{base_name(p): "train" for p in train}}

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(images, lambda n: base_name(n) in split_of):
            breed = PurePosixPath(member.name).parent.name.lower()
            if breed not in classes:
                raise DatasetFormatError(
                    f"{images.name}: {member.name} is in a folder no image of train_list.mat is in."
                )
            yield ImageRow(image=member.data, label=classes.index(breed), split=split_of[base_name(member.name)])

    return ConvertedSource(
        rows=rows(),
        class_names=classes,
        official_split=True,
        source_facts={"labels": "image folder lowercased (TFDS stanford_dogs)"},
    )


__all__: list[str] = []
