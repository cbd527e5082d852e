"""CelebA, AwA2 and NIH chest X-ray: multi-hot labels from attribute tables and lists."""

from __future__ import annotations

import pytest

from tests.support.source_fixtures.attribute_lists import (
    write_awa2,
    write_celeb_a,
    write_nih_chest_xray,
    write_sun_attributes,
)
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream


@pytest.mark.parametrize(
    "key, writer, classes",
    [
        ("celeb_a", write_celeb_a, 4),
        ("awa2", write_awa2, 3),
        ("nih_chest_xray", write_nih_chest_xray, 15),
        ("sun_attributes", write_sun_attributes, 3),
    ],
)
def test_multi_label_tables(tmp_path, key, writer, classes):
    raw, expected = convert_fixture(key, writer, tmp_path)
    assert raw.kind == "multi" and len(raw.class_names) == classes
    assert row_facts(raw) == expected_facts(expected)
    counts = split_by_stream(raw, key, "nevis22-full").counts
    if raw.given_splits is not None:
        assert counts["test"] == sum(s == "test" for _, s in expected.values())
    assert sum(counts.values()) == len(expected)
