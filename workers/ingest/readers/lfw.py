"""LFW as identification: ``lfw.tgz`` holds ``lfw/<person>/<person>_NNNN.jpg``; LFW-a
(``lfwa``, the aligned version) is the same protocol on ``lfwa.zip``'s ``<person>/*.jpg``.

As in the reference, only people with at least 5 images are kept (423 people, 5985 images in
the real archive), each a class, named and numbered in the order they first appear in the
archive. Rows stay in archive order, so the stream's ``per_class_counts`` rule (``pick:
last``) gives each person's last two images to test, the one before to dev_test and the
one before that to dev, as the reference does. The archive is read twice (names, then
images); LFW-a's zip is read in the order its members are stored (the reference's "zip
order"), not by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from workers.ingest.readers.base import ConvertedSource, RuleKeepsNothingError, SourceFolder, reader
from workers.ingest.readers.layouts import is_image, iter_members, member_names, parent_name
from workers.ingest.writers.parquet_writer import ImageRow

MIN_IMAGES = 5


def people(names: list[str]) -> list[str]:
    """People with at least :data:`MIN_IMAGES` images, in order of first appearance."""
    counts: dict[str, int] = {}
    for name in names:
        counts[parent_name(name)] = counts.get(parent_name(name), 0) + 1
    return [person for person, count in counts.items() if count >= MIN_IMAGES]


def _rows(archive: Path, index: dict[str, int]) -> Iterator[ImageRow]:
    for member in iter_members(archive, lambda n: is_image(n) and parent_name(n) in index, zip_stored_order=True):
        yield ImageRow(image=member.data, label=index[parent_name(member.name)])


def _people_source(archive: Path) -> ConvertedSource:
    names = member_names(archive, is_image, zip_stored_order=True)
    kept = people(names)
    if not kept:
        counts: dict[str, int] = {}
        for name in names:
            counts[parent_name(name)] = counts.get(parent_name(name), 0) + 1
        raise RuleKeepsNothingError(
            f"{archive.name}: the rule 'people with at least {MIN_IMAGES} images' keeps no one: "
            f"the archive holds {len(names)} images of {len(counts)} people, at most "
            f"{max(counts.values(), default=0)} of one person; is it the real archive?"
        )
    index = {person: label for label, person in enumerate(kept)}
    return ConvertedSource(
        rows=_rows(archive, index),
        class_names=kept,
        source_facts={"min_images_per_person": MIN_IMAGES},
        keeps=f"people with at least {MIN_IMAGES} images",
    )


@reader("lfw")
def read_lfw(files: SourceFolder) -> ConvertedSource:
    return _people_source(files.path("lfw.tgz"))


@reader("lfwa")
def read_lfwa(files: SourceFolder) -> ConvertedSource:
    return _people_source(files.path("lfwa.zip"))


__all__ = ["MIN_IMAGES", "people", "read_lfw", "read_lfwa"]
