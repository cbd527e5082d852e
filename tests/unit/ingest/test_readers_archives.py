"""Readers of the archive sources (COIL-100, Brodatz, MNIST-M, LFW, Caltech 101) on tiny
fixtures in their exact layouts: rows, labels, class names, the attributes and official
splits the streams' rules use, read back through ``nevis:<key>``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from tests.support.source_fixtures.brodatz import write_brodatz
from tests.support.source_fixtures.caltech101 import write_caltech101
from tests.support.source_fixtures.coil100 import write_coil100
from tests.support.source_fixtures.converted import convert_and_load, image, split_of
from tests.support.source_fixtures.lfw import PEOPLE, write_lfw
from tests.support.source_fixtures.mnist_m import write_mnist_m
from workers.ingest.readers.caltech101 import TRAIN_PER_CLASS


def test_coil100_labels_objects_and_bins_view_angles(tmp_path: Path) -> None:
    views = sorted(write_coil100(tmp_path / "data"), key=lambda v: f"obj{v[0]}__{v[1]}.png")  # zip name order
    raw = convert_and_load("coil100", tmp_path)
    assert raw.labels.tolist() == [obj - 1 for obj, _ in views]
    assert raw.attributes["angle_bin"].tolist() == [angle // 5 for _, angle in views]
    assert raw.class_names[0] == "obj1" and raw.class_names[99] == "obj100"
    assert raw.given_splits is None
    assert image(raw, 0).shape == (4, 4, 3)


def test_brodatz_cuts_each_texture_into_nine_crops(tmp_path: Path) -> None:
    textures = write_brodatz(tmp_path / "data", height=10, width=13)
    raw = convert_and_load("brodatz", tmp_path)
    assert len(raw.class_names) == 111 and raw.num_examples == 9 * 111
    assert list(raw.class_names) == sorted(textures)
    assert Counter(raw.labels.tolist()) == {label: 9 for label in range(111)}
    assert raw.attributes["crop"][:9].tolist() == list(range(9))
    source = textures[raw.class_names[0]]
    assert image(raw, 0)[..., 0].tolist() == source[0:3, 0:4].tolist()  # x outer, y inner
    assert image(raw, 1)[..., 0].tolist() == source[3:6, 0:4].tolist()
    assert image(raw, 3)[..., 0].tolist() == source[0:3, 4:8].tolist()


def test_mnist_m_labels_images_from_the_lists_that_follow_them(tmp_path: Path) -> None:
    labels = write_mnist_m(tmp_path / "data")
    raw = convert_and_load("mnist_m", tmp_path)
    # train 0..2 then test 0, 9; the unlisted image is left out; test labels win on name clashes
    assert raw.labels.tolist() == [labels["00000000.png"], 0, 4, labels["00000000.png"], 2]
    assert labels["00000000.png"] == 7
    assert list(raw.class_names) == [str(d) for d in range(10)]


def test_lfw_keeps_people_with_five_images_in_archive_order(tmp_path: Path) -> None:
    order = write_lfw(tmp_path / "data")
    raw = convert_and_load("lfw", tmp_path)
    kept = [p for p, n in PEOPLE.items() if n >= 5]
    assert list(raw.class_names) == kept  # first appearance, not sorted
    assert raw.labels.tolist() == [kept.index(p) for p, _ in order if p in kept]
    assert raw.num_examples == sum(PEOPLE[p] for p in kept)


def test_caltech101_takes_thirty_train_images_per_class(tmp_path: Path) -> None:
    counts = write_caltech101(tmp_path / "data")
    raw = convert_and_load("caltech101", tmp_path)
    assert list(raw.class_names) == sorted(counts)
    splits = np.array(split_of(raw))
    for label, name in enumerate(raw.class_names):
        mine = splits[raw.labels == label]
        assert (mine == "train").sum() == TRAIN_PER_CLASS
        assert (mine == "test").sum() == counts[name] - TRAIN_PER_CLASS
