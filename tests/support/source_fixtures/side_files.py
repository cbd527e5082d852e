"""Fixtures for Food-101N, CVC-MUSCIMA and Olivetti faces. Each writer returns the (class name,
split) of every row the reader must make, in order."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny import encoded, source_dir, write_zip


def write_food101n(data_dir: Path) -> list[tuple[str, str | None]]:
    files = [("sushi", "a.jpg", "train"), ("apple_pie", "b.jpg", "test"), ("sushi", "c.jpg", None)]
    members = {f"Food-101N_release/images/{c}/{n}": encoded(i, "JPEG", 8, 9) for i, (c, n, _) in enumerate(files)}
    for split, part in (("train", "train"), ("test", "val")):
        members[f"Food-101N_release/meta/verified_{part}.tsv"] = (
            "class_name/key\tverification_label\n" + "".join(f"{c}/{n}\t1\n" for c, n, s in files if s == split)
        ).encode()
    members["Food-101N_release/meta/classes.txt"] = b"class_name\napple_pie\nsushi\n"
    write_zip(source_dir(data_dir, "food101n") / "Food-101N_release.zip", members)
    return [("apple_pie", "test"), ("sushi", "train")]


def write_cvc_muscima(data_dir: Path) -> list[tuple[str, str | None]]:
    folder = source_dir(data_dir, "cvc_muscima")
    files = [
        ("w-02", "p001.png", "train"),
        ("w-01", "p001.png", "test"),
        ("w-01", "p002.png", "train"),
        ("w-01", "p003.png", None),
    ]
    write_zip(
        folder / "CVCMUSCIMA_WI.zip",
        {f"CVCMUSCIMA_WI/PNG_GT_Gray/{w}/{p}": encoded(i, "PNG", 7, 9, 1) for i, (w, p, _) in enumerate(files)}
        | {"CVCMUSCIMA_WI/PNG_GT_BW/w-01/p001.png": encoded(9, "PNG", 7, 9, 1)},
    )
    lists = {
        f"Partitions_Set/set_2_Independent/set_2_{part}_01.txt": "".join(
            f"{w}/{p}\n" for w, p, s in files if s == split
        ).encode()
        for split, part in (("train", "training"), ("test", "testing"))
    }
    write_zip(
        folder / "Partitions_Set.zip", lists | {"Partitions_Set/set_1_Random/set_1_training_01.txt": b"w-01/p003.png\n"}
    )
    return [("w-01", "test"), ("w-01", "train"), ("w-02", "train")]


def write_olivetti_face(data_dir: Path) -> list[tuple[str, str | None]]:
    names = ["ORL/10_1.jpg", "ORL/2_1.jpg", "ORL/2_2.jpg", "ORL/README.txt"]
    write_zip(
        source_dir(data_dir, "olivetti_face") / "the-orl-database-for-training-and-testing.zip",
        {n: encoded(i, "JPEG", 8, 7, 1) if n.endswith(".jpg") else b"orl\n" for i, n in enumerate(names)},
    )
    return [("1", None), ("1", None), ("2", None)]  # the subject is the second field


__all__ = ["write_cvc_muscima", "write_food101n", "write_olivetti_face"]
