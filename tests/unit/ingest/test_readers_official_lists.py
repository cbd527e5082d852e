"""Readers of LFW-a, DTD and ALOI on tiny fixtures in their exact layouts: rows, classes and
the source's own splits, read back through ``nevis:<key>``; every FULL task of the source can
split the rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.source_fixtures import official_lists as fixtures
from tests.support.source_fixtures.converted import check_rows_and_stream_splits, convert_and_load

WRITERS: dict[str, Callable[[Path], list[tuple[str, str | None]]]] = {
    "lfwa": fixtures.write_lfwa,
    "dtd": fixtures.write_dtd,
    "aloi": fixtures.write_aloi,
}


@pytest.mark.parametrize("key", sorted(WRITERS))
def test_rows_keep_their_class_and_the_sources_split(tmp_path: Path, key: str) -> None:
    check_rows_and_stream_splits(key, WRITERS[key](tmp_path / "data"), tmp_path)


def test_dtd_and_aloi_name_their_classes(tmp_path: Path) -> None:
    fixtures.write_dtd(tmp_path / "data")
    fixtures.write_aloi(tmp_path / "data")
    assert list(convert_and_load("dtd", tmp_path).class_names) == ["banded", "zigzagged"]
    assert len(convert_and_load("aloi", tmp_path).class_names) == 1000
