"""Sources labelled by COCO-style JSON annotation files.

- ``caltech_camera_traps`` (dm_nevis): ``eccv_18_annotation_files/{train,trans_val,
  trans_test}_annotations.json``; each annotation gives its ``image_id`` the class of its
  ``category_id`` (the last annotation of an image wins, as in the handler's dict), over the
  handler's 16 classes; the image is ``<image_id>.<ext>`` anywhere in the images tar.
  train / trans_val / trans_test are the source's train / val / test.
- ``coco_single_label`` (dm_nevis): one cropped example per COCO 2017 instance box.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members
from workers.ingest.readers.member_scan import base_name, collect, need, stem
from workers.ingest.writers.parquet_writer import ImageRow
from workers.stream.image_rows import pil_pixels

CAMERA_TRAP_CLASSES = (
    "bobcat",
    "opossum",
    "empty",
    "coyote",
    "raccoon",
    "bird",
    "dog",
    "cat",
    "squirrel",
    "rabbit",
    "skunk",
    "rodent",
    "badger",
    "deer",
    "car",
    "fox",
)
_ECCV = "eccv_18_annotation_files/"


def coco_labels(data: bytes, classes: tuple[str, ...], where: str) -> dict[str, int]:
    """``image_id`` -> class index of a COCO-style annotation file (the last one wins)."""
    doc = json.loads(data)
    categories = {c["id"]: c["name"] for c in doc.get("categories", [])}
    labels = {}
    for annotation in doc.get("annotations", []):
        name = categories.get(annotation["category_id"])
        if name not in classes:
            raise DatasetFormatError(f"{where}: category {name!r} is not one of {classes}.")
        labels[str(annotation["image_id"])] = classes.index(name)
    return labels


@reader("caltech_camera_traps")
def read_caltech_camera_traps(files: SourceFolder) -> ConvertedSource:
    annotations = files.path("eccv_18_annotations.tar.gz")
    parts = (
        ("train_annotations.json", "train"),
        ("trans_val_annotations.json", "val"),
        ("trans_test_annotations.json", "test"),
    )
    wanted = [_ECCV + name for name, _ in parts]
    found = need(collect(annotations, lambda n: n in wanted, want=len(wanted)), wanted, annotations)
    label_split: dict[str, tuple[int, str]] = {}
    for data, (name, split) in zip(found, parts):
        for image_id, label in coco_labels(data, CAMERA_TRAP_CLASSES, name).items():
            label_split.setdefault(image_id, (label, split))
    images = files.path("eccv_18_all_images_sm.tar.gz")

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(images, lambda n: stem(n) in label_split):
            label, split = label_split[stem(member.name)]
            yield ImageRow(image=member.data, label=label, split=split)

    return ConvertedSource(
        rows=rows(),
        class_names=CAMERA_TRAP_CLASSES,
        official_split=True,
        source_facts={"labels": "ECCV'18 annotation files (category per image)"},
    )


_COCO_MIN_SIDE = 16
COCO_CLASSES = 90


def _coco_index(doc: dict) -> tuple[dict[str, list[tuple[list[float], int]]], dict[int, str]]:
    """(image file name -> [(bbox, class)] of its boxes of both sides >= 16 px, class names)."""
    files = {image["id"]: image["file_name"] for image in doc["images"]}
    boxes: dict[str, list[tuple[list[float], int]]] = {}
    for annotation in doc["annotations"]:
        x, y, width, height = annotation["bbox"]
        if width < _COCO_MIN_SIDE or height < _COCO_MIN_SIDE:
            continue
        boxes.setdefault(files[annotation["image_id"]], []).append(
            ([x, y, width, height], int(annotation["category_id"]) - 1)
        )
    names = {int(c["id"]) - 1: c["name"] for c in doc.get("categories", [])}
    return boxes, names


def _coco_rows(archive: Path, boxes: dict[str, list[tuple[list[float], int]]], split: str) -> Iterator[ImageRow]:
    for member in iter_members(archive, lambda n: base_name(n) in boxes):
        with Image.open(io.BytesIO(member.data)) as image:
            for (x, y, width, height), label in boxes[base_name(member.name)]:
                crop = image.crop((x, y, min(image.width, x + width), min(image.height, y + height)))
                yield ImageRow(image=np.ascontiguousarray(pil_pixels(crop)), label=label, split=split)


@reader("coco_single_label")
def read_coco_single_label(files: SourceFolder) -> ConvertedSource:
    """COCO 2017 single-label (dm_nevis): one example per instance annotation whose box is at
    least 16 px each way, the image cropped to the box (clipped to the image), labelled
    ``category_id - 1`` over 90 ids; train2017 is train, val2017 the test split."""
    tables = files.path("annotations_trainval2017.zip")
    parts = []
    names: dict[int, str] = {}
    for part, split in (("train2017", "train"), ("val2017", "test")):
        with zipfile.ZipFile(tables) as handle:
            doc = json.loads(handle.read(f"annotations/instances_{part}.json"))
        boxes, part_names = _coco_index(doc)
        del doc
        names.update(part_names)
        parts.append((files.path(f"{part}.zip"), boxes, split))

    def rows() -> Iterator[ImageRow]:
        for archive, boxes, split in parts:
            yield from _coco_rows(archive, boxes, split)

    classes = [names.get(i, f"unused id {i + 1}") for i in range(COCO_CLASSES)]
    return ConvertedSource(
        rows=rows(),
        class_names=classes,
        official_split=True,
        source_facts={"labels": "instance annotations, boxes >= 16 px cropped", "test": "val2017"},
        keeps=f"instance annotations whose box is at least {_COCO_MIN_SIDE} px each "
        "way, on images of train2017.zip / val2017.zip that "
        "annotations_trainval2017.zip names",
    )


__all__ = ["CAMERA_TRAP_CLASSES", "COCO_CLASSES", "coco_labels"]
