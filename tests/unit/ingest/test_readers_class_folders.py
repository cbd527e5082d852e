"""Readers of the one-folder-per-class sources (sketch, 15 Scenes, Caltech 256, Graz-02, UIUC
cars) on tiny fixtures in their exact layouts: which members become rows, in which order,
with which class, read back through ``nevis:<key>``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.source_fixtures import class_folders as fixtures
from tests.support.source_fixtures.converted import convert_and_load, image

CASES: dict[str, tuple[Callable[[Path], list[tuple[str, str]]], list[str] | None]] = {
    "sketch": (fixtures.write_sketch, None),
    "scenes15": (fixtures.write_scenes15, None),
    "caltech256": (fixtures.write_caltech256, ["ak47", "american-flag", "clutter"]),
    "ig02": (fixtures.write_ig02, ["bikes", "cars", "people"]),
    "uiuc_cars": (fixtures.write_uiuc_cars, ["neg", "pos"]),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_each_image_of_a_class_folder_is_a_row_of_that_class(tmp_path: Path, key: str) -> None:
    write, names = CASES[key]
    expected = write(tmp_path / "data")
    raw = convert_and_load(key, tmp_path)
    names = names or sorted({cls for cls, _ in expected})
    assert list(raw.class_names) == names
    assert [raw.class_names[label] for label in raw.labels] == [cls for cls, _ in expected]
    assert raw.given_splits is None
    assert image(raw, 0).ndim == 3


def test_caltech256_numbers_classes_by_folder_number(tmp_path: Path) -> None:
    fixtures.write_caltech256(tmp_path / "data")
    raw = convert_and_load("caltech256", tmp_path)
    assert raw.labels.tolist() == [1, 0, 2, 0]  # 002, 001, 003, 001 in archive order
