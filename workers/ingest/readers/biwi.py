"""BIWI Kinect head pose (Kaggle ``kmader/biwi-kinect-head-pose-database``), as dm_nevis
turns it into 15 binary labels.

Each ``<...>/<subject>/frame_NNNNN_pose.txt`` starts with a 3x3 rotation matrix; its yaw,
pitch and roll (pyquaternion, degrees) are each put in one of 5 equal-frequency bins made
over all pose files (edges interpolated over the sorted angles; a value on the top edge goes
to the last bin), and the image ``frame_NNNNN_rgb.png`` gets one positive label per angle:
``bin + 5 * angle`` (yaw 0-4, pitch 5-9, roll 10-14). ``attr.subject`` (the two-digit folder)
feeds the stream's subject-disjoint ``by_attribute`` rule. No official split.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Iterator
from pathlib import PurePosixPath

import numpy as np

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members
from workers.ingest.writers.parquet_writer import ImageRow

ANGLES = ("yaw", "pitch", "roll")
BINS = 5
_POSE = "_pose.txt"


def pose_angles(text: str, where: str) -> list[float]:
    """(yaw, pitch, roll) in degrees of a pose file's rotation matrix."""
    from pyquaternion import Quaternion  # noqa: PLC0415 (only BIWI needs quaternions)

    rows = [[float(v) for v in line.strip().split(" ")] for line in text.splitlines()[:3]]
    if len(rows) != 3 or any(len(r) != 3 for r in rows):
        raise DatasetFormatError(f"{where}: the first three lines are not a 3x3 rotation.")
    quaternion = Quaternion(matrix=np.array(rows), atol=1e-4)
    return [math.degrees(a) for a in quaternion.yaw_pitch_roll]


def angle_bins(values: np.ndarray) -> np.ndarray:
    """The reference's 6 edges of 5 equal-frequency bins of one angle."""
    n = len(values)
    return np.interp(np.linspace(0, n, BINS + 1), np.arange(n), np.sort(values))


def quantize(angles: list[float], edges: list[np.ndarray]) -> list[int]:
    labels = []
    for i, (value, edge) in enumerate(zip(angles, edges)):
        index = BINS if value == edge[-1] else int(np.digitize(value, edge))
        labels.append(index - 1 + BINS * i)
    return labels


@reader("biwi")
def read_biwi(files: SourceFolder) -> ConvertedSource:
    archive = files.path("biwi-kinect-head-pose-database.zip")
    angles: dict[str, list[float]] = {}
    with zipfile.ZipFile(archive) as handle:
        for name in sorted(handle.namelist()):
            if name.endswith(_POSE):
                text = handle.read(name).decode("utf-8")
                angles[name[: -len(_POSE)] + "_rgb.png"] = pose_angles(text, name)
    if not angles:
        raise DatasetFormatError(f"{archive.name} holds no *{_POSE} files.")
    table = np.array(list(angles.values()))
    edges = [angle_bins(table[:, i]) for i in range(len(ANGLES))]
    labels = {name: quantize(value, edges) for name, value in angles.items()}

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(archive, lambda n: n in labels):
            subject = PurePosixPath(member.name).parent.name
            if len(subject) != 2 or not subject.isdigit():
                raise DatasetFormatError(f"{archive.name}: {member.name} is not in a subject folder.")
            yield ImageRow(image=member.data, label=labels[member.name], attributes={"subject": int(subject)})

    names = [f"{angle} bin {b + 1}" for angle in ANGLES for b in range(BINS)]
    return ConvertedSource(
        rows=rows(),
        class_names=names,
        kind="multi",
        source_facts={
            "labels": "yaw / pitch / roll of *_pose.txt in 5 equal-frequency bins each",
            "attributes": {"subject": "the two-digit subject folder"},
        },
    )


__all__ = ["ANGLES", "angle_bins", "pose_angles", "quantize"]
