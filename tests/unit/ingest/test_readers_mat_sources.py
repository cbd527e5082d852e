"""Oxford Flowers 102 / 17, SVHN and Caltech-101 silhouettes: labels and splits in .mat files."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.source_fixtures.mat_sources import (
    SILHOUETTE_NAMES,
    write_oxford_flowers102,
    write_oxford_flowers_17,
    write_silhouettes_28,
    write_svhn_cropped,
)
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream


@pytest.mark.parametrize(
    "key, writer, classes",
    [
        ("oxford_flowers102", write_oxford_flowers102, 102),
        ("oxford_flowers_17", write_oxford_flowers_17, 17),
        ("svhn_cropped", write_svhn_cropped, 10),
        ("silhouettes_28", write_silhouettes_28, len(SILHOUETTE_NAMES)),
    ],
)
def test_mat_sources(tmp_path, key, writer, classes):
    raw, expected = convert_fixture(key, writer, tmp_path)
    assert len(raw.class_names) == classes
    assert row_facts(raw) == expected_facts(expected)
    counts = split_by_stream(raw, key, "nevis22-full").counts
    assert counts["test"] == sum(s == "test" for _, s in expected.values())


def test_silhouettes_are_black_and_white_28_by_28(tmp_path):
    raw, _ = convert_fixture("silhouettes_28", write_silhouettes_28, tmp_path)
    first = np.asarray(raw.images[0])
    assert first.shape[:2] == (28, 28) and set(np.unique(first)) <= {0, 255}
