"""``images:<name>``: an image folder with one sub-folder per class, as users often have.

``NEVIS_OFFLINE_DATA_DIR/<name>/`` holds either class folders directly
(``cat/001.jpg``, ``dog/002.png`` …; split by the stream's rule) or ``train/`` and ``test/``
folders that each hold the same class folders (an official split). Classes are the folder
names in sorted order. Each image keeps its own extent (:class:`ImageRows`, read from the
file headers; pixels are decoded when the dataset is stored), so the evaluation square and the
stored original come from the image as it is, never from a squashed copy. Grey images stay
grey until the shared RGB step.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
from PIL import Image, UnidentifiedImageError

from services.core.errors import DatasetFormatError, DatasetNotFoundError
from workers.stream.adapters.base import (
    AdapterContext,
    GivenSplits,
    MissingDataset,
    RawDataset,
    dataset_folder,
    file_checksum,
)
from workers.stream.image_rows import ImageRows, pil_pixels

T = TypeVar("T")

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".pgm", ".ppm", ".pbm", ".tif", ".tiff", ".webp"})
HOW_TO_PROVIDE = (
    "create NEVIS_OFFLINE_DATA_DIR/<name>/ with one sub-folder of images per class "
    "(or train/ and test/ folders, each with the same class sub-folders)"
)


class ImageFolderAdapter:
    """Class-per-sub-folder image collections."""

    source = "images"

    def find(self, name: str, ctx: AdapterContext) -> MissingDataset | None:
        folder = dataset_folder(self.source, name, ctx)
        if folder is not None and _class_folders(folder):
            return None
        return MissingDataset(f"images:{name}", ctx.describe_offline_dir(), HOW_TO_PROVIDE)

    def load(self, name: str, ctx: AdapterContext) -> RawDataset:
        missing = self.find(name, ctx)
        if missing is not None:
            raise DatasetNotFoundError(missing.message(name))
        folder = dataset_folder(self.source, name, ctx)
        official = (folder / "train").is_dir() and (folder / "test").is_dir()
        parts = [folder / "train", folder / "test"] if official else [folder]
        class_names = tuple(sorted({c.name for part in parts for c in _class_folders(part)}))
        files: list[Path] = []
        labels: list[int] = []
        part_sizes = []
        for part in parts:
            before = len(files)
            for label, class_name in enumerate(class_names):
                class_dir = part / class_name
                found = _image_files(class_dir)
                files += found
                labels += [label] * len(found)
            part_sizes.append(len(files) - before)
        if not files:
            raise DatasetFormatError(f"Dataset 'images:{name}': no image files under {folder}.")
        images = _image_rows(files, f"images:{name}")
        given = None
        if official:
            n_train = part_sizes[0]
            given = GivenSplits(
                train=np.arange(n_train, dtype=np.int64),
                test=np.arange(n_train, len(files), dtype=np.int64),
                official=True,
            )
        return RawDataset(
            key=f"images:{name}",
            images=images,
            labels=np.asarray(labels, dtype=np.int64),
            class_names=class_names,
            kind="single",
            source_checksum=file_checksum(*files),
            given_splits=given,
            metadata={"source": f"image folder {folder.name}/", "num_files": len(files)},
        )


def _class_folders(folder: Path) -> list[Path]:
    """Class sub-folders of ``folder``, or of its train/ and test/ when both exist."""
    if (folder / "train").is_dir() and (folder / "test").is_dir():
        return _class_folders(folder / "train") + _class_folders(folder / "test")
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _image_files(folder: Path) -> list[Path]:
    """Image files of one class folder, sorted (other files are ignored)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def _image_rows(files: list[Path], key: str) -> ImageRows:
    """Every file as one row of its own extent (headers read now, pixels when stored)."""
    shapes = np.empty((len(files), 2), dtype=np.int64)
    for i, path in enumerate(files):
        shapes[i] = _open(path, lambda pil: (pil.height, pil.width))
    return ImageRows(shapes, lambda i: _open(files[i], pil_pixels), key)


def _open(path: Path, use: Callable[[Image.Image], T]) -> T:
    try:
        with Image.open(path) as pil:
            return use(pil)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise DatasetFormatError(f"Cannot read image {path}: {exc}") from None


__all__ = ["HOW_TO_PROVIDE", "IMAGE_SUFFIXES", "ImageFolderAdapter"]
