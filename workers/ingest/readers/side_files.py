"""Zip sources labelled or split by side files: food101n, CVC-MUSCIMA, Olivetti faces.

- ``food101n``: ``Food-101N_release.zip``, ``Food-101N_release/images/<class>/<file>.jpg``;
  ``meta/verified_train.tsv`` (train) and ``meta/verified_val.tsv`` (test) list
  ``<class>/<file>`` after a header line; images in neither are not used. 101 classes (sorted).
- ``cvc_muscima``: ``CVCMUSCIMA_WI.zip`` with ``CVCMUSCIMA_WI/PNG_GT_Gray/<writer>/<page>.png``;
  ``Partitions_Set.zip``'s ``set_2_Independent/set_2_{training,testing}_01.txt`` list
  ``<writer>/<page>.png`` (train / test). 50 writers (sorted).
- ``olivetti_face``: Kaggle ``the-orl-database-for-training-and-testing.zip``; the subject is
  the second ``_`` field of each file stem (as the reference reads it); 40 classes by number.
"""

from __future__ import annotations

import zipfile
from pathlib import PurePosixPath

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import is_image, iter_members, member_names
from workers.ingest.readers.split_folders import Label, labelled_rows
from workers.ingest.writers.parquet_writer import ImageRow


def _read(archive: zipfile.ZipFile, suffix: str) -> str:
    names = [n for n in archive.namelist() if n.endswith(suffix)]
    if not names:
        raise ValueError(f"{archive.filename} has no {suffix}.")
    return archive.read(names[0]).decode("utf-8")


def _listed(split_of: dict[str, str], under: str) -> tuple[list[str], Label]:
    """Classes (sorted) of ``<class>/<file>`` list entries, and the members' (label, split)."""
    classes = sorted({entry.split("/")[0] for entry in split_of})
    index = {name: label for label, name in enumerate(classes)}

    def label(name: str) -> tuple[int, str] | None:
        path = PurePosixPath(name)
        entry = f"{path.parent.name}/{path.name}"
        return (index[path.parent.name], split_of[entry]) if under in name and entry in split_of else None

    return classes, label


@reader("food101n")
def read_food101n(files: SourceFolder) -> ConvertedSource:
    archive = files.path("Food-101N_release.zip")
    with zipfile.ZipFile(archive) as opened:
        split_of = {
            line.split("\t")[0].strip(): split
            for split, part in (("train", "train"), ("test", "val"))
            for line in _read(opened, f"meta/verified_{part}.tsv").splitlines()[1:]
            if line.strip()
        }
    classes, label = _listed(split_of, "/images/")
    return ConvertedSource(rows=labelled_rows([archive], label), class_names=classes, official_split=True)


@reader("cvc_muscima")
def read_cvc_muscima(files: SourceFolder) -> ConvertedSource:
    with zipfile.ZipFile(files.path("Partitions_Set.zip")) as opened:
        split_of = {
            entry: split
            for split, part in (("train", "training"), ("test", "testing"))
            for entry in _read(opened, f"set_2_Independent/set_2_{part}_01.txt").split()
        }
    classes, label = _listed(split_of, "PNG_GT_Gray/")
    return ConvertedSource(
        rows=labelled_rows([files.path("CVCMUSCIMA_WI.zip")], label), class_names=classes, official_split=True
    )


def _olivetti(name: str) -> str | None:
    fields = PurePosixPath(name).stem.split("_")
    return fields[1] if len(fields) > 1 and fields[1].isdigit() and is_image(name) else None


@reader("olivetti_face")
def read_olivetti_face(files: SourceFolder) -> ConvertedSource:
    archive = files.path("the-orl-database-for-training-and-testing.zip")
    subjects = sorted({s for n in member_names(archive) if (s := _olivetti(n))}, key=int)
    index = {s: label for label, s in enumerate(subjects)}
    rows = (
        ImageRow(image=m.data, label=index[_olivetti(m.name) or ""])
        for m in iter_members(archive, lambda n: _olivetti(n) is not None)
    )
    return ConvertedSource(rows=rows, class_names=subjects)


__all__ = ["read_cvc_muscima", "read_food101n", "read_olivetti_face"]
