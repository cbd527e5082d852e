"""BIWI: yaw / pitch / roll each in 5 equal-frequency bins, subject-disjoint splits."""

from __future__ import annotations

import numpy as np

from tests.support.source_fixtures.biwi import FRAMES, SUBJECTS, write_biwi
from tests.support.source_fixtures.read_back import convert_fixture, split_by_stream


def test_biwi_bins_each_angle_and_keeps_subjects(tmp_path):
    raw, expected = convert_fixture("biwi", write_biwi, tmp_path)
    assert raw.kind == "multi" and len(raw.class_names) == 15
    labels = raw.labels.astype(int)
    assert len(labels) == len(SUBJECTS) * FRAMES
    blocks = labels.reshape(len(labels), 3, 5)
    assert (blocks.sum(axis=2) == 1).all()  # one bin per angle
    assert (blocks.sum(axis=0) == len(labels) // 5).all()  # equal-frequency bins
    # bins follow the angles: order the rows by each true angle, the bins never go down
    truth = sorted(expected.values(), key=lambda e: e[3])
    subjects = raw.attributes["subject"]
    assert sorted(subjects.tolist()) == sorted(e[3] for e in truth)
    for angle in range(3):
        bins = blocks[:, angle].argmax(axis=1)
        true = np.array([e[angle] for e in sorted(expected.values(), key=lambda e: e[3])])
        order = np.argsort(subjects, kind="stable")
        assert np.all(np.diff(bins[order][np.argsort(true, kind="stable")]) >= 0)
    counts = split_by_stream(raw, "biwi", "nevis22-full").counts
    assert counts == {"train": 16 * FRAMES, "dev": 2 * FRAMES, "dev_test": 2 * FRAMES, "test": 4 * FRAMES}
