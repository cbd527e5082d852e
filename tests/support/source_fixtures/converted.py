"""Convert a fixture source with its real reader and read it back as ``nevis data prepare`` does."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workers.ingest.readers.base import convert_source
from workers.stream.adapters import load_dataset
from workers.stream.adapters.base import AdapterContext, RawDataset
from workers.stream.manifest_files import load_stream
from workers.stream.splits import assign_splits


def convert_and_load(key: str, root: Path) -> RawDataset:
    """Convert ``<root>/data/sources/<key>`` into ``<root>/offline/<key>.parquet`` and load it
    through the ``nevis:<key>`` adapter."""
    convert_source(key, root / "data", root / "offline", accept_count_change=True)  # fixture: a few rows
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


def check_rows_and_stream_splits(key: str, expected: list[tuple[str, str | None]], root: Path) -> RawDataset:
    """Convert ``key``'s fixture under ``root``, check each row's (class name, source split)
    against ``expected`` (what the fixture writer wrote), and that every FULL task of the
    source splits all its rows by its own rule; the rows, for further checks."""
    raw = convert_and_load(key, root)
    assert [(raw.class_names[v], s) for v, s in zip(raw.labels, split_of(raw), strict=True)] == expected
    for task in load_stream("nevis22-full").tasks:
        if task.dataset == f"nevis:{key}":
            assignment = assign_splits(raw.labels, rule=task.split, given=raw.given_splits, attributes=raw.attributes)
            assert sum(len(r) for r in assignment.rows.values()) == raw.num_examples
    return raw
