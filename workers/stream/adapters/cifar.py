"""``cifar:<name>``: CIFAR-10 / CIFAR-100 "python version" batches a user brings.

The folder ``NEVIS_OFFLINE_DATA_DIR/<name>/`` (or its ``cifar-10-batches-py`` /
``cifar-100-python`` sub-folder, as the archives unpack) holds either CIFAR-10's
``data_batch_1`` … ``data_batch_5``, ``test_batch`` and ``batches.meta``, or CIFAR-100's
``train``, ``test`` and ``meta`` (fine labels are used). The train / test cut is official.

The batches are pickles. Unpickling can run code, so only plain containers and numpy arrays
are allowed (:class:`_SafeUnpickler`); anything else is refused.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from services.core.errors import DatasetFormatError, DatasetNotFoundError
from workers.stream.adapters.base import (
    AdapterContext,
    GivenSplits,
    MissingDataset,
    RawDataset,
    dataset_folder,
    file_checksum,
)

_SUBFOLDERS = ("", "cifar-10-batches-py", "cifar-100-python")
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}
HOW_TO_PROVIDE = (
    "unpack the CIFAR python archive into NEVIS_OFFLINE_DATA_DIR/<name>/ (CIFAR-10: "
    "data_batch_1..5, test_batch, batches.meta; CIFAR-100: train, test, meta)"
)


class _SafeUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, strings and numpy arrays, nothing that could run code."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a CIFAR batch")


def read_batch(path: Path) -> dict[str, Any]:
    """One CIFAR batch as a dict with ``str`` keys.

    Raises:
        DatasetFormatError: the file is not a CIFAR python batch.
    """
    try:
        with path.open("rb") as handle:
            raw = _SafeUnpickler(handle, encoding="bytes").load()
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError) as exc:
        raise DatasetFormatError(f"Cannot read CIFAR batch {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise DatasetFormatError(f"{path} is not a CIFAR batch (expected a dict).")
    return {k.decode() if isinstance(k, bytes) else str(k): v for k, v in raw.items()}


class CifarAdapter:
    """CIFAR-10 / CIFAR-100 python batches in a folder named after the dataset."""

    source = "cifar"

    def find(self, name: str, ctx: AdapterContext) -> MissingDataset | None:
        if self._layout(name, ctx) is not None:
            return None
        return MissingDataset(f"cifar:{name}", ctx.describe_offline_dir(), HOW_TO_PROVIDE)

    def load(self, name: str, ctx: AdapterContext) -> RawDataset:
        layout = self._layout(name, ctx)
        if layout is None:
            missing = self.find(name, ctx)
            raise DatasetNotFoundError(missing.message(name))
        train_files, test_files, meta_file = layout
        label_key = "labels" if meta_file.name == "batches.meta" else "fine_labels"
        names_key = "label_names" if label_key == "labels" else "fine_label_names"
        train = [_arrays(read_batch(p), label_key, p) for p in train_files]
        test = [_arrays(read_batch(p), label_key, p) for p in test_files]
        images = np.concatenate([x for x, _ in train + test])
        labels = np.concatenate([y for _, y in train + test])
        meta = read_batch(meta_file)
        class_names = tuple(n.decode() if isinstance(n, bytes) else str(n) for n in meta.get(names_key, [])) or tuple(
            str(i) for i in range(int(labels.max()) + 1)
        )
        n_train = sum(len(x) for x, _ in train)
        return RawDataset(
            key=f"cifar:{name}",
            images=images,
            labels=labels,
            class_names=class_names,
            kind="single",
            source_checksum=file_checksum(*train_files, *test_files, meta_file),
            given_splits=GivenSplits(
                train=np.arange(n_train, dtype=np.int64),
                test=np.arange(n_train, len(images), dtype=np.int64),
                official=True,
            ),
            metadata={
                "source": "CIFAR python batches",
                "files": [p.name for p in (*train_files, *test_files, meta_file)],
            },
        )

    def _layout(self, name: str, ctx: AdapterContext):  # noqa: ANN202
        """(train batches, test batches, meta file) of the first complete layout, or None."""
        base = dataset_folder(self.source, name, ctx)
        if base is None:
            return None
        for sub in _SUBFOLDERS:
            folder = base / sub if sub else base
            ten = [folder / f"data_batch_{i}" for i in range(1, 6)]
            if (
                all(p.is_file() for p in ten)
                and (folder / "test_batch").is_file()
                and (folder / "batches.meta").is_file()
            ):
                return ten, [folder / "test_batch"], folder / "batches.meta"
            hundred = [folder / "train", folder / "test", folder / "meta"]
            if all(p.is_file() for p in hundred):
                return hundred[:1], hundred[1:2], hundred[2]
        return None


def _arrays(batch: dict[str, Any], label_key: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Images ``[n, 32, 32, 3]`` (from CIFAR's channel-planar rows) and int64 labels."""
    data, labels = batch.get("data"), batch.get(label_key)
    if (
        not isinstance(data, np.ndarray)
        or data.ndim != 2
        or data.shape[1] != 3072
        or labels is None
        or len(labels) != len(data)
    ):
        raise DatasetFormatError(f"CIFAR batch {path} must hold 'data' uint8 [n, 3072] and {label_key!r} of length n.")
    images = data.astype(np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), np.asarray(labels, dtype=np.int64)


__all__ = ["HOW_TO_PROVIDE", "CifarAdapter", "read_batch"]
