"""Small builders the fixture writers share: images made with Pillow, tars and zips written
from ``{member path: bytes}``, so each writer states only its source's layout."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from PIL import Image


def image_bytes(width: int, height: int, *, seed: int = 0, fmt: str = "PNG", mode: str = "RGB") -> bytes:
    """A noise image of the given extent, encoded (each seed gives different pixels)."""
    rng = np.random.default_rng(seed)
    shape = (height, width) if mode == "L" else (height, width, 3)
    pixels = rng.integers(0, 256, size=shape, dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode).save(buffer, format=fmt)
    return buffer.getvalue()


def tar_bytes(members: Mapping[str, bytes], *, compression: str = "") -> bytes:
    """A tar (``compression``: ``""``, ``"gz"``) of the members, in the given order."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=f"w:{compression}" if compression else "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write_tar(path: Path, members: Mapping[str, bytes], *, compression: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tar_bytes(members, compression=compression))
    return path


def write_zip(path: Path, members: Mapping[str, bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


__all__ = ["image_bytes", "tar_bytes", "write_tar", "write_zip"]
