"""Caltech Camera Traps: classes from COCO-style JSON annotations, train / trans_val / trans_test."""

from __future__ import annotations

from tests.support.source_fixtures.json_annotations import write_caltech_camera_traps, write_coco_single_label
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream
from workers.ingest.readers.json_annotations import CAMERA_TRAP_CLASSES


def test_caltech_camera_traps(tmp_path):
    raw, expected = convert_fixture("caltech_camera_traps", write_caltech_camera_traps, tmp_path)
    assert raw.class_names == CAMERA_TRAP_CLASSES
    assert row_facts(raw) == expected_facts(expected)
    counts = split_by_stream(raw, "caltech_camera_traps", "nevis22-full").counts
    assert counts["dev_test"] == 1 and counts["test"] == 2


def test_coco_single_label_crops_each_large_enough_box(tmp_path):
    raw, expected = convert_fixture("coco_single_label", write_coco_single_label, tmp_path)
    assert len(raw.class_names) == 90 and raw.class_names[0] == "person"
    given = raw.given_splits
    split = {int(r): "train" for r in given.train} | {int(r): "test" for r in given.test}
    got = sorted(
        (raw.class_names[int(raw.labels[i])], split[i], tuple(int(v) for v in raw.images.shapes[i]))
        for i in range(len(raw.labels))
    )
    assert got == sorted(expected.values())
    assert split_by_stream(raw, "coco_single_label", "nevis22-full").counts["test"] == 1  # 15.9 px: out
