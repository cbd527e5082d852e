"""Readers of EMNIST (balanced), rotated MNIST, SEMEION, Landsat, PathMNIST and Extended
Yale B on tiny fixtures in their exact layouts, read back through ``nevis:<key>``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.support.source_fixtures.converted import convert_and_load, image, split_of
from tests.support.source_fixtures.extended_yaleb import write_extended_yaleb
from tests.support.source_fixtures.idx_variants import write_emnist_balanced, write_mnist_rotation
from tests.support.source_fixtures.tables import write_landsat, write_path_mnist, write_semeion
from tests.support.source_fixtures.tiny import pixels


def test_emnist_balanced_reads_its_own_files_from_the_zip(tmp_path: Path) -> None:
    labels = write_emnist_balanced(tmp_path / "data")
    raw = convert_and_load("emnist_balanced", tmp_path)
    assert raw.labels.tolist() == labels["train"] + labels["test"]
    assert split_of(raw) == ["train"] * 10 + ["test"] * 2
    assert len(raw.class_names) == 47 and raw.class_names[46] == "t" and raw.class_names[10] == "A"
    assert np.array_equal(image(raw, 0)[..., 0], pixels(0, 28, 28, 1))  # as stored, not transposed


def test_mnist_rotation_rotates_train_images_only(tmp_path: Path) -> None:
    write_mnist_rotation(tmp_path / "data")
    raw = convert_and_load("mnist_rotation", tmp_path)
    angles = raw.attributes["angle"]
    assert split_of(raw) == ["train"] * 12 + ["test"] * 3
    assert (angles[12:] == 0).all() and len(set(angles[:12].tolist())) > 1
    assert np.array_equal(image(raw, 12)[..., 0], pixels(100, 28, 28, 1))
    assert image(raw, 0).shape == (28, 28, 1)


def test_semeion_scales_bits_to_pixels(tmp_path: Path) -> None:
    rows = write_semeion(tmp_path / "data")
    raw = convert_and_load("semeion", tmp_path)
    assert raw.labels.tolist() == [label for _, label in rows]
    assert np.array_equal(image(raw, 0)[..., 0], (rows[0][0].reshape(16, 16) * 255).astype(np.uint8))


def test_landsat_drops_the_fourth_band_and_keeps_the_files_split(tmp_path: Path) -> None:
    parts = write_landsat(tmp_path / "data")
    raw = convert_and_load("landsat", tmp_path)
    rows = parts["sat.trn"] + parts["sat.tst"]
    assert raw.labels.tolist() == [code - 1 for _, code in rows]
    assert split_of(raw) == ["train"] * 10 + ["test"] * 2
    assert np.array_equal(image(raw, 0), rows[0][0].reshape(3, 3, 4)[..., :3].astype(np.uint8))
    assert raw.class_names[6] == "very damp grey soil"


def test_path_mnist_reads_the_rgb_csv(tmp_path: Path) -> None:
    rows = write_path_mnist(tmp_path / "data")
    raw = convert_and_load("path_mnist", tmp_path)
    assert raw.labels.tolist() == [label - 1 for _, label in rows]
    assert np.array_equal(image(raw, 1), rows[1][0].reshape(28, 28, 3).astype(np.uint8))


def test_extended_yaleb_labels_subjects_and_keeps_the_pose(tmp_path: Path) -> None:
    rows = write_extended_yaleb(tmp_path / "data")
    raw = convert_and_load("extended_yaleb", tmp_path)
    assert list(raw.class_names) == ["yaleB11", "yaleB39"]
    assert [raw.class_names[v] for v in raw.labels] == [subject for subject, _ in rows]
    assert raw.attributes["pose"].tolist() == [pose for _, pose in rows]
