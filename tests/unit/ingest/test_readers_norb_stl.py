"""Readers of smallNORB and STL-10 on tiny fixtures in their exact binary layouts: pixels,
labels, the attributes the stream splits smallNORB on, and the official splits."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.support.source_fixtures.converted import convert_and_load, image, split_of
from tests.support.source_fixtures.norb_stl import write_smallnorb, write_stl10
from workers.stream.manifest_files import load_stream
from workers.stream.splits import assign_splits


def test_smallnorb_keeps_the_left_image_category_and_instance(tmp_path: Path) -> None:
    parts = write_smallnorb(tmp_path / "data")
    raw = convert_and_load("smallnorb", tmp_path)
    assert split_of(raw) == ["train"] * 6 + ["test"] * 2
    assert raw.labels.tolist() == parts["train"]["cat"].tolist() + parts["test"]["cat"].tolist()
    assert raw.attributes["instance"].tolist() == [4, 6, 7, 8, 9, 7, 0, 5]
    assert raw.attributes["lighting"].tolist()[:3] == [0, 1, 2]
    assert np.array_equal(image(raw, 1)[..., 0], parts["train"]["dat"][1, 0])
    assert raw.class_names[0] == "four-legged animals"
    task = next(t for t in load_stream("nevis22-full").tasks if t.dataset == "nevis:smallnorb")
    rows = assign_splits(raw.labels, rule=task.split, given=raw.given_splits, attributes=raw.attributes).rows
    assert rows["dev"].tolist() == [0] and rows["dev_test"].tolist() == [1] and rows["test"].tolist() == [6, 7]


def test_stl10_reads_labels_first_and_transposes_images(tmp_path: Path) -> None:
    parts = write_stl10(tmp_path / "data")
    raw = convert_and_load("stl10", tmp_path)
    assert split_of(raw) == ["train"] * 10 + ["test"] * 2
    assert raw.labels.tolist() == [v - 1 for s in ("train", "test") for v in parts[s][1].tolist()]
    assert raw.class_names[9] == "truck"
    images = parts["test"][0]
    assert np.array_equal(image(raw, 11), images[1].transpose(2, 1, 0))
