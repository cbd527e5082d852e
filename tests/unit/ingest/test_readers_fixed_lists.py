"""Readers of the Magellan volcanoes, butterflies, PPMI and MIT indoor scenes on tiny fixtures
in their exact layouts: rows, classes and the source's own splits, read back through
``nevis:<key>``; every FULL task of the source can split the rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.source_fixtures import fixed_lists as fixtures
from tests.support.source_fixtures.converted import check_rows_and_stream_splits, image

WRITERS: dict[str, Callable[[Path], list[tuple[str, str | None]]]] = {
    "magellan_venus_volcanoes": fixtures.write_magellan_venus_volcanoes,
    "butterflies": fixtures.write_butterflies,
    "ppmi": fixtures.write_ppmi,
    "mit_scenes": fixtures.write_mit_scenes,
}


@pytest.mark.parametrize("key", sorted(WRITERS))
def test_rows_keep_their_class_and_the_sources_split(tmp_path: Path, key: str) -> None:
    raw = check_rows_and_stream_splits(key, WRITERS[key](tmp_path / "data"), tmp_path)
    if key == "magellan_venus_volcanoes":  # the raw 1024 x 1024 square, as the .sdt holds it
        assert image(raw, 2).shape == (1024, 1024, 1) and (image(raw, 2) == 3).all()
