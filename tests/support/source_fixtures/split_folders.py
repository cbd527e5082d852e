"""Fixtures for the sources that carry their split in folders or lists (readers/split_folders.py).
Each writer returns the (class name, split) of every row the reader must make, in order."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny import encoded, source_dir, write_zip


def write_belgium_tsc(data_dir: Path) -> list[tuple[str, str]]:
    folder = source_dir(data_dir, "belgium_tsc")
    (folder / "reducedSetTS.txt").write_text("header\n" + "".join(f"sign {i}\n" for i in range(62)))
    write_zip(
        folder / "BelgiumTSC_Training.zip",
        {
            "Training/00061/01957_00002.ppm": encoded(1, "PPM", 8, 9),
            "Training/00000/00001_00000.ppm": encoded(2, "PPM", 8, 9),
            "Training/00000/GT-00000.csv": b"Filename;ClassId\n",
            "Training/Readme.txt": b"hi\n",
        },
    )
    write_zip(folder / "BelgiumTSC_Testing.zip", {"Testing/00007/00250_00000.ppm": encoded(3, "PPM", 8, 9)})
    return [("sign 0", "train"), ("sign 61", "train"), ("sign 7", "test")]


def write_pneumonia_chest_xray(data_dir: Path) -> list[tuple[str, str]]:
    members = {}
    for n, (part, cls) in enumerate(
        [("train", "PNEUMONIA"), ("train", "NORMAL"), ("val", "NORMAL"), ("test", "PNEUMONIA")]
    ):
        members[f"chest_xray/chest_xray/{part}/{cls}/im{n}.jpeg"] = encoded(n, "JPEG", 8, 8, 1)
        members[f"chest_xray/{part}/{cls}/im{n}.jpeg"] = encoded(n, "JPEG", 8, 8, 1)  # a second copy, unused
    members["chest_xray/__MACOSX/chest_xray/train/NORMAL/._im1.jpeg"] = b"\0"
    write_zip(source_dir(data_dir, "pneumonia_chest_xray") / "chest-xray-pneumonia.zip", members)
    return [("PNEUMONIA", "test"), ("NORMAL", "train"), ("PNEUMONIA", "train"), ("NORMAL", "val")]


__all__ = ["write_belgium_tsc", "write_pneumonia_chest_xray"]
