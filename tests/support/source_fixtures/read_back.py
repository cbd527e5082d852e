"""Convert a fixture source and read it back the way ``nevis data prepare`` does.

``convert_fixture`` writes a fixture into ``<tmp>/data/sources/<key>``, runs the registered
reader through :func:`convert_source`, and loads ``nevis:<key>`` with the dataset adapters;
``split_by_stream`` then deals it with the split rule the stream's task gives it, so a test
sees that the attributes and official splits the rule needs are there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from workers.ingest.readers.base import convert_source
from workers.stream.adapters import load_dataset
from workers.stream.adapters.base import AdapterContext, RawDataset
from workers.stream.manifest_files import load_stream
from workers.stream.sources.catalogue import load_catalogue
from workers.stream.splits import SplitAssignment, assign_splits


def convert_fixture(key: str, writer: Callable[[Path], Any], tmp: Path) -> tuple[RawDataset, Any]:
    """(the dataset read back through ``nevis:<key>``, what the writer said to expect)."""
    source = load_catalogue().find(key)
    folder = tmp / "data" / "sources" / source.key
    folder.mkdir(parents=True, exist_ok=True)
    expected = writer(folder)
    offline = tmp / "offline"
    # a fixture is a few rows, not the real source: its pinned counts never match
    written = convert_source(source.key, tmp / "data", offline, accept_count_change=True)
    assert written.path == offline / f"{source.key}.parquet"
    raw = load_dataset(f"nevis:{source.key}", AdapterContext(offline_dir=offline))
    return raw, expected


def split_by_stream(raw: RawDataset, key: str, stream: str = "nevis22-short") -> SplitAssignment:
    """Deal ``raw`` with the split rule of ``nevis:<key>``'s task in ``stream``."""
    task = next(t for t in load_stream(stream).tasks if t.dataset == f"nevis:{key}")
    return assign_splits(
        raw.labels, rule=task.split, given=raw.given_splits, attributes=raw.attributes, dataset=f"nevis:{key}"
    )


def row_facts(raw: RawDataset, attribute: str | None = None) -> list[tuple[Any, ...]]:
    """Each row's (class name or sorted class names, source split[, attribute]), sorted."""
    given = raw.given_splits
    split: dict[int, str] = {}
    if given is not None:
        parts = {
            "train": given.train,
            "test": given.test,
            "val": given.val if given.val is not None else np.zeros(0, np.int64),
        }
        for name, rows in parts.items():
            split.update({int(r): name for r in rows})
    out = []
    for i in range(len(raw.labels)):
        if raw.kind == "multi":
            label: Any = sorted(raw.class_names[c] for c in np.flatnonzero(raw.labels[i]))
        else:
            label = raw.class_names[int(raw.labels[i])]
        extra = () if attribute is None else (raw.attributes[attribute][i].item(),)
        out.append((label, split.get(i), *extra))
    return sorted(out, key=repr)


def expected_facts(expected: dict[str, tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(expected.values(), key=repr)


__all__ = ["convert_fixture", "expected_facts", "row_facts", "split_by_stream"]
