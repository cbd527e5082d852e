"""Crowd and vehicle counting sources, turned into classification as the reference does: each
image's count is put in one of 10 buckets of contiguous counts holding about equally many
images (:func:`count_buckets`), and the bucket is the class, named by its counts
(``<low>-<high>``, the last ``<low>+``; the reference's names are off by one at the edges).

- ``trancos``: ``TRANCOS_v3.tar.gz``; ``TRANCOS_v3/images/<name>.jpg`` with one line per
  vehicle in ``<name>.txt``; ``image_sets/{training,validation,test}.txt`` are the official
  train / val / test. Counts are capped at 199.
- ``mall``: ``mall_dataset.zip``, ``mall_dataset/frames/seq_<NNNNNN>.jpg`` and
  ``mall_gt.mat``'s ``count`` per frame; frames 1-800 are the paper's train part, the rest
  test. Capped at 99.
- ``shanghai_tech``: Kaggle ``shanghaitech.zip``; ``ShanghaiTech/part_{A,B}/{train,test}_data/
  ground-truth/GT_IMG_<n>.mat`` (heads in ``image_info``) for ``images/IMG_<n>.jpg``; parts A
  and B pooled, their train / test kept. Capped at 4999.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable
from pathlib import PurePosixPath

import numpy as np
from scipy import io as sio

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members
from workers.ingest.readers.split_folders import labelled_rows

BUCKETS = 10


def count_buckets(counts: Iterable[int], cap: int, buckets: int = BUCKETS) -> tuple[list[int], list[str]]:
    """The class of every count below ``cap`` and the class names: bucket ``k`` ends at the
    last count whose cumulative frequency is below ``k / buckets`` of all images.

    Raises:
        ValueError: the counts are too concentrated to fill ``buckets`` buckets.
    """
    capped = np.minimum(np.asarray(list(counts), dtype=np.int64), cap - 1)
    cumulative = np.cumsum(np.bincount(capped, minlength=cap))
    share = cumulative[-1] / buckets
    ends = []
    for k in range(1, buckets):
        below = np.flatnonzero(cumulative < share * k)
        if not below.size:
            raise ValueError(f"counts too concentrated for {buckets} equal-frequency buckets")
        ends.append(int(below[-1]))
    ends.append(cap)
    label_of, label = [], 0
    for count in range(cap):
        if count > ends[label]:
            label += 1
        label_of.append(label)
    if label != buckets - 1:
        raise ValueError(f"counts fill {label + 1} buckets, not {buckets}")
    lows = [label_of.index(k) for k in range(buckets)]
    names = [f"{low}-{high - 1}" for low, high in zip(lows, lows[1:], strict=False)] + [f"{lows[-1]}+"]
    return label_of, names


def _bucketed(counts: dict[str, int], cap: int) -> tuple[dict[str, int], list[str]]:
    label_of, names = count_buckets(counts.values(), cap)
    return {key: label_of[min(count, cap - 1)] for key, count in counts.items()}, names


@reader("trancos")
def read_trancos(files: SourceFolder) -> ConvertedSource:
    archive = files.path("TRANCOS_v3.tar.gz")
    counts: dict[str, int] = {}
    split_of: dict[str, str] = {}
    sets = {"training.txt": "train", "validation.txt": "val", "test.txt": "test"}
    for member in iter_members(archive, lambda n: n.endswith(".txt") and ("/images/" in n or "/image_sets/" in n)):
        path = PurePosixPath(member.name)
        if "image_sets" in path.parts and path.name in sets:
            split_of.update(
                {line.strip(): sets[path.name] for line in member.data.decode().splitlines() if line.strip()}
            )
        elif "images" in path.parts:
            counts[f"{path.stem}.jpg"] = len(member.data.splitlines())
    labels, names = _bucketed(counts, 200)

    def label(name: str) -> tuple[int, str] | None:
        base = PurePosixPath(name).name
        return (labels[base], split_of[base]) if base in labels and base in split_of else None

    return ConvertedSource(rows=labelled_rows([archive], label), class_names=names, official_split=True)


MALL_TRAIN = 800


@reader("mall")
def read_mall(files: SourceFolder) -> ConvertedSource:
    archive = files.path("mall_dataset.zip")
    with zipfile.ZipFile(archive) as opened:
        name = next((n for n in opened.namelist() if n.endswith("mall_gt.mat")), None)
        if name is None:
            raise ValueError(f"{archive.name} has no mall_gt.mat.")
        frame_counts = sio.loadmat(io.BytesIO(opened.read(name)))["count"][:, 0].astype(int).tolist()
    labels, names = _bucketed({str(i): c for i, c in enumerate(frame_counts, 1)}, 100)

    def label(member: str) -> tuple[int, str] | None:
        stem = PurePosixPath(member).stem
        if not stem.startswith("seq_") or not stem[4:].isdigit() or str(int(stem[4:])) not in labels:
            return None
        frame = int(stem[4:])
        return labels[str(frame)], "train" if frame <= MALL_TRAIN else "test"

    return ConvertedSource(rows=labelled_rows([archive], label), class_names=names, official_split=True)


def _image_of(ground_truth: str) -> str:
    """``.../part_A/train_data/ground-truth/GT_IMG_1.mat`` -> ``.../part_A/train_data/images/IMG_1.jpg``."""
    path = PurePosixPath(ground_truth)
    return str(path.parent.parent / "images" / f"{path.stem.removeprefix('GT_')}.jpg")


@reader("shanghai_tech")
def read_shanghai_tech(files: SourceFolder) -> ConvertedSource:
    archive = files.path("shanghaitech.zip")
    counts = {}
    with zipfile.ZipFile(archive) as opened:
        for name in sorted(opened.namelist()):
            if name.endswith(".mat") and "ground-truth" in name and "shanghaitech_h5_empty" not in name:
                info = sio.loadmat(io.BytesIO(opened.read(name)))["image_info"]
                counts[_image_of(name)] = int(info[0][0][0][0][0].shape[0])
    labels, names = _bucketed(counts, 5000)

    def label(member: str) -> tuple[int, str] | None:
        if member not in labels:
            return None
        return labels[member], "train" if "train_data" in member else "test"

    return ConvertedSource(rows=labelled_rows([archive], label), class_names=names, official_split=True)


__all__ = ["BUCKETS", "MALL_TRAIN", "count_buckets", "read_mall", "read_shanghai_tech", "read_trancos"]
