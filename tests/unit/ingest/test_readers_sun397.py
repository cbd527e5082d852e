"""SUN397 with TFDS's own train / validation / test lists (shipped)."""

from __future__ import annotations

from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream
from tests.support.source_fixtures.sun397 import write_sun397


def test_sun397_labels_by_category_path_and_tfds_splits(tmp_path):
    raw, expected = convert_fixture("sun397", write_sun397, tmp_path)
    assert len(raw.class_names) == 397 and raw.class_names[0] == "/a/abbey"
    assert row_facts(raw) == expected_facts(expected)
    counts = split_by_stream(raw, "sun397", "nevis22-full").counts
    assert counts["dev_test"] == 1 and counts["test"] == 2
