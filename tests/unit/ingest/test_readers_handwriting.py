"""Readers of Chars74K and CASIA-HWDB 1.1 on tiny fixtures in their exact layouts: which
members become rows, their classes, CASIA's inverted bitmaps and official split, read back
through ``nevis:<key>``; every FULL task of the source can split the rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.support.source_fixtures.converted import convert_and_load, image, split_of
from tests.support.source_fixtures.handwriting import write_casia_hwdb, write_chars74k
from workers.stream.manifest_files import load_stream
from workers.stream.splits import assign_splits


def _splittable(raw, key: str) -> None:
    for task in load_stream("nevis22-full").tasks:
        if task.dataset == f"nevis:{key}":
            rows = assign_splits(raw.labels, rule=task.split, given=raw.given_splits, attributes=raw.attributes).rows
            assert sum(len(r) for r in rows.values()) == raw.num_examples


def test_chars74k_takes_the_images_of_each_archive_with_their_sample_class(tmp_path: Path) -> None:
    expected = write_chars74k(tmp_path / "data")
    raw = convert_and_load("chars74k", tmp_path)
    assert [raw.class_names[v] for v in raw.labels] == expected
    assert len(raw.class_names) == 62 and raw.given_splits is None
    _splittable(raw, "chars74k")


def test_casia_reads_gnt_records_inverted_with_their_tags(tmp_path: Path) -> None:
    rows = write_casia_hwdb(tmp_path / "data")
    raw = convert_and_load("casia_hwdb", tmp_path)
    assert [(raw.class_names[v], s) for v, s in zip(raw.labels, split_of(raw), strict=True)] == [
        (name, split) for name, split, _ in rows
    ]
    assert list(raw.class_names) == sorted({name for name, _, _ in rows})
    for row, (_, _, bitmap) in enumerate(rows):
        assert np.array_equal(image(raw, row)[..., 0], 255 - bitmap)
    _splittable(raw, "casia_hwdb")
