"""Sources labelled by COCO-style JSON annotation files.

- ``caltech_camera_traps`` (dm_nevis): ``eccv_18_annotation_files/{train,trans_val,
  trans_test}_annotations.json``; each annotation gives its ``image_id`` the class of its
  ``category_id`` (the last annotation of an image wins, as in the handler's dict), over the
  handler's 16 classes; the image is ``<image_id>.<ext>`` anywhere in the images tar.
  train / trans_val / trans_test are the source's train / val / test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from services.core.errors import DatasetFormatError
from workers.stream.formats.parquet_writer import ImageRow
from workers.stream.readers.base import ConvertedSource, SourceFolder, reader
from workers.stream.readers.layouts import iter_members
from workers.stream.readers.member_scan import collect, need, stem

CAMERA_TRAP_CLASSES = ("bobcat", "opossum", "empty", "coyote", "raccoon", "bird", "dog", "cat",
                       "squirrel", "rabbit", "skunk", "rodent", "badger", "deer", "car", "fox")
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
    parts = (("train_annotations.json", "train"), ("trans_val_annotations.json", "val"),
             ("trans_test_annotations.json", "test"))
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

    return ConvertedSource(rows=rows(), class_names=CAMERA_TRAP_CLASSES, official_split=True,
                           source_facts={"labels": "ECCV'18 annotation files (category per image)"})


__all__ = ["CAMERA_TRAP_CLASSES", "coco_labels"]
