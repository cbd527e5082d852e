"""Readers of Food-101N, CVC-MUSCIMA and Olivetti faces on tiny fixtures in their exact
layouts: rows, classes and the source's own splits, read back through ``nevis:<key>``; every
FULL task of the source can split the rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.source_fixtures import side_files as fixtures
from tests.support.source_fixtures.converted import check_rows_and_stream_splits

WRITERS: dict[str, Callable[[Path], list[tuple[str, str | None]]]] = {
    "food101n": fixtures.write_food101n,
    "cvc_muscima": fixtures.write_cvc_muscima,
    "olivetti_face": fixtures.write_olivetti_face,
}


@pytest.mark.parametrize("key", sorted(WRITERS))
def test_rows_keep_their_class_and_the_sources_split(tmp_path: Path, key: str) -> None:
    check_rows_and_stream_splits(key, WRITERS[key](tmp_path / "data"), tmp_path)
