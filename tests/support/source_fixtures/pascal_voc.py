"""Tiny Pascal VOC 2005 / 2006 / 2007 / 2012 archives in the sources' exact layouts.

Each writer fills a source folder (``<data>/sources/<key>``) with the catalogue's file names
and returns what a reader must make of it: one ``(labels, split)`` per image, by image name.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar

VOC2005_FOLDERS = {  # folder -> class, as in the reference's tables
    "VOC2005_1/PNGImages/Caltech_cars": "car",
    "VOC2005_1/PNGImages/ETHZ_sideviews-cars": "car",
    "VOC2005_1/PNGImages/TUGraz_cars": "car",
    "VOC2005_1/PNGImages/TUGraz_bike": "bike",
    "VOC2005_1/PNGImages/Caltech_motorbikes_side": "motorbike",
    "VOC2005_1/PNGImages/TUGraz_person": "person",
    "VOC2005_2/PNGImages/car": "car",
    "VOC2005_2/PNGImages/voiture": "car",
    "VOC2005_2/PNGImages/bicycle": "bike",
    "VOC2005_2/PNGImages/bike": "bike",
    "VOC2005_2/PNGImages/velo": "bike",
    "VOC2005_2/PNGImages/motocyclette": "motorbike",
    "VOC2005_2/PNGImages/motorbike": "motorbike",
    "VOC2005_2/PNGImages/motorcycle": "motorbike",
    "VOC2005_2/PNGImages/INRIA_graz-person-test": "person",
    "VOC2005_2/PNGImages/INRIA_inria-person-test": "person",
    "VOC2005_2/PNGImages/pedestrian": "person",
    "VOC2005_2/PNGImages/pieton": "person",
}


def write_pascal_voc2005(folder: Path) -> dict[str, tuple[str, str]]:
    """Two tar.gz; one image per folder (two in TUGraz_cars), plus an annotation and a folder
    the reference does not read (``VOC2005_1/PNGImages/UIUC_cars``-like extras)."""
    expected: dict[str, tuple[str, str]] = {}
    parts: dict[str, dict[str, bytes]] = {"VOC2005_1": {}, "VOC2005_2": {}}
    seed = 0
    for path, cls in VOC2005_FOLDERS.items():
        root = path.split("/")[0]
        for i in range(2 if path.endswith("TUGraz_cars") else 1):
            seed += 1
            name = f"{path}/img_{seed:03d}.png"
            parts[root][name] = image_bytes(30 + seed, 20 + i, seed=seed)
            expected[name] = (cls, "train" if root == "VOC2005_1" else "test")
        parts[root][f"{root}/Annotations/{path.split('/')[-1]}/img_{seed:03d}.txt"] = b"box"
    parts["VOC2005_1"]["VOC2005_1/PNGImages/UIUC_cars/extra.png"] = image_bytes(10, 10, seed=99)
    write_tar(folder / "voc2005_1.tar.gz", parts["VOC2005_1"], compression="gz")
    write_tar(folder / "voc2005_2.tar.gz", parts["VOC2005_2"], compression="gz")
    return expected


VOC2006_CLASSES = ("bicycle", "bus", "car")


def write_pascal_voc2006(folder: Path) -> dict[str, tuple[str, str]]:
    """Two tars of ``VOCdevkit/VOC2006``: PNG images, per-class lists (``1`` / ``-1`` / ``0``).
    Image 000003 is positive for bus and car: the later list (car) wins."""
    expected: dict[str, tuple[str, str]] = {}
    positives = {
        "trainval": {"000001": "bicycle", "000002": "bus", "000003": "car", "000005": "car"},
        "test": {"000010": "bicycle", "000011": "bus", "000012": "car"},
    }
    for part, labels in positives.items():
        members: dict[str, bytes] = {}
        ids = [*labels, "000099"]  # 000099: negative everywhere, so not read
        for n, image_id in enumerate(ids):
            members[f"VOCdevkit/VOC2006/PNGImages/{image_id}.png"] = image_bytes(40 + n, 25 + n, seed=int(image_id))
        for cls in VOC2006_CLASSES:
            lines = []
            for image_id in ids:
                flag = " 1" if labels.get(image_id) == cls else "-1"
                if part == "trainval" and image_id == "000003" and cls == "bus":
                    flag = " 1"
                lines.append(f"{image_id} {flag}")
            members[f"VOCdevkit/VOC2006/ImageSets/{cls}_{part}.txt"] = ("\n".join(lines) + "\n").encode()
        write_tar(folder / f"voc2006_{part}.tar", members)
        for image_id, cls in labels.items():
            expected[f"{image_id}.png"] = (cls, "train" if part == "trainval" else "test")
    return expected


def _annotation(names: list[str], difficult: int | None = None) -> bytes:
    objects = "".join(
        f"<object><name>{n}</name><pose>Left</pose><truncated>0</truncated>"
        f"<difficult>{1 if i == difficult else 0}</difficult><bndbox><xmin>1</xmin><ymin>1</ymin>"
        f"<xmax>5</xmax><ymax>5</ymax></bndbox></object>"
        for i, n in enumerate(names)
    )
    return (
        f"<annotation><folder>VOC</folder><size><width>40</width><height>30</height>"
        f"<depth>3</depth></size>{objects}</annotation>"
    ).encode()


def _voc_tar(
    path: Path,
    year: str,
    sets: dict[str, dict[str, list[str]]],
    *,
    annotate: bool = True,
    extra_images: tuple[str, ...] = (),
) -> None:
    base = f"VOCdevkit/VOC{year}"
    members: dict[str, bytes] = {}
    for ids in sets.values():  # images first, as in the real tars
        for image_id in ids:
            members[f"{base}/JPEGImages/{image_id}.jpg"] = image_bytes(
                30 + int(image_id[-2:]), 20, seed=int(image_id[-3:]), fmt="JPEG"
            )
    for image_id in extra_images:
        members[f"{base}/JPEGImages/{image_id}.jpg"] = image_bytes(8, 8, fmt="JPEG")
    if annotate:
        for ids in sets.values():
            for image_id, names in ids.items():
                members[f"{base}/Annotations/{image_id}.xml"] = _annotation(names, difficult=1)
    for name, ids in sets.items():
        members[f"{base}/ImageSets/Main/{name}.txt"] = ("\n".join(ids) + "\n").encode()
    write_tar(path, members)


VOC_SETS = {
    "train": {"000005": ["chair", "chair", "person"], "000007": ["car"], "000009": ["horse"]},
    "val": {"000012": ["car", "dog"], "000016": ["bicycle"]},
    "test": {"000001": ["dog", "person"], "000002": ["train"]},
}


def write_voc_2007(folder: Path) -> dict[str, tuple[list[str], str]]:
    """Trainval and test tars with JPEGs, annotations and Main lists (test annotated)."""
    trainval = {k: VOC_SETS[k] for k in ("train", "val")}
    _voc_tar(folder / "VOCtrainval_06-Nov-2007.tar", "2007", trainval, extra_images=("000999",))
    _voc_tar(folder / "VOCtest_06-Nov-2007.tar", "2007", {"test": VOC_SETS["test"]})
    return {f"{i}.jpg": (sorted(set(n)), split) for split, ids in VOC_SETS.items() for i, n in ids.items()}


def write_voc_2012(folder: Path) -> dict[str, tuple[list[str], str]]:
    """Trainval tar as 2007's; the test tar has images and a list but no annotations."""
    trainval = {k: {f"2008_{i}": n for i, n in VOC_SETS[k].items()} for k in ("train", "val")}
    _voc_tar(folder / "VOCtrainval_11-May-2012.tar", "2012", trainval)
    test = {"test": {f"2008_{i}": [] for i in VOC_SETS["test"]}}
    _voc_tar(folder / "VOC2012test.tar", "2012", test, annotate=False)
    return {f"{i}.jpg": (sorted(set(n)), split) for split, ids in trainval.items() for i, n in ids.items()}


__all__ = ["write_pascal_voc2005", "write_pascal_voc2006", "write_voc_2007", "write_voc_2012"]
