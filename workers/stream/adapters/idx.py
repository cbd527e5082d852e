"""``idx:<name>``: MNIST-style idx files a user brings, in ``NEVIS_OFFLINE_DATA_DIR/<name>/``.

The folder holds the four files of the MNIST distribution format, gzipped or not, e.g.
``train-images-idx3-ubyte.gz``, ``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz``
and ``t10k-labels-idx1-ubyte.gz`` (EMNIST's ``emnist-balanced-train-images-idx3-ubyte`` and
Fashion-MNIST's names match too), plus an optional ``classes.txt``. The train / test cut is
the source's official split. Nothing is downloaded.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from services.core.errors import DatasetFormatError, DatasetNotFoundError
from workers.stream.adapters.base import (
    AdapterContext,
    GivenSplits,
    MissingDataset,
    RawDataset,
    dataset_folder,
    file_checksum,
    read_class_names,
)

# idx type byte → big-endian numpy dtype
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_PARTS = {
    "train_images": ("train-images", "idx3"),
    "train_labels": ("train-labels", "idx1"),
    "test_images": ("t10k-images", "idx3"),
    "test_labels": ("t10k-labels", "idx1"),
}
HOW_TO_PROVIDE = (
    "create the folder NEVIS_OFFLINE_DATA_DIR/<name>/ holding train-images-idx3-ubyte, "
    "train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (each may be "
    ".gz), and optionally classes.txt with one class name per line"
)


def read_idx(path: Path) -> np.ndarray:
    """Read one idx file (gzipped if its name ends in ``.gz``).

    Raises:
        DatasetFormatError: the header or the length does not follow the idx format.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            data = handle.read()
    except (OSError, EOFError) as exc:
        raise DatasetFormatError(f"Cannot read idx file {path}: {exc}") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise DatasetFormatError(f"{path} is not an idx file (bad magic number).")
    dtype, ndim = np.dtype(_IDX_DTYPES[data[2]]), data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DatasetFormatError(f"{path}: truncated idx header.")
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise DatasetFormatError(
            f"{path}: header promises {shape} ({expected} bytes) but holds {len(data) - header} bytes."
        )
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)


class IdxAdapter:
    """MNIST-format idx files in a folder named after the dataset."""

    source = "idx"

    def find(self, name: str, ctx: AdapterContext) -> MissingDataset | None:
        folder = dataset_folder(self.source, name, ctx)
        if folder is not None and not _missing_parts(folder):
            return None
        where = ctx.describe_offline_dir()
        if folder is not None:
            where += f" (folder {folder} lacks {', '.join(_missing_parts(folder))})"
        return MissingDataset(f"idx:{name}", where, HOW_TO_PROVIDE)

    def load(self, name: str, ctx: AdapterContext) -> RawDataset:
        missing = self.find(name, ctx)
        if missing is not None:
            raise DatasetNotFoundError(missing.message(name))
        folder = dataset_folder(self.source, name, ctx)
        paths = {part: _find_part(folder, part) for part in _PARTS}
        train_x, test_x = read_idx(paths["train_images"]), read_idx(paths["test_images"])
        train_y, test_y = read_idx(paths["train_labels"]), read_idx(paths["test_labels"])
        for images in (train_x, test_x):
            if images.dtype != np.uint8 or images.ndim not in (3, 4):
                raise DatasetFormatError(
                    f"Dataset 'idx:{name}': image files must hold uint8 [N, H, W(, C)]; "
                    f"got {images.dtype} {images.shape}."
                )
        images = np.concatenate([train_x, test_x]).astype(np.uint8)
        if images.ndim == 3:
            images = images[..., None]
        labels = np.concatenate([train_y, test_y]).astype(np.int64)
        n_train = len(train_x)
        return RawDataset(
            key=f"idx:{name}",
            images=images,
            labels=labels,
            class_names=read_class_names(folder, int(labels.max()) + 1),
            kind="single",
            source_checksum=file_checksum(*(paths[p] for p in _PARTS)),
            given_splits=GivenSplits(
                train=np.arange(n_train, dtype=np.int64),
                test=np.arange(n_train, len(images), dtype=np.int64),
                official=True,
            ),
            metadata={"source": f"idx files in {folder.name}/", "files": [paths[p].name for p in _PARTS]},
        )


def _find_part(folder: Path, part: str) -> Path | None:
    """The one file of ``folder`` whose name contains the part's marker, or None."""
    stem, kind = _PARTS[part]
    alt = stem.replace("t10k", "test")
    hits = sorted(p for p in folder.iterdir() if p.is_file() and kind in p.name and (stem in p.name or alt in p.name))
    if len(hits) > 1:
        raise DatasetFormatError(
            f"Folder {folder} has several {stem} idx files ({', '.join(p.name for p in hits)}); keep one."
        )
    return hits[0] if hits else None


def _missing_parts(folder: Path) -> list[str]:
    return [f"{_PARTS[p][0]}-{_PARTS[p][1]}-ubyte" for p in _PARTS if _find_part(folder, p) is None]


__all__ = ["HOW_TO_PROVIDE", "IdxAdapter", "read_idx"]
