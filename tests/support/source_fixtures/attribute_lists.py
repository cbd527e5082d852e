"""Tiny CelebA, AwA2 and NIH chest X-ray sources in their exact layouts."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from scipy.io import savemat

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar, write_zip

CELEB_ATTRIBUTES = ("5_o_Clock_Shadow", "Arched_Eyebrows", "Attractive", "Young")


def write_celeb_a(folder: Path) -> dict[str, tuple[list[str], str]]:
    table = {
        "000001.jpg": ([-1, 1, 1, 1], "0"),
        "000002.jpg": ([-1, -1, -1, -1], "0"),
        "000003.jpg": ([1, -1, 1, -1], "1"),
        "000004.jpg": ([1, 1, 1, 1], "2"),
    }
    write_zip(
        folder / "img_align_celeba.zip",
        {
            "img_align_celeba/": b"",
            **{f"img_align_celeba/{n}": image_bytes(18, 22, seed=i, fmt="JPEG") for i, n in enumerate(table)},
        },
    )
    lines = [str(len(table)), " ".join(CELEB_ATTRIBUTES)]
    lines += [f"{n} " + " ".join(f"{v:2d}" for v in values) for n, (values, _) in table.items()]
    (folder / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
    (folder / "list_eval_partition.txt").write_text("".join(f"{n} {p}\n" for n, (_, p) in table.items()))
    (folder / "list_landmarks_align_celeba.txt").write_text("4\nlefteye_x lefteye_y\n")
    split = {"0": "train", "1": "val", "2": "test"}
    return {
        n: (sorted(a for a, v in zip(CELEB_ATTRIBUTES, values) if v == 1), split[p]) for n, (values, p) in table.items()
    }


AWA_CLASSES = ("antelope", "grizzly+bear", "killer+whale")
AWA_PREDICATES = ("black", "white", "blue")
AWA_MATRIX = ((1, 1, 0), (1, 0, 0), (1, 1, 1))


def write_awa2(folder: Path) -> dict[str, tuple[list[str], str]]:
    root = "Animals_with_Attributes2/"
    members = {
        root + "classes.txt": "".join(f"\t{i + 1}\t{c}\n" for i, c in enumerate(AWA_CLASSES)).encode(),
        root + "predicates.txt": "".join(f"{i + 1}\t{p}\n" for i, p in enumerate(AWA_PREDICATES)).encode(),
        root + "predicate-matrix-binary.txt": "".join(" ".join(map(str, row)) + "\n" for row in AWA_MATRIX).encode(),
        root + "predicate-matrix-continuous.txt": b"1.0 2.0 3.0\n" * 3,
        root + "trainclasses.txt": b"antelope\nkiller+whale\n",
        root + "testclasses.txt": b"grizzly+bear\n",
        root + "README-attributes.txt": b"",
    }
    expected = {}
    for c, cls in enumerate(AWA_CLASSES):
        for i in range(2):
            name = f"{root}JPEGImages/{cls}/{cls}_{10001 + i}.jpg"
            members[name] = image_bytes(40 + i, 30 + c, seed=3 * c + i, fmt="JPEG")
            on = sorted(p for p, v in zip(AWA_PREDICATES, AWA_MATRIX[c]) if v)
            expected[name] = (on, "test" if cls == "grizzly+bear" else "train")
    write_zip(folder / "AwA2-data.zip", members)
    return expected


def write_nih_chest_xray(folder: Path) -> dict[str, tuple[list[str], str]]:
    entries = {
        "00000001_000.png": "Cardiomegaly",
        "00000001_001.png": "Cardiomegaly|Emphysema",
        "00000002_000.png": "No Finding",
        "00000003_000.png": "Hernia|Mass|Nodule",
        "00000004_000.png": "Effusion",
    }
    train, test = list(entries)[:3], list(entries)[3:]
    members = {"README_CHESTXRAY.pdf": b"%PDF", "BBox_List_2017.csv": b"Image Index\n"}
    for i, name in enumerate(entries):
        members[f"images_{i % 2 + 1:03d}/images/{name}"] = image_bytes(32, 32 + i, seed=i, mode="L")
    members["Data_Entry_2017.csv"] = (
        "Image Index,Finding Labels,Follow-up #\n" + "".join(f"{n},{f},0\n" for n, f in entries.items())
    ).encode()
    members["train_val_list.txt"] = ("\n".join(train) + "\n").encode()
    members["test_list.txt"] = ("\n".join(test) + "\n").encode()
    write_zip(folder / "data.zip", members)
    return {n: (sorted(f.split("|")), "train" if n in train else "test") for n, f in entries.items()}


SUN_ATTRIBUTES = ("sailing/ boating", "driving", "biking")


def _mat(variables: dict) -> bytes:
    buffer = io.BytesIO()
    savemat(buffer, variables)
    return buffer.getvalue()


def _cells(values) -> np.ndarray:
    cells = np.empty((len(values), 1), dtype=object)
    cells[:, 0] = list(values)
    return cells


def write_sun_attributes(folder: Path) -> dict[str, tuple[list[str], None]]:
    images = ["a/abbey/sun_aaa.jpg", "a/abbey/sun_aab.jpg", "b/bakery/shop/sun_aac.jpg"]
    votes = np.array([[0.0, 0.33, 0.0], [0.66, 0.0, 1.0], [0.0, 0.0, 0.0]])
    write_tar(
        folder / "SUNAttributeDB.tar.gz",
        {
            "SUNAttributeDB/images.mat": _mat({"images": _cells(images)}),
            "SUNAttributeDB/attributeLabels_continuous.mat": _mat({"labels_cv": votes}),
            "SUNAttributeDB/attributes.mat": _mat({"attributes": _cells(SUN_ATTRIBUTES)}),
            "SUNAttributeDB/README.txt": b"SUN attributes",
        },
        compression="gz",
    )
    write_tar(
        folder / "SUNAttributeDB_Images.tar.gz",
        {
            **{f"images/{n}": image_bytes(26 + i, 20, seed=i, fmt="JPEG") for i, n in enumerate(images)},
            "images/z/zoo/sun_zzz.jpg": image_bytes(9, 9, fmt="JPEG"),
        },
        compression="gz",
    )
    return {n: (sorted(a for a, v in zip(SUN_ATTRIBUTES, row) if v), None) for n, row in zip(images, votes)}


__all__ = ["CELEB_ATTRIBUTES", "write_awa2", "write_celeb_a", "write_nih_chest_xray", "write_sun_attributes"]
