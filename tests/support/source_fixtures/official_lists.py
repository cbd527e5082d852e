"""Fixtures for LFW-a (zip), DTD (fold lists) and ALOI (subset tars). Each writer returns the
(class name, split) of every row the reader must make, in order (split None: no official one)."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny import encoded, source_dir, write_tar, write_zip


def write_lfwa(data_dir: Path) -> list[tuple[str, str | None]]:
    people = {"Zoe_Z": 5, "Al_A": 6, "Bo_B": 2}
    members = {
        f"lfw2/{p}/{p}_{n:04d}.jpg": encoded(10 * i + n, "JPEG", 8, 8)
        for i, (p, count) in enumerate(people.items())
        for n in range(1, count + 1)
    }
    members["lfw2/README.txt"] = b"aligned\n"
    write_zip(source_dir(data_dir, "lfwa") / "lfwa.zip", members)
    return [("Zoe_Z", None)] * 5 + [("Al_A", None)] * 6  # the zip's stored order, not by name


def write_dtd(data_dir: Path) -> list[tuple[str, str | None]]:
    images = [
        ("banded", "banded_0001.jpg", "train"),
        ("zigzagged", "zigzagged_0002.jpg", "val"),
        ("banded", "banded_0003.jpg", "test"),
        ("banded", "banded_0004.jpg", None),
        ("zigzagged", "zigzagged_0005.jpg", "train"),
    ]
    members = {f"dtd/images/{c}/{n}": encoded(i, "JPEG", 9, 10) for i, (c, n, _) in enumerate(images)}
    for part in ("train", "val", "test"):
        members[f"dtd/labels/{part}1.txt"] = "".join(f"{c}/{n}\n" for c, n, s in images if s == part).encode()
        members[f"dtd/labels/{part}2.txt"] = b"banded/banded_0004.jpg\n"
    members["dtd/imdb/imdb.mat"] = b"MATLAB"
    write_tar(source_dir(data_dir, "dtd") / "dtd-r1.0.1.tar.gz", members)
    return [(c, s) for c, _, s in images if s is not None]


def write_aloi(data_dir: Path) -> list[tuple[str, str | None]]:
    folder = source_dir(data_dir, "aloi")
    subsets = {
        "ill": [(3, "3_l1c1.png")],
        "col": [(1, "1_i110.png"), (1000, "1000_i120.png")],
        "view": [(2, "2_r0.png")],
        "stereo": [(1, "1_c.png")],
    }
    for s, (subset, files) in enumerate(subsets.items()):
        members = {f"png4/{obj}/{name}": encoded(10 * s + i, "PNG", 6, 8) for i, (obj, name) in enumerate(files)}
        write_tar(folder / f"aloi_red4_{subset}.tar", members, mode="w")
    return [("1", "train"), ("1000", "train"), ("2", "train"), ("3", "test")]


__all__ = ["write_aloi", "write_dtd", "write_lfwa"]
