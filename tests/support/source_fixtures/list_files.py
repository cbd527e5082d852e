"""Tiny sources whose labels or splits are list files, in their exact layouts."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar
from workers.stream.readers.class_name_lists import class_names


def write_oxford_iiit_pet(folder: Path) -> dict[str, tuple[str, str]]:
    """``images.tar.gz`` is an uncompressed tar, as the real one; annotations has lists,
    trimaps and xmls."""
    names = class_names("oxford_iiit_pet")
    trainval = [("Abyssinian_1", 1, 1), ("Abyssinian_2", 1, 1), ("beagle_10", 5, 2)]
    test = [("Abyssinian_3", 1, 1), ("beagle_11", 5, 2)]
    images = {f"images/{n}.jpg": image_bytes(33 + i, 21, seed=i, fmt="JPEG")
              for i, (n, _, _) in enumerate([*trainval, *test])}
    images["images/Abyssinian_1.mat"] = b"MATLAB"
    write_tar(folder / "images.tar.gz", images)
    lists = {part: "".join(f"{n} {c} {s} {1}\n" for n, c, s in rows)
             for part, rows in (("trainval", trainval), ("test", test))}
    write_tar(folder / "annotations.tar.gz", {
        "annotations/README": b"readme", "annotations/list.txt": b"#x\n",
        "annotations/trainval.txt": lists["trainval"].encode(),
        "annotations/test.txt": lists["test"].encode(),
        "annotations/trimaps/Abyssinian_1.png": image_bytes(4, 4)}, compression="gz")
    return {**{n: (names[c - 1], "train") for n, c, _ in trainval},
            **{n: (names[c - 1], "test") for n, c, _ in test}}


__all__ = ["write_oxford_iiit_pet"]
