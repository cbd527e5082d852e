"""Deterministic, stratified splits that follow the manifest's rule."""

from __future__ import annotations

import numpy as np
import pytest

from services.core.errors import DatasetFormatError, ManifestError
from workers.stream.adapters.base import GivenSplits
from workers.stream.manifest import SPLITS, SplitRule
from workers.stream.splits import assign_splits

RANDOM = SplitRule(kind="random", fractions={"train": 0.56, "dev": 0.12, "dev_test": 0.12, "test": 0.20}, seed=0)
OFFICIAL = SplitRule(kind="official_test", fractions={"train": 0.7, "dev": 0.15, "dev_test": 0.15}, seed=0)
PROVIDED = SplitRule(kind="provided", seed=0)


def _labels(n: int = 1000, classes: int = 7, seed: int = 1) -> np.ndarray:
    """Unbalanced labels: class c is about (c + 1) times as common as class 0."""
    rng = np.random.RandomState(seed)
    weights = np.arange(1, classes + 1, dtype=float)
    return rng.choice(classes, size=n, p=weights / weights.sum()).astype(np.int64)


def _given(n: int, *, val: bool = True) -> GivenSplits:
    rows = np.random.RandomState(5).permutation(n)
    test, rest = rows[: n // 5], rows[n // 5 :]
    if not val:
        return GivenSplits(train=np.sort(rest), test=np.sort(test), official=True)
    return GivenSplits(train=np.sort(rest[n // 5 :]), val=np.sort(rest[: n // 5]), test=np.sort(test))


def _assert_partition(rows: dict[str, np.ndarray], n: int) -> None:
    everything = np.concatenate([rows[s] for s in SPLITS])
    assert len(everything) == n and set(everything.tolist()) == set(range(n))
    for split in SPLITS:
        assert np.all(np.diff(rows[split]) > 0)  # sorted, no repeats


@pytest.mark.parametrize(
    ("rule", "given"),
    [(RANDOM, None), (OFFICIAL, "given"), (PROVIDED, "given")],
    ids=["random", "official_test", "provided"],
)
def test_same_input_gives_the_same_split(rule, given):
    labels = _labels()
    given = _given(len(labels)) if given else None
    first = assign_splits(labels, rule=rule, given=given)
    second = assign_splits(labels.copy(), rule=rule, given=given)
    for split in SPLITS:
        assert np.array_equal(first.rows[split], second.rows[split])
    _assert_partition(first.rows, len(labels))


def test_a_small_random_split_matches_its_golden_value():
    # numpy's RandomState stream is frozen, so this pins the split on every machine.
    labels = np.array([0, 1, 2] * 4 + [0, 0], dtype=np.int64)
    rule = SplitRule(kind="random", fractions={"train": 0.5, "dev": 0.25, "dev_test": 0.0, "test": 0.25}, seed=7)
    rows = assign_splits(labels, rule=rule).rows
    assert {s: rows[s].tolist() for s in SPLITS} == {
        "train": [0, 2, 4, 5, 9, 10, 13],
        "dev": [1, 3, 6, 11],
        "dev_test": [],
        "test": [7, 8, 12],
    }


def test_another_seed_gives_another_split():
    labels = _labels()
    other = SplitRule(kind="random", fractions=RANDOM.fractions, seed=1)
    first = assign_splits(labels, rule=RANDOM).rows["test"]
    second = assign_splits(labels, rule=other).rows["test"]
    assert not np.array_equal(first, second)


def test_random_split_sizes_are_within_one_of_the_fractions():
    labels = _labels(n=1003)
    counts = assign_splits(labels, rule=RANDOM).counts
    for split, fraction in RANDOM.fractions.items():
        assert abs(counts[split] - 1003 * fraction) <= 1


def test_random_split_is_stratified_per_class():
    labels = _labels(n=2000, classes=9)
    rows = assign_splits(labels, rule=RANDOM).rows
    for c in range(9):
        n_c = int((labels == c).sum())
        for split, fraction in RANDOM.fractions.items():
            in_split = int((labels[rows[split]] == c).sum())
            assert abs(in_split - n_c * fraction) < 2, (c, split)


def test_multi_label_data_is_split_by_the_fractions_without_stratification():
    labels = (np.random.RandomState(0).rand(500, 5) > 0.5).astype(np.uint8)
    assignment = assign_splits(labels, rule=RANDOM)
    _assert_partition(assignment.rows, 500)
    assert assignment.counts == {"train": 280, "dev": 60, "dev_test": 60, "test": 100}


def test_official_test_keeps_the_source_test_set_and_draws_the_rest():
    labels = _labels()
    given = _given(len(labels), val=False)
    assignment = assign_splits(labels, rule=OFFICIAL, given=given)
    assert np.array_equal(assignment.rows["test"], given.test)
    pool = len(given.train)
    for split in ("train", "dev", "dev_test"):
        assert abs(assignment.counts[split] - pool * OFFICIAL.fractions[split]) <= 1
    _assert_partition(assignment.rows, len(labels))


def test_official_test_draws_from_train_and_val_when_both_are_given():
    labels = _labels()
    given = _given(len(labels))
    rows = assign_splits(labels, rule=OFFICIAL, given=given).rows
    assert np.array_equal(rows["test"], given.test)
    drawn = np.concatenate([rows["train"], rows["dev"], rows["dev_test"]])
    assert set(drawn.tolist()) == set(given.pool.tolist())


def test_provided_keeps_train_and_test_and_halves_val():
    labels = _labels()
    given = _given(len(labels))
    assignment = assign_splits(labels, rule=PROVIDED, given=given)
    rows = assignment.rows
    assert np.array_equal(rows["train"], given.train)
    assert np.array_equal(rows["test"], given.test)
    halves = np.sort(np.concatenate([rows["dev"], rows["dev_test"]]))
    assert np.array_equal(halves, given.val)
    assert abs(len(rows["dev"]) - len(rows["dev_test"])) <= 1
    for c in range(7):  # the halves are stratified too
        assert abs(int((labels[rows["dev"]] == c).sum()) - int((labels[rows["dev_test"]] == c).sum())) <= 2


def test_provided_without_val_draws_dev_sets_from_train():
    labels = _labels()
    given = _given(len(labels), val=False)
    rows = assign_splits(labels, rule=PROVIDED, given=given).rows
    assert np.array_equal(rows["test"], given.test)
    assert len(rows["dev"]) > 0 and len(rows["dev_test"]) > 0


@pytest.mark.parametrize("rule", [OFFICIAL, PROVIDED], ids=["official_test", "provided"])
def test_rules_that_need_source_lists_refuse_data_without_them(rule):
    with pytest.raises(DatasetFormatError, match=rule.kind):
        assign_splits(_labels(), rule=rule, given=None)


@pytest.mark.parametrize(
    "fractions",
    [
        {"train": 0.5, "dev": 0.5, "dev_test": 0.5, "test": 0.0},
        {"train": 1.2, "dev": -0.2, "dev_test": 0.0, "test": 0.0},
        {"train": 0.9, "validation": 0.1},
    ],
    ids=["sum-above-one", "negative", "unknown-split"],
)
def test_malformed_fractions_are_a_manifest_error(fractions):
    rule = SplitRule(kind="random", fractions=fractions)
    with pytest.raises(ManifestError, match="fractions"):
        assign_splits(_labels(), rule=rule)
