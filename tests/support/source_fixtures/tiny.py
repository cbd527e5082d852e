"""Shared bricks for the source fixture writers: tiny images and archives in exact layouts.

A fixture writer (one per reader family, beside this module) writes a source's files into
``<data_dir>/sources/<key>/`` under the catalogue's file names, so the real reader converts
them exactly as it would the downloaded ones.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from PIL import Image


def source_dir(data_dir: Path, key: str) -> Path:
    """``<data_dir>/sources/<key>``, created."""
    folder = Path(data_dir) / "sources" / key
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def pixels(seed: int, height: int = 6, width: int = 5, channels: int = 3) -> np.ndarray:
    """Distinct uint8 pixels per seed ([h, w] for one channel, else [h, w, 3])."""
    rng = np.random.default_rng(seed)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


def encoded(seed: int, fmt: str = "PNG", height: int = 6, width: int = 5, channels: int = 3) -> bytes:
    """A tiny image of ``fmt`` (PNG, JPEG, GIF, PPM, ...) whose pixels depend on ``seed``."""
    buffer = io.BytesIO()
    Image.fromarray(pixels(seed, height, width, channels)).save(buffer, format=fmt)
    return buffer.getvalue()


def write_zip(path: Path, members: Mapping[str, bytes]) -> Path:
    """A zip of ``members`` (name -> bytes), in the given order."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def write_tar(path: Path, members: Mapping[str, bytes], mode: str = "w:gz") -> Path:
    """A tar (``mode``: ``w``, ``w:gz``, ``w:bz2``) of ``members``, in the given order."""
    with tarfile.open(path, mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


__all__ = ["encoded", "pixels", "source_dir", "write_tar", "write_zip"]
