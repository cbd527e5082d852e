"""IAPR TC-12 with the SAIAPR annotations (Kaggle ``nastyatima/iapr-tc12``), as dm_nevis reads it.

- Classes: ``saiaprtc12ok/benchmark/wlist.txt`` lines ``<id>\\t<name>`` (1-based ids).
- Labels: ``saiaprtc12ok/benchmark/saiapr_tc-12/NN/labels.txt`` rows ``<image> <region>
  <label>``. The reference's loop keeps, per image, only the label of its *last* row (each
  later row replaces the list), so every image ends up with one positive class; this reader
  does the same, so the data match the benchmark's.
- Splits: ``saiaprtc12ok/matlab/matlab/{training,validation,testing}.mat`` image ids are
  train / val / test; the stream's rule draws over train + val only, as the reference.
- Images: ``.../images/<id>.jpg`` outside the duplicate ``saiaprtc12ok`` tree.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import PurePosixPath

import numpy as np

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.fine_grained import load_mat
from workers.ingest.readers.layouts import iter_members
from workers.ingest.writers.parquet_writer import ImageRow

_ROOT = "saiaprtc12ok/"
_IGNORED = (".eps", ".txt", ".mat", ".pdf")


def _classes(data: bytes) -> list[str]:
    names: dict[int, str] = {}
    for line in data.decode("utf-8").splitlines():
        if "\t" in line:
            index, name = line.split("\t", 1)
            names[int(index) - 1] = name.strip() or " "
    return [names.get(i, f"unused {i + 1}") for i in range(max(names) + 1)]


def _last_labels(handle: zipfile.ZipFile) -> dict[int, int]:
    labels: dict[int, int] = {}
    for folder in range(41):
        name = f"{_ROOT}benchmark/saiapr_tc-12/{folder:02d}/labels.txt"
        if name not in handle.namelist():
            continue
        rows = np.atleast_2d(np.loadtxt(io.BytesIO(handle.read(name))))
        for row in rows:
            labels[int(row[0])] = int(row[2]) - 1
    return labels


def _split_ids(handle: zipfile.ZipFile) -> dict[int, str]:
    split_of = {}
    for part, split in (("training", "train"), ("validation", "val"), ("testing", "test")):
        mat = load_mat(io.BytesIO(handle.read(f"{_ROOT}matlab/matlab/{part}.mat")))  # type: ignore[arg-type]
        split_of.update({int(i): split for i in np.atleast_1d(mat[part]).reshape(-1)})
    return split_of


@reader("iaprtc12")
def read_iaprtc12(files: SourceFolder) -> ConvertedSource:
    archive = files.path("iapr-tc12.zip")
    with zipfile.ZipFile(archive) as handle:
        classes = _classes(handle.read(f"{_ROOT}benchmark/wlist.txt"))
        labels = _last_labels(handle)
        split_of = _split_ids(handle)

    def image_id(name: str) -> int | None:
        stem = PurePosixPath(name).stem
        if (
            _ROOT.rstrip("/") in name
            or "/images/" not in name
            or name.endswith(_IGNORED)
            or not stem.isdigit()
            or int(stem) not in split_of
        ):
            return None
        return int(stem)

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(archive, lambda n: image_id(n) is not None):
            number = image_id(member.name)
            if number not in labels:
                raise DatasetFormatError(f"{archive.name}: image {member.name} has no label row.")
            yield ImageRow(
                image=member.data,
                label=[labels[number]],  # type: ignore[index]
                split=split_of[number],
            )  # type: ignore[index]

    return ConvertedSource(
        rows=rows(),
        class_names=classes,
        kind="multi",
        official_split=True,
        source_facts={"labels": "last labels.txt row per image (as the reference's loop keeps)"},
    )


__all__: list[str] = []
