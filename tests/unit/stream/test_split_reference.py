"""The split rules that reproduce NEVIS'22's custom splits, on small synthetic datasets.

Each dataset carries the metadata its rule needs (view-angle bins, subjects, instances,
domains); a dataset without it must be refused with an error that names the field, never
split at random instead.
"""

from __future__ import annotations

import numpy as np
import pytest

from services.core.errors import DatasetFormatError, ManifestError
from workers.stream.adapters.base import GivenSplits
from workers.stream.manifest import SPLITS, SplitRule
from workers.stream.splits import assign_splits

COIL = SplitRule(
    kind="by_attribute",
    attribute="angle_bin",
    values={"train": (70, 71, 0, 1, 2), "dev": (16, 17, 18, 19, 20), "dev_test": (50, 51, 52, 53, 54), "test": "rest"},
)
BIWI = SplitRule(
    kind="by_attribute",
    attribute="subject",
    values={"train": (5, 6, *range(11, 25)), "dev": (2, 7), "dev_test": (3, 9), "test": (1, 4, 8, 10)},
)
NORB = SplitRule(
    kind="by_attribute",
    attribute="instance",
    values={"train": (7, 8, 9), "dev": (4,), "dev_test": (6,), "test": "source_test"},
)
PACS = SplitRule(
    kind="held_out",
    attribute="domain",
    held_out=("sketch",),
    fractions={"train": 0.8, "dev": 0.2},
    test_fractions={"dev_test": 0.5, "test": 0.5},
)
DOMAINNET = SplitRule(kind="held_out_parts", attribute="domain", held_out=("sketch",))
OFFICIAL_VAL = SplitRule(kind="official_val", fractions={"train": 0.8, "dev": 0.2})
VOC2012 = SplitRule(
    kind="official_val", fractions={"train": 0.8, "dev": 0.2}, test_fractions={"dev_test": 0.5, "test": 0.5}
)
LFW = SplitRule(kind="per_class_counts", counts={"dev": 1, "dev_test": 1, "test": 2}, pick="last")
BRODATZ = SplitRule(kind="per_class_counts", counts={"dev": 1, "dev_test": 1, "test": 2}, pick="random")


def _assert_partition(rows, n: int) -> None:
    everything = np.concatenate([rows[s] for s in SPLITS])
    assert len(everything) == n and set(everything.tolist()) == set(range(n))
    for split in SPLITS:
        assert rows[split].dtype == np.int64 and np.all(np.diff(rows[split]) > 0)


def _coil(objects: int = 4):
    """Rows sorted by (object, view), 72 views each: angle_bin of row i is i % 72."""
    n = 72 * objects
    labels = np.repeat(np.arange(objects, dtype=np.int64), 72)
    return labels, {"angle_bin": np.arange(n, dtype=np.int64) % 72}


def test_view_angle_rule_puts_each_bin_in_the_reference_split():
    labels, attributes = _coil()
    result = assign_splits(labels, rule=COIL, attributes=attributes)

    _assert_partition(result.rows, len(labels))
    assert result.counts == {"train": 20, "dev": 20, "dev_test": 20, "test": 4 * 57}
    bins = attributes["angle_bin"]
    assert set(bins[result.rows["train"]].tolist()) == {70, 71, 0, 1, 2}
    assert set(bins[result.rows["dev"]].tolist()) == {16, 17, 18, 19, 20}
    assert set(bins[result.rows["dev_test"]].tolist()) == {50, 51, 52, 53, 54}
    assert len(set(bins[result.rows["test"]].tolist())) == 57
    # every object has its 5 frontal views in train
    assert np.bincount(labels[result.rows["train"]]).tolist() == [5, 5, 5, 5]
    assert "angle_bin" in result.how


def test_subject_disjoint_rule_keeps_each_subject_in_one_split():
    rng = np.random.RandomState(3)
    subjects = np.repeat(np.arange(1, 25), rng.randint(5, 12, size=24))
    labels = (rng.rand(len(subjects), 15) < 0.3).astype(np.uint8)  # multi-label, like BIWI
    result = assign_splits(labels, rule=BIWI, attributes={"subject": subjects})

    _assert_partition(result.rows, len(subjects))
    found = {s: set(subjects[result.rows[s]].tolist()) for s in SPLITS}
    assert found == {"train": {5, 6, *range(11, 25)}, "dev": {2, 7}, "dev_test": {3, 9}, "test": {1, 4, 8, 10}}


def test_instance_rule_splits_the_source_train_part_and_keeps_its_test_part():
    instances = np.array([4, 6, 7, 8, 9, 0, 1, 2, 3, 5] * 6, dtype=np.int64)
    labels = np.arange(60, dtype=np.int64) % 5
    test = np.flatnonzero(np.isin(instances, [0, 1, 2, 3, 5]))
    given = GivenSplits(train=np.flatnonzero(~np.isin(instances, [0, 1, 2, 3, 5])), test=test)
    result = assign_splits(labels, rule=NORB, given=given, attributes={"instance": instances})

    _assert_partition(result.rows, 60)
    assert np.array_equal(result.rows["test"], test)
    assert set(instances[result.rows["dev"]].tolist()) == {4}
    assert set(instances[result.rows["dev_test"]].tolist()) == {6}
    assert set(instances[result.rows["train"]].tolist()) == {7, 8, 9}


def test_string_attribute_values_work_like_ints():
    poses = np.array(["P00", "P01", "P02", "P03", "P04", "P05", "P06", "P07", "P08"] * 3)
    rule = SplitRule(
        kind="by_attribute",
        attribute="pose",
        values={
            "train": ("P00", "P02", "P03", "P04", "P07"),
            "dev": ("P05",),
            "dev_test": ("P01",),
            "test": ("P06", "P08"),
        },
    )
    result = assign_splits(np.zeros(27, dtype=np.int64), rule=rule, attributes={"pose": poses})

    assert result.counts == {"train": 15, "dev": 3, "dev_test": 3, "test": 6}


@pytest.mark.parametrize(
    ("rule", "field"),
    [(COIL, "angle_bin"), (BIWI, "subject"), (NORB, "instance"), (PACS, "domain"), (DOMAINNET, "domain")],
    ids=["angle", "subject", "instance", "domain", "domain-parts"],
)
def test_missing_metadata_is_an_error_naming_the_field_not_a_random_draw(rule, field):
    labels = np.arange(72, dtype=np.int64) % 4
    given = GivenSplits(train=np.arange(0, 60), test=np.arange(60, 72))
    with pytest.raises(DatasetFormatError, match=f"'{field}'") as caught:
        assign_splits(labels, rule=rule, given=given, attributes={"other": labels}, dataset="Dataset 'nevis:x'")
    message = str(caught.value)
    assert "nevis:x" in message and "attributes" in message


def test_values_the_rule_does_not_place_are_an_error():
    subjects = np.array([1, 2, 3, 4, 7, 8, 9, 10, 5, 6, 99])
    with pytest.raises(DatasetFormatError, match=r"\[99\]"):
        assign_splits(np.zeros(11, dtype=np.int64), rule=BIWI, attributes={"subject": subjects})


def test_listed_values_no_row_has_are_an_error():
    labels, attributes = _coil()
    without_dev = np.where(np.isin(attributes["angle_bin"], [16, 17]), 30, attributes["angle_bin"])
    with pytest.raises(DatasetFormatError, match="no row has"):
        assign_splits(labels, rule=COIL, attributes={"angle_bin": without_dev})


def test_ints_in_the_rule_do_not_match_string_attributes():
    labels, attributes = _coil()
    as_text = attributes["angle_bin"].astype(str)
    with pytest.raises(DatasetFormatError, match="angle_bin"):
        assign_splits(labels, rule=COIL, attributes={"angle_bin": as_text})


def _domains(n_per: int = 50, classes: int = 5):
    domains = np.repeat(np.array(["photo", "art_painting", "cartoon", "sketch"]), n_per)
    labels = np.tile(np.arange(classes, dtype=np.int64), len(domains) // classes)
    return labels, domains


def test_held_out_domain_goes_only_to_dev_test_and_test():
    labels, domains = _domains()
    result = assign_splits(labels, rule=PACS, attributes={"domain": domains})

    _assert_partition(result.rows, len(labels))
    assert set(domains[result.rows["dev_test"]]) == {"sketch"}
    assert set(domains[result.rows["test"]]) == {"sketch"}
    assert "sketch" not in set(domains[result.rows["train"]]) | set(domains[result.rows["dev"]])
    assert result.counts == {"train": 120, "dev": 30, "dev_test": 25, "test": 25}
    again = assign_splits(labels, rule=PACS, attributes={"domain": domains})
    assert all(np.array_equal(result.rows[s], again.rows[s]) for s in SPLITS)


def test_held_out_draws_depend_on_the_seed():
    labels, domains = _domains()
    a = assign_splits(labels, rule=PACS, attributes={"domain": domains})
    other = SplitRule(**{**PACS.__dict__, "seed": 1})
    b = assign_splits(labels, rule=other, attributes={"domain": domains})
    assert not np.array_equal(a.rows["train"], b.rows["train"])
    assert a.counts == b.counts


def test_a_held_out_domain_that_no_row_has_is_an_error():
    labels, domains = _domains()
    rule = SplitRule(**{**PACS.__dict__, "held_out": ("clipart",)})
    with pytest.raises(DatasetFormatError, match="'clipart'"):
        assign_splits(labels, rule=rule, attributes={"domain": domains})


def test_held_out_parts_follow_the_source_train_and_test_parts():
    labels, domains = _domains(n_per=10, classes=2)
    test = np.arange(40) % 4 == 0
    given = GivenSplits(train=np.flatnonzero(~test), test=np.flatnonzero(test))
    result = assign_splits(labels, rule=DOMAINNET, given=given, attributes={"domain": domains})

    _assert_partition(result.rows, 40)
    sketch = domains == "sketch"
    assert np.array_equal(result.rows["train"], np.flatnonzero(~test & ~sketch))
    assert np.array_equal(result.rows["dev"], np.flatnonzero(test & ~sketch))
    assert np.array_equal(result.rows["dev_test"], np.flatnonzero(~test & sketch))
    assert np.array_equal(result.rows["test"], np.flatnonzero(test & sketch))


def _with_val(n: int = 200):
    labels = np.arange(n, dtype=np.int64) % 4
    return labels, GivenSplits(train=np.arange(0, 100), val=np.arange(100, 140), test=np.arange(140, n))


def test_official_val_draws_train_and_dev_from_train_and_keeps_val_and_test():
    labels, given = _with_val()
    result = assign_splits(labels, rule=OFFICIAL_VAL, given=given)

    _assert_partition(result.rows, 200)
    assert result.counts == {"train": 80, "dev": 20, "dev_test": 40, "test": 60}
    assert np.array_equal(result.rows["dev_test"], given.val)
    assert np.array_equal(result.rows["test"], given.test)
    assert set(result.rows["dev"].tolist()) <= set(range(100))


def test_official_val_needs_a_val_list():
    labels = np.zeros(10, dtype=np.int64)
    given = GivenSplits(train=np.arange(8), test=np.arange(8, 10))
    with pytest.raises(DatasetFormatError, match="'val'"):
        assign_splits(labels, rule=OFFICIAL_VAL, given=given)
    with pytest.raises(DatasetFormatError, match="official_val"):
        assign_splits(labels, rule=OFFICIAL_VAL)


def test_official_val_with_test_fractions_halves_val_when_the_source_test_is_unlabelled():
    labels, given = _with_val()
    no_test = GivenSplits(train=given.train, val=np.arange(100, 200), test=np.array([], dtype=np.int64))
    result = assign_splits(labels, rule=VOC2012, given=no_test)

    _assert_partition(result.rows, 200)
    assert result.counts == {"train": 80, "dev": 20, "dev_test": 50, "test": 50}
    with pytest.raises(DatasetFormatError, match="60 test rows"):
        assign_splits(labels, rule=VOC2012, given=given)


def test_per_class_last_rows_go_to_dev_dev_test_and_test_like_lfw():
    labels = np.array([0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1], dtype=np.int64)
    result = assign_splits(labels, rule=LFW)

    _assert_partition(result.rows, len(labels))
    zeros, ones = np.flatnonzero(labels == 0), np.flatnonzero(labels == 1)
    assert set(result.rows["test"].tolist()) == {*zeros[-2:], *ones[-2:]}
    assert set(result.rows["dev_test"].tolist()) == {zeros[-3], ones[-3]}
    assert set(result.rows["dev"].tolist()) == {zeros[-4], ones[-4]}
    assert set(result.rows["train"].tolist()) == {*zeros[:-4], *ones[:-4]}


def test_per_class_random_counts_give_every_class_the_same_counts_like_brodatz():
    labels = np.repeat(np.arange(6, dtype=np.int64), 9)
    result = assign_splits(labels, rule=BRODATZ)

    _assert_partition(result.rows, 54)
    for split, count in {"train": 5, "dev": 1, "dev_test": 1, "test": 2}.items():
        assert np.bincount(labels[result.rows[split]], minlength=6).tolist() == [count] * 6
    assert not np.array_equal(result.rows["test"], assign_splits(labels, rule=LFW).rows["test"])


def test_a_class_too_small_for_the_counts_is_an_error():
    labels = np.array([0] * 6 + [1] * 4, dtype=np.int64)
    with pytest.raises(DatasetFormatError, match="class 1 has 4 rows"):
        assign_splits(labels, rule=LFW)


def test_a_random_draw_over_the_source_train_part_leaves_its_test_rows_out():
    labels, given = _with_val()
    rule = SplitRule(
        kind="random", pool="source_train", fractions={"train": 0.56, "dev": 0.12, "dev_test": 0.12, "test": 0.2}
    )
    result = assign_splits(labels, rule=rule, given=given)

    drawn = np.concatenate([result.rows[s] for s in SPLITS])
    assert sorted(drawn.tolist()) == list(range(140))  # train + val, not the source test
    assert sum(result.counts.values()) == 140 and result.counts["test"] == 28
    assert "60 test rows left out" in result.how
    with pytest.raises(DatasetFormatError, match="source_train"):
        assign_splits(labels, rule=rule)


def test_train_only_rows_stay_in_train_and_the_rest_is_drawn_like_interact():
    labels = np.repeat(np.arange(3, dtype=np.int64), 30)
    image_set = np.array((["real"] * 25 + ["illustration"] * 5) * 3)
    rule = SplitRule(
        kind="random",
        attribute="image_set",
        train_only=("illustration",),
        fractions={"train": 0.56, "dev": 0.12, "dev_test": 0.12, "test": 0.2},
    )
    result = assign_splits(labels, rule=rule, attributes={"image_set": image_set})

    _assert_partition(result.rows, 90)
    illustrations = np.flatnonzero(image_set == "illustration")
    assert set(illustrations.tolist()) <= set(result.rows["train"].tolist())
    assert result.counts == {"train": 15 + 42, "dev": 9, "dev_test": 9, "test": 15}
    with pytest.raises(DatasetFormatError, match="'image_set'"):
        assign_splits(labels, rule=rule)


def test_malformed_test_fractions_are_a_manifest_error():
    labels, domains = _domains()
    rule = SplitRule(**{**PACS.__dict__, "test_fractions": {"dev_test": 0.5, "test": 0.6}})
    with pytest.raises(ManifestError, match="test_fractions"):
        assign_splits(labels, rule=rule, attributes={"domain": domains})
