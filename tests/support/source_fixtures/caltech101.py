"""Fixture for Caltech 101 (TFDS layout): 101_ObjectCategories.tar.gz with a folder per
category, more than the 30 images per class its train split takes."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny import encoded, source_dir, write_tar

COUNTS = {"Faces_easy": 31, "BACKGROUND_Google": 32, "accordion": 30}


def write_caltech101(data_dir: Path) -> dict[str, int]:
    members = {}
    for cls, count in COUNTS.items():
        for n in range(1, count + 1):
            members[f"101_ObjectCategories/{cls}/image_{n:04d}.jpg"] = encoded(len(members), "JPEG", 4, 5)
    write_tar(source_dir(data_dir, "caltech101") / "101_ObjectCategories.tar.gz", members)
    return {cls.lower(): count for cls, count in COUNTS.items()}


__all__ = ["COUNTS", "write_caltech101"]
