"""Interact: real images and illustrations, illustrations kept in train by the stream's rule."""

from __future__ import annotations

import numpy as np

from tests.support.source_fixtures.interact import NAMES, write_interact
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream


def test_interact_image_sets_and_train_only_illustrations(tmp_path):
    raw, expected = convert_fixture("interact", write_interact, tmp_path)
    assert raw.class_names == NAMES
    assert row_facts(raw, "image_set") == expected_facts(expected)
    rows = split_by_stream(raw, "interact", "nevis22-full").rows
    illustrations = np.flatnonzero(raw.attributes["image_set"] == "illustration")
    assert set(illustrations.tolist()) <= set(rows["train"].tolist())
