"""Sources whose archives carry their official split in the folder an image sits in.

- ``belgium_tsc``: ``BelgiumTSC_{Training,Testing}.zip`` with ``<part>/000NN/*.ppm``; the
  class is the folder number, names are the lines of ``reducedSetTS.txt`` after its header.
- ``pneumonia_chest_xray``: ``chest-xray-pneumonia.zip``, ``chest_xray/chest_xray/
  {train,val,test}/{NORMAL,PNEUMONIA}/*.jpeg`` (the copies elsewhere in the zip are not used).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import is_image, iter_members, parent_name
from workers.ingest.writers.parquet_writer import ImageRow

Label = Callable[[str], "tuple[int, str] | None"]  # member -> (label, split), or skip


def labelled_rows(archives: list[Path], label: Label) -> Iterator[ImageRow]:
    """The images of ``archives`` that ``label`` places, with their label and split."""
    for archive in archives:
        for member in iter_members(archive, lambda n: is_image(n) and label(n) is not None):
            placed = label(member.name)
            assert placed is not None
            yield ImageRow(image=member.data, label=placed[0], split=placed[1])


def _numbered(split: str) -> Label:
    def label(name: str) -> tuple[int, str] | None:
        folder = parent_name(name)
        return (int(folder), split) if folder.isdigit() else None

    return label


def _chain(*parts: tuple[Path, Label]) -> Iterator[ImageRow]:
    for archive, label in parts:
        yield from labelled_rows([archive], label)


@reader("belgium_tsc")
def read_belgium_tsc(files: SourceFolder) -> ConvertedSource:
    names = files.path("reducedSetTS.txt").read_text(errors="replace").splitlines()[1:]
    rows = _chain(
        (files.path("BelgiumTSC_Training.zip"), _numbered("train")),
        (files.path("BelgiumTSC_Testing.zip"), _numbered("test")),
    )
    return ConvertedSource(rows=rows, class_names=[n.strip() for n in names if n.strip()], official_split=True)


PNEUMONIA = ("NORMAL", "PNEUMONIA")


@reader("pneumonia_chest_xray")
def read_pneumonia_chest_xray(files: SourceFolder) -> ConvertedSource:
    def label(name: str) -> tuple[int, str] | None:
        parts = PurePosixPath(name).parts
        if parts[:2] != ("chest_xray", "chest_xray") or len(parts) != 5 or parts[3] not in PNEUMONIA:
            return None
        return (PNEUMONIA.index(parts[3]), parts[2]) if parts[2] in ("train", "val", "test") else None

    return ConvertedSource(
        rows=labelled_rows([files.path("chest-xray-pneumonia.zip")], label), class_names=PNEUMONIA, official_split=True
    )


__all__ = ["PNEUMONIA", "Label", "labelled_rows", "read_belgium_tsc", "read_pneumonia_chest_xray"]
