"""Tiny Office-Caltech-10 and PACS sources in their exact layouts."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar
from workers.stream.sources.catalogue import load_catalogue

OFFICE = {  # member -> (class, domain); the last two are classes outside the ten
    "amazon/images/back_pack/frame_0001.jpg": ("backpack", "amazon"),
    "amazon/images/bike/frame_0001.jpg": ("touring-bike", "amazon"),
    "amazon/images/mug/frame_0002.jpg": ("coffee-mug", "amazon"),
    "dslr/images/projector/frame_0001.jpg": ("video-projector", "dslr"),
    "webcam/images/laptop_computer/frame_0003.jpg": ("laptop-101", "webcam"),
    "webcam/images/keyboard/frame_0001.jpg": ("computer-keyboard", "webcam"),
    "amazon/images/stapler/frame_0001.jpg": None,
    "dslr/images/ruler/frame_0001.jpg": None,
}
CALTECH = {
    "256_ObjectCategories/003.backpack/003_0001.jpg": ("backpack", "caltech"),
    "256_ObjectCategories/224.touring-bike/224_0001.jpg": ("touring-bike", "caltech"),
    "256_ObjectCategories/041.coffee-mug/041_0007.jpg": ("coffee-mug", "caltech"),
    "256_ObjectCategories/045.computer-keyboard/045_0001.jpg": ("computer-keyboard", "caltech"),
    "256_ObjectCategories/001.ak47/001_0001.jpg": None,
    "256_ObjectCategories/257.clutter/257_0001.jpg": None,
}


def write_office_caltech_10(folder: Path) -> dict[str, tuple[str, None, str]]:
    expected = {}
    for path, archive, compression in (
        (folder / "domain_adaptation_images.tar.gz", OFFICE, "gz"),
        (folder / "256_ObjectCategories.tar", CALTECH, ""),
    ):
        members = {name: image_bytes(20 + i, 16 + i, seed=i, fmt="JPEG") for i, name in enumerate(archive)}
        write_tar(path, members, compression=compression)
        expected.update({n: (v[0], None, v[1]) for n, v in archive.items() if v is not None})
    return expected


PACS_SIZES = {"photo": 3, "art_painting": 4, "cartoon": 5, "sketch": 6}  # images per domain
PACS_CLASSES = ("dog", "elephant", "giraffe", "guitar", "horse", "house", "person")


def _h5(path: Path, images: list[np.ndarray], labels: list[int]) -> None:
    with h5py.File(path, "w") as handle:
        handle.create_dataset("images", data=np.stack(images).astype(np.uint8))
        handle.create_dataset("labels", data=np.array(labels, dtype=np.float64))


def pacs_images() -> dict[str, tuple[list[np.ndarray], list[int]]]:
    """Domain -> (BGR images, labels 1..7) of the fixture, the same on every call."""
    rng = np.random.default_rng(7)
    out = {}
    for d, (domain, size) in enumerate(PACS_SIZES.items()):
        bgr = [rng.integers(0, 256, size=(9, 8, 3), dtype=np.uint8) for _ in range(size)]
        out[domain] = (bgr, [(i + d) % 7 + 1 for i in range(size)])
    return out


def write_pacs(folder: Path) -> dict[str, tuple[str, None, str]]:
    """Twelve HDF5 files under the catalogue's ``gdrive-<id>`` names, three per domain (train,
    val, and test = the whole domain); sketch's test file holds one image twice."""
    names = [f.name for f in load_catalogue().find("pacs").files]
    order = [
        ("cartoon", "test"),
        ("photo", "train"),
        ("sketch", "val"),
        ("art_painting", "test"),
        ("sketch", "train"),
        ("photo", "val"),
        ("cartoon", "train"),
        ("art_painting", "val"),
        ("sketch", "test"),
        ("photo", "test"),
        ("art_painting", "train"),
        ("cartoon", "val"),
    ]
    expected = {}
    domain_images = pacs_images()
    for domain, (_, labels) in domain_images.items():
        for i, label in enumerate(labels):
            expected[f"{domain}/{i}"] = (PACS_CLASSES[label - 1], None, domain)
    for name, (domain, part) in zip(names, order):
        bgr, labels = domain_images[domain]
        cut = len(bgr) - 1
        if part == "train":
            _h5(folder / name, bgr[:cut], labels[:cut])
        elif part == "val":
            _h5(folder / name, bgr[cut:], labels[cut:])
        elif domain == "sketch":
            _h5(folder / name, [*bgr, bgr[0]], [*labels, labels[0]])
        else:
            _h5(folder / name, bgr, labels)
    return expected


__all__ = ["pacs_images", "write_office_caltech_10", "write_pacs"]
