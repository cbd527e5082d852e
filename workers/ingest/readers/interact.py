"""Interact (Antol et al.): real stand-alone images and category illustrations, 60 classes.

As the dm_nevis handler: each annotation zip holds one ``<label>;<file>;<class name>`` list
(1-based labels) naming ``imgs/<file>`` in its images zip; three truncated real images are
left out. ``attr.image_set`` is ``real`` or ``illustration``: the stream's ``random`` rule
keeps every illustration in train (``train_only``) and draws the real images, as the
reference does. No official split.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members
from workers.ingest.readers.member_scan import clean_name, text_lines
from workers.ingest.writers.parquet_writer import ImageRow

PARTS = (  # (images zip, annotations zip, list file, image set)
    (
        "interact_stand-alone_dataset_images.zip",
        "interact_stand-alone_dataset_annotations.zip",
        "interact_final_dataset_labels_and_images.txt",
        "real",
    ),
    (
        "interact_illustration_category_dataset_images.zip",
        "interact_illustration_category_dataset_annotations.zip",
        "interact_illustration_category_dataset_labels_and_images.txt",
        "illustration",
    ),
)
TRUNCATED = (
    "imgs/22TCSTMOFXRDFDVIK9PDTXJK5OZTQ6_20.jpg",
    "imgs/249YW2GTP9RAU1I25WX94SOKQN6OTI_16.jpg",
    "imgs/24PFCD45XCETAM5TCF9N9TGUNNTZXA_02.jpg",
)


def _annotations(data: bytes, where: str, names: dict[int, str]) -> dict[str, int]:
    labels = {}
    for line in text_lines(data):
        fields = line.split(";")
        if len(fields) != 3:
            raise DatasetFormatError(f"{where}: line {line!r} is not '<label>;<file>;<name>'.")
        label, path = int(fields[0]) - 1, f"imgs/{fields[1]}"
        if names.setdefault(label, fields[2]) != fields[2]:
            raise DatasetFormatError(f"{where}: label {label + 1} is named {fields[2]!r} and {names[label]!r}.")
        if path not in TRUNCATED:
            labels[path] = label
    return labels


@reader("interact")
def read_interact(files: SourceFolder) -> ConvertedSource:
    names: dict[int, str] = {}
    parts = []
    for images, annotations, list_file, image_set in PARTS:  # noqa: F402
        with zipfile.ZipFile(files.path(annotations)) as handle:
            labels = _annotations(handle.read(list_file), list_file, names)
        parts.append((files.path(images), labels, image_set))
    if sorted(names) != list(range(len(names))):
        raise DatasetFormatError("Interact's labels do not cover 1..N.")

    def rows() -> Iterator[ImageRow]:
        for archive, labels, image_set in parts:
            for member in iter_members(archive, lambda n: clean_name(n) in labels):  # noqa: B023
                yield ImageRow(
                    image=member.data, label=labels[clean_name(member.name)], attributes={"image_set": image_set}
                )

    return ConvertedSource(
        rows=rows(),
        class_names=[names[i] for i in range(len(names))],
        source_facts={"attributes": {"image_set": "real / illustration"}},
    )


__all__ = ["PARTS", "TRUNCATED"]
