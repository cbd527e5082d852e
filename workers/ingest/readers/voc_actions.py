"""VOC 2012 actions: one example per annotated person, the image cropped to its box.

As the dm_nevis handler reads ``VOCtrainval_11-May-2012.tar``: the images are those named in
any ``ImageSets/Action/<action>_trainval.txt`` (every line, whatever its flag; ``other`` has
no list), and each object of ``Annotations/<id>.xml`` becomes one example: the image cropped
to ``bndbox`` (coordinates truncated to ints, Pillow's crop box) with the multi-hot labels of
the object's ``actions`` flags over the 11 actions. ``VOC2012test.tar`` is not used. There is
no official split (the stream's rule draws at random).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
from PIL import Image

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members
from workers.ingest.readers.member_scan import clean_name, collect, stem, text_lines
from workers.ingest.writers.parquet_writer import ImageRow
from workers.stream.image_rows import pil_pixels

ACTIONS = (
    "jumping",
    "phoning",
    "playinginstrument",
    "reading",
    "ridingbike",
    "ridinghorse",
    "running",
    "takingphoto",
    "usingcomputer",
    "walking",
    "other",
)
_BASE = "VOCdevkit/VOC2012/"
Box = tuple[tuple[int, int, int, int], list[int]]


def person_boxes(xml: bytes, where: str) -> list[Box]:
    """Each object's (crop box, action classes) of an action annotation."""
    try:
        root = ElementTree.fromstring(xml)  # noqa: S314
    except ElementTree.ParseError as exc:
        raise DatasetFormatError(f"{where}: not readable XML ({exc}).") from None
    boxes = []
    for obj in root.findall("object"):
        box = obj.find("bndbox")
        actions = obj.find("actions")
        if box is None or actions is None:
            raise DatasetFormatError(f"{where}: an object has no bndbox or no actions.")
        xmin, ymin, xmax, ymax = (int(float(box.findtext(k) or "nan")) for k in ("xmin", "ymin", "xmax", "ymax"))
        on = [ACTIONS.index(a.tag) for a in actions if a.tag in ACTIONS and int(float(a.text or 0)) == 1]
        boxes.append(((xmin, ymin, xmax, ymax), sorted(on)))
    return boxes


def _index(path: Path) -> dict[str, list[Box]]:
    lists = {f"{_BASE}ImageSets/Action/{a}_trainval.txt" for a in ACTIONS if a != "other"}
    found = collect(path, lambda n: n in lists or (n.startswith(_BASE + "Annotations/") and n.endswith(".xml")))
    ids: set[str] = set()
    for name in lists:
        if name in found:  # the reference skips a missing list too
            ids.update(line.split()[0] for line in text_lines(found[name]))
    if not ids:
        raise DatasetFormatError(f"{path.name} has no {_BASE}ImageSets/Action/*_trainval.txt.")
    index = {}
    for image_id in sorted(ids):
        xml = found.get(f"{_BASE}Annotations/{image_id}.xml")
        if xml is not None:  # the reference skips an image without annotations
            index[image_id] = person_boxes(xml, f"{path.name}:{image_id}.xml")
    return index


@reader("voc_actions")
def read_voc_actions(files: SourceFolder) -> ConvertedSource:
    trainval = files.path("VOCtrainval_11-May-2012.tar")
    index = _index(trainval)
    folder = _BASE + "JPEGImages/"

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(trainval, lambda n: clean_name(n).startswith(folder) and stem(n) in index):
            with Image.open(io.BytesIO(member.data)) as image:
                for box, labels in index[stem(member.name)]:
                    crop = pil_pixels(image.crop(box))
                    yield ImageRow(image=np.ascontiguousarray(crop), label=labels)

    return ConvertedSource(
        rows=rows(),
        class_names=ACTIONS,
        kind="multi",
        source_facts={"labels": "per person box: Annotations/<id>.xml actions flags; image cropped to the box"},
    )


__all__ = ["ACTIONS", "person_boxes"]
