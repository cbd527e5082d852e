"""Convert a fixture source with its real reader and read it back as ``nevis data prepare`` does."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workers.stream.adapters import load_dataset
from workers.stream.adapters.base import AdapterContext, RawDataset
from workers.stream.readers.base import convert_source


def convert_and_load(key: str, root: Path) -> RawDataset:
    """Convert ``<root>/data/sources/<key>`` into ``<root>/offline/<key>.parquet`` and load it
    through the ``nevis:<key>`` adapter."""
    convert_source(key, root / "data", root / "offline")
    return load_dataset(f"nevis:{key}", AdapterContext(offline_dir=root / "offline"))


def image(raw: RawDataset, row: int) -> np.ndarray:
    """Row ``row``'s pixels as the adapter decodes them ([h, w, c])."""
    images = raw.images
    return np.asarray(images[row]) if not isinstance(images, np.ndarray) else images[row]


def split_of(raw: RawDataset) -> list[str | None]:
    """The source's own split of every row (None where it gives none)."""
    given = raw.given_splits
    if given is None:
        return [None] * raw.num_examples
    out: list[str | None] = [None] * raw.num_examples
    parts = {"train": given.train, "val": given.val, "test": given.test}
    for name, rows in parts.items():
        for row in rows if rows is not None else ():
            out[int(row)] = name
    return out


__all__ = ["convert_and_load", "image", "split_of"]
