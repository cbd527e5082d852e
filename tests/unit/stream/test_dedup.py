"""Exact-duplicate removal: no image in two splits, test wins over train."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.stream.dedup import dedup_splits, image_hashes
from workers.stream.manifest import SPLITS
from workers.stream.splits import SplitAssignment


def _images(codes: list[int]) -> np.ndarray:
    """Tiny images whose pixels all equal the code: equal codes are exact duplicates."""
    return np.array(codes, dtype=np.uint8)[:, None, None, None].repeat(4, 1).repeat(4, 2)


def _assignment(**rows: list[int]) -> SplitAssignment:
    return SplitAssignment(rows={s: np.array(rows.get(s, []), dtype=np.int64) for s in SPLITS}, how="test")


def test_a_duplicate_of_a_test_image_is_dropped_from_train():
    # rows:        0  1  2  3  4  5
    images = _images([10, 11, 12, 13, 10, 14])
    kept, stats = dedup_splits(images, _assignment(train=[0, 1], dev=[2], dev_test=[3], test=[4, 5]))
    assert kept.rows["test"].tolist() == [4, 5]
    assert kept.rows["train"].tolist() == [1]
    assert stats.removed == {"train": 1, "dev": 0, "dev_test": 0, "test": 0}
    assert stats.removed_across["train"] == 1


def test_priority_is_test_then_dev_test_then_dev_then_train():
    images = _images([7, 7, 7, 7])
    kept, stats = dedup_splits(images, _assignment(train=[0], dev=[1], dev_test=[2], test=[3]))
    assert {s: kept.rows[s].tolist() for s in SPLITS} == {"train": [], "dev": [], "dev_test": [], "test": [3]}
    images = _images([7, 7, 7, 8])
    kept, _ = dedup_splits(images, _assignment(train=[0], dev=[1], dev_test=[2], test=[3]))
    assert kept.rows["dev_test"].tolist() == [2] and kept.rows["dev"].tolist() == []


def test_duplicates_inside_one_split_keep_the_lowest_row():
    images = _images([5, 6, 5, 5])
    kept, stats = dedup_splits(images, _assignment(train=[3, 0, 1, 2]))
    assert kept.rows["train"].tolist() == [0, 1]
    assert stats.removed_within["train"] == 2 and stats.total_removed == 2


def test_data_without_duplicates_is_left_alone():
    images = _images(list(range(20)))
    original = _assignment(train=list(range(10)), dev=[10, 11], dev_test=[12, 13], test=list(range(14, 20)))
    kept, stats = dedup_splits(images, original)
    assert stats.total_removed == 0
    assert all(np.array_equal(kept.rows[s], original.rows[s]) for s in SPLITS)
    assert kept.how == original.how


@settings(max_examples=60, deadline=None)
@given(
    codes=st.lists(st.integers(0, 6), min_size=1, max_size=40),
    split_of=st.lists(st.sampled_from(SPLITS), min_size=40, max_size=40),
)
def test_after_dedup_no_image_is_in_two_splits_and_test_keeps_all_its_images(codes, split_of):
    images = _images(codes)
    rows = {s: [i for i in range(len(codes)) if split_of[i] == s] for s in SPLITS}
    kept, stats = dedup_splits(images, _assignment(**rows))
    hashes = image_hashes(images)
    owners: dict[bytes, str] = {}
    for split in SPLITS:
        for row in kept.rows[split]:
            assert hashes[row] not in owners  # not in another split, nor twice in this one
            owners[hashes[row]] = split
    # every distinct image survives once, and test loses only in-split repeats
    assert set(owners) == set(hashes)
    assert {hashes[r] for r in kept.rows["test"]} == {hashes[r] for r in rows["test"]}
    assert stats.total_removed == len(codes) - len(set(codes))
