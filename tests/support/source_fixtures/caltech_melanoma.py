"""Tiny Caltech categories and ISIC 2017 melanoma sources in their exact layouts."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, tar_bytes, write_tar, write_zip

CALTECH_ZIPS = {  # zip -> (inner tar path, class, images)
    "Cars_2001.zip": ("Cars_2001/cars_brad.tar", "car", 3),
    "Cars_1999.zip": ("Cars_1999/cars_markus.tar", "car", 2),
    "motorbikes_side.zip": ("motorbikes_side/motorbikes_side.tar", "motorcycle", 4),
}


def write_caltech_categories(folder: Path) -> dict[str, tuple[str, None]]:
    """Zips holding a tar each (images, a README and a .mat the reference skips); faces.tar."""
    expected: dict[str, tuple[str, None]] = {}
    seed = 0
    for zip_name, (tar_path, cls, count) in CALTECH_ZIPS.items():
        stem = tar_path.split("/")[-1][:-4]
        members = {"README": b"Caltech images", f"{stem}/ImageData.mat": b"MATLAB 5.0"}
        for i in range(count):
            seed += 1
            name = f"{stem}/image_{i + 1:04d}.jpg"
            members[name] = image_bytes(24 + seed, 18, seed=seed, fmt="JPEG")
            expected[f"{zip_name}:{name}"] = (cls, None)
        write_zip(folder / zip_name, {f"{tar_path.split('/')[0]}/": b"", tar_path: tar_bytes(members)})
    write_tar(folder / "faces.tar", {"faces/image_0001.jpg": image_bytes(9, 9, fmt="JPEG")})
    return expected


MELANOMA = {  # part -> (id, melanoma, seborrheic keratosis)
    "Training": [
        ("ISIC_0000000", 0.0, 0.0),
        ("ISIC_0000001", 1.0, 0.0),
        ("ISIC_0000002", 0.0, 1.0),
        ("ISIC_0000003", 0.0, 0.0),
        ("ISIC_0000004", 1.0, 0.0),
    ],
    "Validation": [("ISIC_0001769", 0.0, 1.0), ("ISIC_0001770", 0.0, 0.0)],
    "Test_v2": [("ISIC_0012086", 1.0, 0.0), ("ISIC_0012087", 0.0, 0.0), ("ISIC_0012088", 0.0, 1.0)],
}
_SPLIT = {"Training": "train", "Validation": "val", "Test_v2": "test"}
_CLASS = {(1.0, 0.0): "melanoma", (0.0, 1.0): "seborrheic keratosis", (0.0, 0.0): "benign nevi"}


def write_melanoma(folder: Path) -> dict[str, tuple[str, str]]:
    """Three zips (JPEGs plus superpixel PNGs and a metadata CSV) and three ground truths."""
    expected: dict[str, tuple[str, str]] = {}
    for n, (part, rows) in enumerate(MELANOMA.items()):
        root = f"ISIC-2017_{part}_Data"
        members = {f"{root}/": b"", f"{root}/{root}_metadata.csv": b"image_id,age\n"}
        lines = ["image_id,melanoma,seborrheic_keratosis"]
        for i, (image_id, mel, sk) in enumerate(rows):
            members[f"{root}/{image_id}.jpg"] = image_bytes(50 + i, 40 + n, seed=i + 10 * n, fmt="JPEG")
            members[f"{root}/{image_id}_superpixels.png"] = image_bytes(5, 4, seed=i)
            lines.append(f"{image_id},{mel},{sk}")
            expected[image_id] = (_CLASS[(mel, sk)], _SPLIT[part])
        write_zip(folder / f"{root}.zip", members)
        (folder / f"ISIC-2017_{part}_Part3_GroundTruth.csv").write_text("\n".join(lines) + "\n")
    return expected


__all__ = ["write_caltech_categories", "write_melanoma"]
