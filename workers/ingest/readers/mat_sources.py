"""Sources whose labels, splits or pixels are MATLAB files (read with scipy.io).

- ``oxford_flowers102`` (TFDS): ``jpg/image_NNNNN.jpg`` in ``102flowers.tgz``; label
  ``imagelabels.mat`` ``labels[id - 1] - 1``; ``setid.mat`` ``trnid`` / ``valid`` / ``tstid``
  are train / val / test; class names TFDS's.
- ``oxford_flowers_17`` (dm_nevis): ``jpg/image_NNNN.jpg`` in ``17flowers.tgz``, 80 consecutive
  images per class (label ``(id - 1) // 80``); ``datasplits.mat`` ``trn1`` / ``val1`` /
  ``tst1`` (the first of its three splits) are train / val / test. The classes are unnamed.
- ``svhn_cropped`` (TFDS): ``X`` ``[32, 32, 3, N]`` and ``y`` of ``{train,test}_32x32.mat``,
  digit 0 stored as 10 (label ``y % 10``); ``extra_32x32.mat`` is not used.
- ``silhouettes_28`` (dm_nevis): ``caltech101_silhouettes_28_split1.mat``'s
  ``{train,val,test}_data`` rows (values in [0, 1], reshaped row-major to 28x28, times 255) and
  ``_labels - 1``; class names ``classnames`` of ``caltech101_silhouettes_28.mat``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.class_name_lists import class_names
from workers.ingest.readers.fine_grained import load_mat, mat_strings
from workers.ingest.readers.layouts import iter_members
from workers.ingest.readers.member_scan import clean_name
from workers.ingest.writers.parquet_writer import ImageRow

_FLOWER = re.compile(r"jpg/image_(\d+)\.jpg$")


def _ids(mat: dict, field: str, path: Path) -> list[int]:
    if field not in mat:
        raise DatasetFormatError(f"{path.name} has no {field!r} variable.")
    return [int(v) for v in np.atleast_1d(mat[field]).reshape(-1)]


def _flower_rows(archive: Path, label_split: dict[int, tuple[int, str]]) -> Iterator[ImageRow]:
    def image_id(name: str) -> int | None:
        match = _FLOWER.search(clean_name(name))
        return int(match.group(1)) if match else None

    for member in iter_members(archive, lambda n: image_id(n) in label_split):
        label, split = label_split[image_id(member.name)]  # type: ignore[index]
        yield ImageRow(image=member.data, label=label, split=split)


@reader("oxford_flowers102")
def read_oxford_flowers102(files: SourceFolder) -> ConvertedSource:
    labels_path, setid_path = files.path("imagelabels.mat"), files.path("setid.mat")
    labels = _ids(load_mat(labels_path), "labels", labels_path)
    setid = load_mat(setid_path)
    label_split = {
        i: (labels[i - 1] - 1, split)
        for field, split in (("trnid", "train"), ("valid", "val"), ("tstid", "test"))
        for i in _ids(setid, field, setid_path)
    }
    archive = files.path("102flowers.tgz")
    return ConvertedSource(
        rows=_flower_rows(archive, label_split),
        class_names=class_names("oxford_flowers102"),
        official_split=True,
        source_facts={"labels": "imagelabels.mat; splits setid.mat"},
    )


@reader("oxford_flowers_17")
def read_oxford_flowers_17(files: SourceFolder) -> ConvertedSource:
    splits_path = files.path("datasplits.mat")
    mat = load_mat(splits_path)
    label_split = {
        i: ((i - 1) // 80, split)
        for field, split in (("trn1", "train"), ("val1", "val"), ("tst1", "test"))
        for i in _ids(mat, field, splits_path)
    }
    return ConvertedSource(
        rows=_flower_rows(files.path("17flowers.tgz"), label_split),
        class_names=[f"flower {c + 1}" for c in range(17)],
        official_split=True,
        source_facts={"labels": "(image id - 1) // 80; splits trn1/val1/tst1"},
    )


def _svhn_rows(path: Path, split: str) -> Iterator[ImageRow]:
    mat = load_mat(path)
    images, labels = mat["X"], np.atleast_1d(mat["y"]).reshape(-1)
    if images.ndim != 4 or images.shape[:3] != (32, 32, 3) or images.shape[3] != len(labels):
        raise DatasetFormatError(f"{path.name}: X is {images.shape}, not [32, 32, 3, N] for {len(labels)} labels.")
    for i in range(len(labels)):
        yield ImageRow(image=np.ascontiguousarray(images[..., i]), label=int(labels[i]) % 10, split=split)


@reader("svhn_cropped")
def read_svhn_cropped(files: SourceFolder) -> ConvertedSource:
    train, test = files.path("train_32x32.mat"), files.path("test_32x32.mat")

    def rows() -> Iterator[ImageRow]:
        yield from _svhn_rows(train, "train")
        yield from _svhn_rows(test, "test")

    return ConvertedSource(
        rows=rows(), class_names=[str(d) for d in range(10)], official_split=True, source_facts={"labels": "y % 10"}
    )


@reader("silhouettes_28")
def read_silhouettes_28(files: SourceFolder) -> ConvertedSource:
    names = mat_strings(load_mat(files.path("caltech101_silhouettes_28.mat"))["classnames"])
    split_path = files.path("caltech101_silhouettes_28_split1.mat")
    mat = load_mat(split_path)

    def rows() -> Iterator[ImageRow]:
        for part, split in (("train", "train"), ("val", "val"), ("test", "test")):
            data = np.atleast_2d(mat[f"{part}_data"])
            labels = np.atleast_1d(mat[f"{part}_labels"]).reshape(-1)
            for pixels, label in zip(data, labels):
                image = np.clip(np.asarray(pixels, dtype=np.float64) * 255, 0, 255)
                yield ImageRow(image=image.astype(np.uint8).reshape(28, 28), label=int(label) - 1, split=split)

    return ConvertedSource(
        rows=rows(),
        class_names=names,
        official_split=True,
        source_facts={"labels": "split1 {train,val,test}_labels - 1"},
    )


__all__: list[str] = []
