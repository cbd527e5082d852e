"""IAPR TC-12: one label per image (the last region's, as the reference), its split lists."""

from __future__ import annotations

from tests.support.source_fixtures.iaprtc12 import write_iaprtc12
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream


def test_iaprtc12_last_region_label_and_train_pool(tmp_path):
    raw, expected = convert_fixture("iaprtc12", write_iaprtc12, tmp_path)
    assert raw.kind == "multi" and raw.class_names[:2] == (" ", "airplane")
    assert row_facts(raw) == expected_facts(expected)
    counts = split_by_stream(raw, "iaprtc12", "nevis22-full").counts
    assert sum(counts.values()) == 3  # the source's 2 test rows are left out by the rule
