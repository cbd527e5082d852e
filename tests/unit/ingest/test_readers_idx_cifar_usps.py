"""Readers of the fixed-size sources (MNIST, Fashion-MNIST, CIFAR-10/100, USPS) on tiny
fixtures in their exact layouts: rows, labels, class names and official splits, read back
through ``nevis:<key>``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.source_fixtures.cifar_binary import write_cifar10, write_cifar100
from tests.support.source_fixtures.converted import convert_and_load, image, split_of
from tests.support.source_fixtures.idx_sources import write_idx_source
from tests.support.source_fixtures.tiny import pixels
from tests.support.source_fixtures.usps import write_usps
from workers.ingest.readers.mnist import FASHION


@pytest.mark.parametrize("key", ["mnist", "fashion_mnist"])
def test_idx_sources_keep_the_official_train_and_test(tmp_path: Path, key: str) -> None:
    labels = write_idx_source(tmp_path / "data", key, train=5, test=3)
    raw = convert_and_load(key, tmp_path)
    assert raw.num_examples == 8
    assert raw.labels.tolist() == [*labels["train"].tolist(), *labels["t10k"].tolist()]
    assert split_of(raw) == ["train"] * 5 + ["test"] * 3
    assert raw.given_splits is not None and raw.given_splits.official
    assert len(raw.class_names) == 10
    assert (key == "fashion_mnist") == (raw.class_names == FASHION)
    assert np.array_equal(image(raw, 0)[..., 0], pixels(0, 28, 28, 1))
    assert np.array_equal(image(raw, 5)[..., 0], pixels(100, 28, 28, 1))


def test_cifar10_reads_every_batch_with_names_from_the_meta_file(tmp_path: Path) -> None:
    parts = write_cifar10(tmp_path / "data")
    raw = convert_and_load("cifar10", tmp_path)
    assert raw.labels.tolist() == [v for labels in parts.values() for v in labels]
    assert split_of(raw) == ["train"] * 5 + ["test"] * 2
    assert raw.class_names[0] == "airplane" and len(raw.class_names) == 10
    assert np.array_equal(image(raw, 3), pixels(1000, 32, 32, 3))  # data_batch_2's first record


def test_cifar100_takes_the_fine_label_and_keeps_the_coarse_one(tmp_path: Path) -> None:
    parts = write_cifar100(tmp_path / "data")
    raw = convert_and_load("cifar100", tmp_path)
    pairs = [pair for labels in parts.values() for pair in labels]
    assert raw.labels.tolist() == [fine for _, fine in pairs]
    assert raw.attributes["coarse_label"].tolist() == [coarse for coarse, _ in pairs]
    assert split_of(raw) == ["train", "train", "train", "test"]
    assert raw.class_names[99] == "f99" and len(raw.class_names) == 100
    assert raw.metadata["coarse_label_names"][19] == "c19"
    assert np.array_equal(image(raw, 3), pixels(1000, 32, 32, 3))  # test.bin's first record


def test_usps_rescales_libsvm_values_to_pixels(tmp_path: Path) -> None:
    parts = write_usps(tmp_path / "data")
    raw = convert_and_load("usps", tmp_path)
    rows = [row for part in parts.values() for row in part]
    assert raw.labels.tolist() == [label - 1 for label, _ in rows]
    assert split_of(raw) == ["train"] * 3 + ["test"] * 2
    first = image(raw, 0)[..., 0]
    assert first.shape == (16, 16)
    assert first.ravel()[:3].tolist() == [0, 127, 255]
    expected = ((np.round(rows[1][1], 6) + 1) / 2 * 255).astype(np.uint8).reshape(16, 16)
    assert np.abs(image(raw, 1)[..., 0].astype(int) - expected).max() <= 1
