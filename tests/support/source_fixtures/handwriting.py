"""Fixtures for Chars74K (three tgz archives and the lists) and CASIA-HWDB 1.1 (.gnt in zips)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from tests.support.source_fixtures.tiny import encoded, pixels, source_dir, write_tar, write_zip


def write_chars74k(data_dir: Path) -> list[str]:
    """Returns the class name of every row the reader must make, in order."""
    folder = source_dir(data_dir, "chars74k")
    write_tar(
        folder / "EnglishImg.tgz",
        {
            "English/Img/GoodImg/Bmp/Sample011/img011-00001.png": encoded(1, "PNG", 9, 7),
            "English/Img/GoodImg/Msk/Sample011/img011-00001.png": encoded(2, "PNG", 9, 7, 1),
            "English/Img/BadImag/Bmp/Sample001/img001-00002.png": encoded(3, "PNG", 9, 7),
        },
    )
    write_tar(
        folder / "EnglishHnd.tgz",
        {
            "English/Hnd/Img/Sample062/img062-001.png": encoded(4, "PNG", 9, 7),
            "English/Hnd/Trj/Sample062/img062-001.txt": b"1 2\n",
        },
    )
    write_tar(folder / "EnglishFnt.tgz", {"English/Fnt/Sample037/img037-00001.png": encoded(5, "PNG", 9, 7, 1)})
    write_tar(folder / "Lists.tgz", {"Lists/English/Img/lists.mat": b"MATLAB"})
    return ["A", "0", "z", "a"]


def gnt_record(tag: bytes, bitmap: np.ndarray) -> bytes:
    height, width = bitmap.shape
    return struct.pack("<I2sHH", width * height + 10, tag, width, height) + bitmap.tobytes()


def write_casia_hwdb(data_dir: Path) -> list[tuple[str, str, np.ndarray]]:
    """Returns (class, split, stored bitmap) per row, in order."""
    folder = source_dir(data_dir, "casia_hwdb")
    zhong, a_tag, bad = "中".encode("gb2312"), b"A\x00", b"\xff\xff"
    parts = {
        "Gnt1.1TrainPart1.zip": {"1002-c.gnt": [(zhong, 1)], "1001-c.gnt": [(a_tag, 2), (zhong, 3)]},
        "Gnt1.1TrainPart2.zip": {"1100-c.gnt": [(bad, 4)]},
        "Gnt1.1Test.zip": {"1241-c.gnt": [(zhong, 5)]},
    }
    rows = []
    for file_name, gnts in parts.items():
        members = {}
        for gnt in sorted(gnts):
            blob = b""
            for tag, seed in gnts[gnt]:
                bitmap = pixels(seed, 5 + seed, 4, 1)
                blob += gnt_record(tag, bitmap)
                rows.append((tag, "test" if "Test" in file_name else "train", bitmap))
            members[gnt] = blob
        write_zip(folder / file_name, {name: members[name] for name in gnts})
    names = {zhong: "中", a_tag: "A\x00", bad: repr(bad)}
    return [(names[tag], split, bitmap) for tag, split, bitmap in rows]


__all__ = ["gnt_record", "write_casia_hwdb", "write_chars74k"]
