"""A tiny ILSVRC2012: a train tar of per-synset tars and a flat validation tar.

The validation images are the first few names of the real tar, so their labels are the
first few of TFDS's list, and the train tar has a class for each of those synsets.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, tar_bytes, write_tar
from workers.ingest.readers.imagenet import validation_synsets

VAL_IMAGES = 4


def write_imagenet2012(folder: Path) -> dict[str, tuple[str, str]]:
    val_synsets = validation_synsets()[:VAL_IMAGES]
    classes = sorted({*val_synsets, "n01440764"})
    expected: dict[str, tuple[str, str]] = {}
    outer: dict[str, bytes] = {}
    seed = 0
    for synset in reversed(classes):  # archive order need not be sorted
        inner = {}
        for i in range(2):  # noqa: B007
            seed += 1
            name = f"{synset}_{seed}.JPEG"
            inner[name] = image_bytes(40 + seed, 30, seed=seed, fmt="JPEG")
            expected[name] = (synset, "train")
        outer[f"{synset}.tar"] = tar_bytes(inner)
    write_tar(folder / "ILSVRC2012_img_train.tar", outer)
    val = {}
    for i in reversed(range(VAL_IMAGES)):  # labels follow the sorted names, not tar order
        name = f"ILSVRC2012_val_{i + 1:08d}.JPEG"
        val[name] = image_bytes(20 + i, 30, seed=100 + i, fmt="JPEG")
        expected[name] = (val_synsets[i], "test")
    write_tar(folder / "ILSVRC2012_img_val.tar", val)
    return expected


__all__ = ["write_imagenet2012"]
