"""Fixtures for the one-folder-per-class sources: sketch, scenes15, caltech256, ig02, uiuc_cars.

Each returns the (class name, member) pairs the reader should turn into rows, in row order;
``more`` adds that many further images to every class (for splits that need a few per class).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny import encoded, source_dir, write_tar, write_zip


def write_sketch(data_dir: Path, more: int = 0) -> list[tuple[str, str]]:
    members = {"png/filelist.txt": b"airplane/1.png\n"}
    files = [("airplane", 1), ("airplane", 2), ("crane (machine)", 3), ("zebra", 4)]
    files += [
        (cls, 100 + 10 * k + i) for k, cls in enumerate(("airplane", "crane (machine)", "zebra")) for i in range(more)
    ]
    for i, (cls, n) in enumerate(files):
        members[f"png/{cls}/{n}.png"] = encoded(i, "PNG", 11, 9, 1)
    write_zip(source_dir(data_dir, "sketch") / "sketches_png.zip", members)
    return sorted((name.split("/")[1], name) for name in members if name.endswith(".png"))


def write_scenes15(data_dir: Path, more: int = 0) -> list[tuple[str, str]]:
    classes = ["kitchen", "MITcoast", "kitchen", "CALsuburb"] + ["kitchen", "MITcoast", "CALsuburb"] * more
    members = {f"{cls}/image_{n:04d}.jpg": encoded(n, "JPEG", 12, 16, 1) for n, cls in enumerate(classes, 1)}
    members["MITcoast/Thumbs.db"] = b"\0"
    write_zip(source_dir(data_dir, "scenes15") / "scene_categories.zip", members)
    return sorted((name.split("/")[0], name) for name in members if name.endswith(".jpg"))


def write_caltech256(data_dir: Path, more: int = 0) -> list[tuple[str, str]]:
    """A plain tar; folders 001..003 and 257 would be a gap, so the fixture numbers 1..3."""
    files = [
        ("002.american-flag", "002_0001.jpg"),
        ("001.ak47", "001_0001.jpg"),
        ("003.clutter", "003_0001.jpg"),
        ("001.ak47", "001_0002.jpg"),
    ]
    files += [
        (f"{k:03d}.{name}", f"{k:03d}_{100 + i:04d}.jpg")
        for k, name in ((1, "ak47"), (2, "american-flag"), (3, "clutter"))
        for i in range(more)
    ]
    members = {
        f"256_ObjectCategories/{folder}/{name}": encoded(i, "JPEG", 10, 14) for i, (folder, name) in enumerate(files)
    }
    write_tar(source_dir(data_dir, "caltech256") / "256_ObjectCategories.tar", members, mode="w")
    return [(folder.split(".", 1)[1], f"256_ObjectCategories/{folder}/{name}") for folder, name in files]


def write_ig02(data_dir: Path, more: int = 0) -> list[tuple[str, str]]:
    out = []
    for c, cls in enumerate(("bikes", "cars", "people")):
        members = {f"{cls}_train.txt": f"{cls}_001\n".encode(), f"{cls}_test.txt": f"{cls}_002\n".encode()}
        for n in range(1, 3 + more):
            members[f"{cls}/{cls}_{n:03d}.image.png"] = encoded(100 * c + n, "PNG", 8, 12)
            members[f"{cls}/{cls}_{n:03d}.mask.0.png"] = encoded(50 + n, "PNG", 8, 12, 1)
            out.append((cls, f"{cls}/{cls}_{n:03d}.image.png"))
        write_zip(source_dir(data_dir, "ig02") / f"ig02-v1.0-{cls}.zip", members)
    return out


def write_uiuc_cars(data_dir: Path, more: int = 0) -> list[tuple[str, str]]:
    train = ["CarData/TrainImages/neg-0.pgm", "CarData/TrainImages/pos-0.pgm", "CarData/TrainImages/pos-1.pgm"]
    train += [f"CarData/TrainImages/{kind}-{10 + i}.pgm" for i in range(more) for kind in ("neg", "pos")]
    names = [*train, "CarData/TestImages/test-0.pgm", "CarData/TestImages_Scale/test-0.pgm"]
    members = {name: encoded(i, "PPM", 10, 25, 1) for i, name in enumerate(names)}
    members["CarData/trueLocations.txt"] = b"0: (48,26)\n"
    write_tar(source_dir(data_dir, "uiuc_cars") / "uiuc.tar.gz", members)
    return [(name.split("/")[-1].split("-")[0], name) for name in train]


__all__ = ["write_caltech256", "write_ig02", "write_scenes15", "write_sketch", "write_uiuc_cars"]
