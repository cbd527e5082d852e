"""TID2008 and TID2013 image quality, as the dm_nevis handler makes them classification.

The RAR archive (read with ``rarfile``; compressed members need one of the tools it drives,
``unrar``, ``unar``, ``7z`` or ``bsdtar``) holds the distorted images ``iSS_DD_L.bmp`` and
``MSSIM.TXT`` (2008) / ``MSSIM.txt`` (2013): one value per image, in subject, distortion,
level order. The values are sorted and cut into 5 buckets of equal size; an image's class is
the first bucket holding its value. The reference extracts with ``unrar e`` (paths dropped),
so a later member of the same file name wins, and it reads only names ending in ``bmp``
(lower-cased before matching). No official split.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.writers.parquet_writer import ImageRow

SUBJECTS = 25
BUCKETS = 5
YEARS = {2008: (17, 4, "MSSIM.TXT"), 2013: (24, 5, "MSSIM.txt")}  # types, levels, value file


def mssim_buckets(values: dict[str, float]) -> tuple[dict[str, int], list[str]]:
    """(image name -> bucket, bucket names): the reference's 5 equal-size buckets."""
    ordered = sorted(values.values())
    size = len(ordered) // BUCKETS
    buckets = [ordered[k * size : (k + 1) * size] for k in range(BUCKETS)]
    members = [set(b) for b in buckets]
    labels = {}
    for name, value in values.items():
        found = next((k for k, b in enumerate(members) if value in b), None)
        if found is None:
            raise DatasetFormatError(f"TID: {name}'s MSSIM {value} falls in no bucket.")
        labels[name] = found
    return labels, [f"MSSIM {b[0]:.4f}-{b[-1]:.4f}" for b in buckets]


def flat_members(path: Path) -> tuple[Any, dict[str, Any]]:
    """(the opened RAR archive, file name -> member) as ``unrar e`` leaves them: paths dropped,
    a later member of the same name replacing an earlier one."""
    import rarfile  # noqa: PLC0415 (only the RAR sources pay for rarfile)

    archive = rarfile.RarFile(path)
    last: dict[str, Any] = {}
    for info in archive.infolist():
        if not info.is_dir():
            last[PurePosixPath(info.filename.replace("\\", "/")).name] = info
    return archive, last


def _read_tid(files: SourceFolder, year: int) -> ConvertedSource:
    types, levels, value_file = YEARS[year]
    path = files.path(f"tid{year}.rar")
    archive, last = flat_members(path)
    if value_file not in last:
        raise DatasetFormatError(f"{path.name} has no {value_file}.")
    lines = iter(archive.read(last[value_file]).decode("ascii", errors="replace").splitlines())
    values = {}
    for subject in range(1, SUBJECTS + 1):
        for kind in range(1, types + 1):
            for level in range(1, levels + 1):
                values[f"i{subject:02d}_{kind:02d}_{level}.bmp"] = float(next(lines).strip())
    labels, names = mssim_buckets(values)

    def rows() -> Iterator[ImageRow]:
        with archive:
            for name, info in last.items():
                if name.endswith("bmp") and name.lower() in labels:
                    yield ImageRow(image=archive.read(info), label=labels[name.lower()])

    return ConvertedSource(
        rows=rows(), class_names=names, source_facts={"labels": f"{value_file} values in 5 equal-size buckets"}
    )


@reader("tid2008")
def read_tid2008(files: SourceFolder) -> ConvertedSource:
    return _read_tid(files, 2008)


@reader("tid2013")
def read_tid2013(files: SourceFolder) -> ConvertedSource:
    return _read_tid(files, 2013)


__all__ = ["BUCKETS", "YEARS", "flat_members", "mssim_buckets"]
