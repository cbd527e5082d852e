"""Fixtures for the Magellan volcanoes, butterflies, PPMI and MIT indoor scenes layouts. Each
writer returns the (class name, split) of every row the reader must make, in order."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.support.source_fixtures.tiny import encoded, source_dir, write_tar, write_zip


def write_magellan_venus_volcanoes(data_dir: Path) -> list[tuple[str, str | None]]:
    """Three 1024x1024 raw images (their ground truths listed after them, as in the tar)."""
    members = {}
    for n in (1, 2, 3):
        members[f"package/Images/img{n}.sdt"] = np.full(1024 * 1024, n, np.uint8).tobytes()
        members[f"package/Images/img{n}.spr"] = b"header\n"
    members["package/Chips/exp_A1_Ctrn.sdt"] = bytes(15 * 15)
    members["package/GroundTruths/img1.lxyr"] = b"3 10 20 5\n1 30 40 6\n"
    members["package/GroundTruths/img2.lxyr"] = b"2 10 20 5\n4 1 1 1\n"
    members["package/GroundTruths/img3.lxyr"] = b""
    members["package/README"] = b"volcanoes\n"
    write_tar(source_dir(data_dir, "magellan_venus_volcanoes") / "volcanoes.tar.gz", members)
    return [("pos", None), ("neg", None), ("neg", None)]


def write_butterflies(data_dir: Path) -> list[tuple[str, str | None]]:
    files = [
        ("admiral", "admiral014.jpg", "test"),
        ("admiral", "admiral015.jpg", "train"),
        ("black_swallowtail", "black_swallowtail002.jpg", "test"),
        ("zebra", "zebra001.jpg", "train"),
    ]
    members = {f"{c}/{n}": encoded(i, "JPEG", 10, 12) for i, (c, n, _) in enumerate(files)}
    write_zip(source_dir(data_dir, "butterflies") / "butterflies.zip", members)
    return [(c, s) for c, _, s in sorted(files, key=lambda f: f"{f[0]}/{f[1]}")]


def write_ppmi(data_dir: Path) -> list[tuple[str, str | None]]:
    files = [
        ("play_instrument", "violin", "train"),
        ("with_instrument", "violin", "test"),
        ("play_instrument", "flute", "test"),
        ("play_instrument", "violin", "test"),
    ]
    members = {f"norm_image/{k}/{i}/{s}/{n}.jpg": encoded(n, "JPEG", 8, 8) for n, (k, i, s) in enumerate(files)}
    members["norm_image/README"] = b"ppmi\n"
    write_zip(source_dir(data_dir, "ppmi") / "norm_ppmi_12class.zip", members)
    return [(f"{k}/{i}", s) for name, (k, i, s) in sorted(zip(members, files, strict=False))]


def write_mit_scenes(data_dir: Path) -> list[tuple[str, str | None]]:
    files = [
        ("bar", "b1.jpg", "train"),
        ("airport_inside", "a1.jpg", "test"),
        ("bar", "b2.jpg", "test"),
        ("bar", "b3.jpg", None),
    ]
    members = {f"indoorCVPR_09/Images/{c}/{n}": encoded(i, "JPEG", 9, 8) for i, (c, n, _) in enumerate(files)}
    members["TrainImages.txt"] = "".join(f"{c}/{n}\n" for c, n, s in files if s == "train").encode()
    members["TestImages.txt"] = "".join(f"{c}/{n}\n" for c, n, s in files if s == "test").encode()
    write_zip(source_dir(data_dir, "mit_scenes") / "indoor-scenes-cvpr-2019.zip", members)
    return [(c, s) for c, n, s in sorted(files, key=lambda f: f"{f[0]}/{f[1]}") if s is not None]


__all__ = ["write_butterflies", "write_magellan_venus_volcanoes", "write_mit_scenes", "write_ppmi"]
