"""Caltech Camera Traps: classes from COCO-style JSON annotations, train / trans_val / trans_test."""

from __future__ import annotations

from tests.support.source_fixtures.json_annotations import write_caltech_camera_traps
from tests.support.source_fixtures.read_back import (
    convert_fixture,
    expected_facts,
    row_facts,
    split_by_stream,
)
from workers.stream.readers.json_annotations import CAMERA_TRAP_CLASSES


def test_caltech_camera_traps(tmp_path):
    raw, expected = convert_fixture("caltech_camera_traps", write_caltech_camera_traps, tmp_path)
    assert raw.class_names == CAMERA_TRAP_CLASSES
    assert row_facts(raw) == expected_facts(expected)
    counts = split_by_stream(raw, "caltech_camera_traps", "nevis22-full").counts
    assert counts["dev_test"] == 1 and counts["test"] == 2
