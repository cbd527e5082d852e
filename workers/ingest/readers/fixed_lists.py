"""Sources whose labels or splits come from side files or fixed lists next to the images.

- ``magellan_venus_volcanoes``: ``volcanoes.tar.gz``; ``package/Images/img<N>.sdt`` are raw
  1024x1024 uint8 images, ``package/GroundTruths/img<N>.lxyr`` list volcanoes, one per line
  starting with a confidence level; as in the reference, an image is ``pos`` when a line
  starts with ``1`` (definitely a volcano), else ``neg`` (no official split).
- ``butterflies``: ``butterflies.zip``, ``<class>/<class><NNN>.jpg``; the reference's fixed
  test images (10 per class, from ``butterflies_f_order.txt``) are test, the rest train.
- ``ppmi``: ``norm_ppmi_12class.zip``, ``[<root>/]{play,with}_instrument/<instrument>/
  {train,test}/*.jpg``; 24 classes ``<play|with>_instrument/<instrument>`` (sorted), the
  train/test folders are the official split.
- ``mit_scenes``: Kaggle ``indoor-scenes-cvpr-2019.zip``: ``indoorCVPR_09/Images/<class>/…``
  with ``TrainImages.txt`` / ``TestImages.txt`` (paths below ``Images``); 67 classes (sorted).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import numpy as np

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import is_image, iter_members, member_names, parent_name
from workers.ingest.readers.split_folders import labelled_rows
from workers.ingest.writers.parquet_writer import ImageRow

VENUS_SIDE = 1024


def _volcano_labels(archive: Path) -> dict[str, int]:
    labels = {}
    for member in iter_members(archive, lambda n: "GroundTruths" in n and n.endswith(".lxyr")):
        lines = member.data.decode("utf-8", errors="replace").splitlines()
        labels[PurePosixPath(member.name).stem] = int(any(line.split(" ")[0] == "1" for line in lines))
    return labels


def _volcano_rows(archive: Path, labels: dict[str, int]) -> Iterator[ImageRow]:
    for member in iter_members(archive, lambda n: PurePosixPath(n).parts[-2:-1] == ("Images",) and n.endswith(".sdt")):
        stem = PurePosixPath(member.name).stem
        if stem not in labels:
            raise ValueError(f"volcanoes.tar.gz: {member.name} has no GroundTruths/{stem}.lxyr.")
        pixels = np.frombuffer(member.data, dtype=np.uint8).reshape(VENUS_SIDE, VENUS_SIDE)
        yield ImageRow(image=pixels, label=labels[stem])


@reader("magellan_venus_volcanoes")
def read_magellan_venus_volcanoes(files: SourceFolder) -> ConvertedSource:
    archive = files.path("volcanoes.tar.gz")
    return ConvertedSource(rows=_volcano_rows(archive, _volcano_labels(archive)), class_names=("neg", "pos"))


BUTTERFLY_TEST = {
    "admiral": {14, 103, 41, 86, 9, 53, 6, 55, 66, 92},
    "black_swallowtail": {25, 41, 2, 22, 31, 15, 28, 35, 4, 27},
    "machaon": {12, 24, 20, 52, 53, 29, 82, 25, 83, 14},
    "monarch_closed": {29, 9, 58, 72, 23, 44, 67, 36, 27, 28},
    "monarch_open": {46, 35, 58, 8, 76, 21, 34, 15, 83, 78},
    "peacock": {1, 96, 131, 124, 22, 59, 126, 52, 20, 86},
    "zebra": {57, 18, 21, 26, 43, 78, 31, 90, 6, 75},
}
BUTTERFLIES = tuple(sorted(BUTTERFLY_TEST))


def _butterfly(name: str) -> tuple[int, str] | None:
    match = re.fullmatch(r"[a-z_]+?(\d+)\.jpg", PurePosixPath(name).name)
    cls = parent_name(name)
    if match is None or cls not in BUTTERFLY_TEST:
        return None
    return BUTTERFLIES.index(cls), "test" if int(match[1]) in BUTTERFLY_TEST[cls] else "train"


@reader("butterflies")
def read_butterflies(files: SourceFolder) -> ConvertedSource:
    return ConvertedSource(
        rows=labelled_rows([files.path("butterflies.zip")], _butterfly), class_names=BUTTERFLIES, official_split=True
    )


def _ppmi_class(name: str) -> tuple[str, str] | None:
    parts = PurePosixPath(name).parts
    kind = next((i for i, p in enumerate(parts) if p in ("play_instrument", "with_instrument")), None)
    if kind is None or kind + 3 >= len(parts) or parts[kind + 2] not in ("train", "test"):
        return None
    return f"{parts[kind]}/{parts[kind + 1]}", parts[kind + 2]


@reader("ppmi")
def read_ppmi(files: SourceFolder) -> ConvertedSource:
    archive = files.path("norm_ppmi_12class.zip")
    classes = sorted({c[0] for n in member_names(archive, is_image) if (c := _ppmi_class(n))})
    index = {name: label for label, name in enumerate(classes)}

    def label(name: str) -> tuple[int, str] | None:
        found = _ppmi_class(name)
        return None if found is None else (index[found[0]], found[1])

    return ConvertedSource(rows=labelled_rows([archive], label), class_names=classes, official_split=True)


@reader("mit_scenes")
def read_mit_scenes(files: SourceFolder) -> ConvertedSource:
    archive = files.path("indoor-scenes-cvpr-2019.zip")
    with zipfile.ZipFile(archive) as opened:
        names = {n.rsplit("/", 1)[-1]: n for n in opened.namelist()}
        lists = {
            split: opened.read(names[f"{title}Images.txt"]).decode().split()
            for split, title in (("train", "Train"), ("test", "Test"))
            if f"{title}Images.txt" in names
        }
    if len(lists) != 2:
        raise ValueError(f"{archive.name} lacks TrainImages.txt or TestImages.txt.")
    split_of = {entry: split for split, entries in lists.items() for entry in entries}
    classes = sorted({entry.split("/")[0] for entry in split_of})
    index = {name: label for label, name in enumerate(classes)}

    def label(name: str) -> tuple[int, str] | None:
        parts = PurePosixPath(name).parts
        if "Images" not in parts:
            return None
        entry = "/".join(parts[parts.index("Images") + 1 :])
        return (index[entry.split("/")[0]], split_of[entry]) if entry in split_of else None

    return ConvertedSource(rows=labelled_rows([archive], label), class_names=classes, official_split=True)


__all__ = [
    "BUTTERFLIES",
    "BUTTERFLY_TEST",
    "VENUS_SIDE",
    "read_butterflies",
    "read_magellan_venus_volcanoes",
    "read_mit_scenes",
    "read_ppmi",
]
