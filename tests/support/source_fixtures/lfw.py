"""Fixture for LFW: lfw.tgz with ``lfw/<person>/<person>_NNNN.jpg`` (with directory entries)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from tests.support.source_fixtures.tiny import encoded, source_dir

PEOPLE = {"Zed_Zulu": 6, "Anna_Able": 5, "Bob_Few": 4, "Carl_Cole": 7}


def write_lfw(data_dir: Path) -> list[tuple[str, str]]:
    """People in a non-sorted order; Bob has fewer than 5 images. Returns (person, file) in
    archive order."""
    order = []
    with tarfile.open(source_dir(data_dir, "lfw") / "lfw.tgz", "w:gz") as archive:
        for person, count in PEOPLE.items():
            folder = tarfile.TarInfo(f"lfw/{person}")
            folder.type = tarfile.DIRTYPE
            archive.addfile(folder)
            for n in range(1, count + 1):
                data = encoded(len(order), "JPEG", 9, 8)
                info = tarfile.TarInfo(f"lfw/{person}/{person}_{n:04d}.jpg")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
                order.append((person, info.name))
    return order


__all__ = ["PEOPLE", "write_lfw"]
