"""Readers of the FULL-stream sources whose class is read off each image's path, on tiny
fixtures in their exact layouts: which members become rows (non-images, masks and the
reference's skipped files do not), in which order, with which class, read back through
``nevis:<key>``; and every FULL task of the source can split the rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.source_fixtures.converted import convert_and_load, image
from tests.support.source_fixtures.named_paths import LAYOUTS, write_named_paths
from workers.stream.manifest_files import load_stream
from workers.stream.splits import assign_splits


@pytest.mark.parametrize("key", sorted(LAYOUTS))
def test_each_row_has_the_class_its_path_names(tmp_path: Path, key: str) -> None:
    expected = write_named_paths(tmp_path / "data", key)
    raw = convert_and_load(key, tmp_path)
    assert [raw.class_names[label] for label in raw.labels] == expected
    assert raw.given_splits is None
    assert image(raw, 0).shape[:2] == (6, 7)
    for task in load_stream("nevis22-full").tasks:
        if task.dataset == f"nevis:{key}":
            assignment = assign_splits(raw.labels, rule=task.split, given=None, attributes=raw.attributes)
            assert sum(len(r) for r in assignment.rows.values()) == raw.num_examples


def test_umd_classes_follow_folder_numbers(tmp_path: Path) -> None:
    write_named_paths(tmp_path / "data", "umd")
    raw = convert_and_load("umd", tmp_path)
    assert list(raw.class_names) == ["2", "10", "25"]
