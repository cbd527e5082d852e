"""Fixtures for the counting sources (TRANCOS, Mall, ShanghaiTech): 20 images with counts
0..19, so the 10 equal-frequency buckets are pairs of counts. Each writer returns the (bucket
name, split) of every row the reader must make, in order."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from scipy import io as sio

from tests.support.source_fixtures.tiny import encoded, source_dir, write_tar, write_zip

COUNTS = list(range(20))
BUCKET_NAMES = ["0-0", "1-2", "3-4", "5-6", "7-8", "9-10", "11-12", "13-14", "15-16", "17+"]


def _bucket(count: int) -> str:
    return BUCKET_NAMES[min((count + 1) // 2, 9)]


def write_trancos(data_dir: Path) -> list[tuple[str, str | None]]:
    members, rows = {}, []
    splits = ["train", "val", "test", "train"]
    for i, count in enumerate(COUNTS):
        name = f"image-1-{i:06d}"
        members[f"TRANCOS_v3/images/{name}.jpg"] = encoded(i, "JPEG", 6, 8)
        members[f"TRANCOS_v3/images/{name}mask.mat"] = b"MATLAB"
        members[f"TRANCOS_v3/images/{name}.txt"] = "".join(f"{x} 5\n" for x in range(count)).encode()
        rows.append((name, splits[i % 4]))
    sets = {"train": "training", "val": "validation", "test": "test"}
    for split, file in sets.items():
        members[f"TRANCOS_v3/image_sets/{file}.txt"] = "".join(f"{n}.jpg\n" for n, s in rows if s == split).encode()
    write_tar(source_dir(data_dir, "trancos") / "TRANCOS_v3.tar.gz", members)
    return [(_bucket(c), s) for c, (_, s) in zip(COUNTS, rows, strict=True)]


def write_mall(data_dir: Path) -> list[tuple[str, str | None]]:
    """mall_gt.mat counts all 2000 frames (0..19 in turn); the zip holds frames 791..810, which
    straddle the border (800) between the paper's train part and the rest."""
    counts = (np.arange(2000) % 20).reshape(-1, 1)
    buffer = io.BytesIO()
    sio.savemat(buffer, {"count": counts})
    frames = list(range(791, 811))
    members = {f"mall_dataset/frames/seq_{f:06d}.jpg": encoded(f, "JPEG", 6, 8) for f in frames}
    members["mall_dataset/mall_gt.mat"] = buffer.getvalue()
    members["mall_dataset/perspective_roi.mat"] = b"MATLAB"
    write_zip(source_dir(data_dir, "mall") / "mall_dataset.zip", members)
    return [(_bucket((f - 1) % 20), "train" if f <= 800 else "test") for f in frames]


def write_shanghai_tech(data_dir: Path) -> list[tuple[str, str | None]]:
    members, rows = {}, []
    for i, count in enumerate(COUNTS):
        part, split = ("A", "train") if i % 2 else ("B", "test")
        folder = f"ShanghaiTech/part_{part}/{split}_data"
        info = np.empty((1, 1), dtype=object)
        info[0, 0] = {"location": np.ones((count, 2)), "number": count}
        buffer = io.BytesIO()
        sio.savemat(buffer, {"image_info": info})
        members[f"{folder}/ground-truth/GT_IMG_{i}.mat"] = buffer.getvalue()
        members[f"{folder}/images/IMG_{i}.jpg"] = encoded(i, "JPEG", 6, 8)
        rows.append((f"{folder}/images/IMG_{i}.jpg", _bucket(count), split))
    write_zip(source_dir(data_dir, "shanghai_tech") / "shanghaitech.zip", members)
    return [(b, s) for _, b, s in sorted(rows)]


__all__ = ["BUCKET_NAMES", "COUNTS", "write_mall", "write_shanghai_tech", "write_trancos"]
