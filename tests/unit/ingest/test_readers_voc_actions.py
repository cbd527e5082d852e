"""VOC 2012 actions: person crops with multi-hot actions."""

from __future__ import annotations

from tests.support.source_fixtures.read_back import convert_fixture, split_by_stream
from tests.support.source_fixtures.voc_actions import write_voc_actions
from workers.ingest.readers.voc_actions import ACTIONS


def test_voc_actions_crops_each_person_with_its_actions(tmp_path):
    raw, expected = convert_fixture("voc_actions", write_voc_actions, tmp_path)
    assert raw.kind == "multi" and raw.class_names == ACTIONS
    got = sorted(
        (sorted(ACTIONS[c] for c in row.nonzero()[0]), None, tuple(int(v) for v in shape))
        for row, shape in zip(raw.labels, raw.images.shapes)
    )
    assert got == sorted(expected.values())  # 2010_000009 is in no action list
    assert sum(split_by_stream(raw, "voc_actions", "nevis22-full").counts.values()) == 4
