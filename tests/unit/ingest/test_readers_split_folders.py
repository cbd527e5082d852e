"""Readers of the sources whose split is in their folders (BelgiumTSC, chest X-ray pneumonia) on tiny fixtures in their exact layouts: rows,
classes and the source's own splits, read back through ``nevis:<key>``; every task of the
source can split the rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.source_fixtures import split_folders as fixtures
from tests.support.source_fixtures.converted import convert_and_load, split_of
from workers.stream.manifest_files import load_stream
from workers.stream.splits import assign_splits

WRITERS: dict[str, Callable[[Path], list[tuple[str, str]]]] = {
    "belgium_tsc": fixtures.write_belgium_tsc,
    "pneumonia_chest_xray": fixtures.write_pneumonia_chest_xray,
}


@pytest.mark.parametrize("key", sorted(WRITERS))
def test_rows_keep_their_class_and_the_sources_split(tmp_path: Path, key: str) -> None:
    expected = WRITERS[key](tmp_path / "data")
    raw = convert_and_load(key, tmp_path)
    assert [(raw.class_names[v], s) for v, s in zip(raw.labels, split_of(raw), strict=True)] == expected
    assert raw.given_splits is not None and raw.given_splits.official
    for task in load_stream("nevis22-full").tasks:
        if task.dataset == f"nevis:{key}":
            assignment = assign_splits(raw.labels, rule=task.split, given=raw.given_splits, attributes=raw.attributes)
            assert sum(len(r) for r in assignment.rows.values()) == raw.num_examples


def test_belgium_names_its_classes_from_the_list(tmp_path: Path) -> None:
    fixtures.write_belgium_tsc(tmp_path / "data")
    assert len(convert_and_load("belgium_tsc", tmp_path).class_names) == 62
