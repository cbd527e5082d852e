"""Tiny Oxford Flowers 102 / 17, SVHN (cropped) and Caltech-101 silhouettes in their layouts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.io import savemat

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar
from workers.ingest.readers.class_name_lists import class_names


def write_oxford_flowers102(folder: Path) -> dict[str, tuple[str, str]]:
    labels = [77, 77, 1, 102, 5, 1]  # 1-based, per image id 1..6
    members = {
        f"jpg/image_{i:05d}.jpg": image_bytes(40 + i, 30, seed=i, fmt="JPEG") for i in range(1, 8)
    }  # image 7 is in no split
    write_tar(folder / "102flowers.tgz", members, compression="gz")
    savemat(folder / "imagelabels.mat", {"labels": np.array([labels + [3]], dtype=np.uint8)})
    sets = {"trnid": [1, 3, 5], "valid": [2, 6], "tstid": [4]}
    savemat(folder / "setid.mat", {k: np.array([v], dtype=np.uint16) for k, v in sets.items()})
    names = class_names("oxford_flowers102")
    split = {"trnid": "train", "valid": "val", "tstid": "test"}
    return {str(i): (names[labels[i - 1] - 1], split[k]) for k, ids in sets.items() for i in ids}


def write_oxford_flowers_17(folder: Path) -> dict[str, tuple[str, str]]:
    ids = {"trn1": [1, 81, 161], "val1": [2, 1360], "tst1": [82, 1281]}
    members = {"jpg/files.txt": b"image_0001.jpg\n"}
    for i in sorted({*sum(ids.values(), []), 3}):
        members[f"jpg/image_{i:04d}.jpg"] = image_bytes(30, 20 + i % 7, seed=i, fmt="JPEG")
    write_tar(folder / "17flowers.tgz", members, compression="gz")
    mat = {k: np.array([v], dtype=np.uint16) for k, v in ids.items()}
    mat.update({k.replace("1", "2"): np.array([v]) for k, v in ids.items()})
    savemat(folder / "datasplits.mat", mat)
    split = {"trn1": "train", "val1": "val", "tst1": "test"}
    return {str(i): (f"flower {(i - 1) // 80 + 1}", split[k]) for k, v in ids.items() for i in v}


def write_svhn_cropped(folder: Path) -> dict[str, tuple[str, str]]:
    expected = {}
    rng = np.random.default_rng(3)
    for part, digits in (("train", [10, 1, 2, 10, 9]), ("test", [3, 10]), ("extra", [4])):
        images = rng.integers(0, 256, size=(32, 32, 3, len(digits)), dtype=np.uint8)
        savemat(folder / f"{part}_32x32.mat", {"X": images, "y": np.array(digits, dtype=np.uint8)[:, None]})
        if part != "extra":
            expected.update({f"{part}{i}": (str(d % 10), part) for i, d in enumerate(digits)})
    return expected


SILHOUETTE_NAMES = ("Faces_2", "Faces_3", "Leopards")


def write_silhouettes_28(folder: Path) -> dict[str, tuple[str, str]]:
    names = np.empty((1, len(SILHOUETTE_NAMES)), dtype=object)
    names[0, :] = SILHOUETTE_NAMES
    rng = np.random.default_rng(5)
    savemat(
        folder / "caltech101_silhouettes_28.mat",
        {"X": rng.integers(0, 2, size=(4, 784)).astype(float), "Y": np.array([[1, 2, 3, 1]]), "classnames": names},
    )
    parts = {"train": [1, 2, 3, 3], "val": [2], "test": [1, 3]}
    mat = {}
    expected = {}
    for part, labels in parts.items():
        mat[f"{part}_data"] = rng.integers(0, 2, size=(len(labels), 784)).astype(float)
        mat[f"{part}_labels"] = np.array(labels, dtype=float)[:, None]
        expected.update({f"{part}{i}": (SILHOUETTE_NAMES[c - 1], part) for i, c in enumerate(labels)})
    savemat(folder / "caltech101_silhouettes_28_split1.mat", mat)
    return expected


__all__ = [
    "SILHOUETTE_NAMES",
    "write_oxford_flowers102",
    "write_oxford_flowers_17",
    "write_silhouettes_28",
    "write_svhn_cropped",
]
