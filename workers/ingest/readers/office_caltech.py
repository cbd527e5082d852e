"""Office-Caltech-10: the ten classes Office-31 and Caltech-256 share, with a domain per row.

As in the dm_nevis handler: Office-31's ``<domain>/images/<class>/frame_NNNN.jpg`` (domains
amazon, dslr, webcam) and Caltech-256's ``256_ObjectCategories/NNN.<class>/NNN_NNNN.jpg``,
each class mapped by its own table onto the ten shared classes; other classes are skipped.
``attr.domain`` is the Office domain or ``caltech``, which the stream's ``held_out`` rule
holds out for dev-test / test.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members
from workers.ingest.readers.member_scan import clean_name
from workers.ingest.writers.parquet_writer import ImageRow

CLASSES = (
    "backpack",
    "touring-bike",
    "calculator",
    "head-phones",
    "computer-keyboard",
    "laptop-101",
    "computer-monitor",
    "computer-mouse",
    "coffee-mug",
    "video-projector",
)
OFFICE_CLASSES = (
    "back_pack",
    "bike",
    "calculator",
    "headphones",
    "keyboard",
    "laptop_computer",
    "monitor",
    "mouse",
    "mug",
    "projector",
)
_CALTECH = re.compile(r"256_ObjectCategories/(\d\d\d)\.(.+)/(\d\d\d)_(\d\d\d\d)\.jpg")
_OFFICE = re.compile(r"(\w+)/images/(.+)/frame_(\d\d\d\d)\.jpg")
CALTECH_DOMAIN = "caltech"


def office_label(name: str) -> tuple[int, str] | None:
    """(class, domain) of an Office-31 member, or None when it is not one of the ten."""
    match = _OFFICE.match(clean_name(name))
    if not match or match.group(2) not in OFFICE_CLASSES:
        return None
    return OFFICE_CLASSES.index(match.group(2)), match.group(1)


def caltech_label(name: str) -> tuple[int, str] | None:
    """(class, ``caltech``) of a Caltech-256 member, or None when it is not one of the ten."""
    match = _CALTECH.match(clean_name(name))
    if not match or match.group(2) not in CLASSES:
        return None
    return CLASSES.index(match.group(2)), CALTECH_DOMAIN


def _rows(path: Path, label_of) -> Iterator[ImageRow]:  # noqa: ANN001 - one of the two above
    for member in iter_members(path, lambda n: label_of(n) is not None):
        label, domain = label_of(member.name)
        yield ImageRow(image=member.data, label=label, attributes={"domain": domain})


@reader("office_caltech_10")
def read_office_caltech_10(files: SourceFolder) -> ConvertedSource:
    office = files.path("domain_adaptation_images.tar.gz")
    caltech = files.path("256_ObjectCategories.tar")

    def rows() -> Iterator[ImageRow]:
        yield from _rows(office, office_label)
        yield from _rows(caltech, caltech_label)

    return ConvertedSource(
        rows=rows(),
        class_names=CLASSES,
        source_facts={
            "labels": "Office-31 and Caltech-256 folders mapped onto ten shared classes",
            "attributes": {"domain": "amazon / dslr / webcam (Office-31) or caltech"},
        },
    )


__all__ = ["CALTECH_DOMAIN", "CLASSES", "OFFICE_CLASSES", "caltech_label", "office_label"]
