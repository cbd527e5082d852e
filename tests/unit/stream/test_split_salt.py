"""A deployment's secret split salt: drawn splits change with it, official ones do not."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from services.core.config import Settings
from services.store.objects import LocalObjectStore
from workers.stream.adapters.base import GivenSplits
from workers.stream.manifest import SplitRule
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import prepare_stream
from workers.stream.shards import load_index, read_split
from workers.stream.split_salt import salt_digest
from workers.stream.splits import assign_splits

SALT = "a-deployment-secret-0123456789"
OTHER = "another-deployment-secret-9876"
RANDOM = SplitRule(kind="random", fractions={"train": 0.56, "dev": 0.12, "dev_test": 0.12, "test": 0.20}, seed=0)
OFFICIAL = SplitRule(kind="official_test", fractions={"train": 0.7, "dev": 0.15, "dev_test": 0.15}, seed=0)
LABELS = np.random.RandomState(1).randint(0, 5, size=600).astype(np.int64)


def _test_rows(rule: SplitRule, salt: str, given: GivenSplits | None = None) -> np.ndarray:
    return assign_splits(LABELS, rule=rule, given=given, dataset="Dataset 'x:y'", salt=salt).rows["test"]


def test_a_salt_changes_the_drawn_test_split_and_keeps_it_stable():
    public = _test_rows(RANDOM, "")
    salted = _test_rows(RANDOM, SALT)
    assert len(np.intersect1d(public, salted)) < 0.5 * len(public)  # a new draw, not a tweak
    assert np.array_equal(salted, _test_rows(RANDOM, SALT))
    assert not np.array_equal(salted, _test_rows(RANDOM, OTHER))
    assert np.array_equal(public, assign_splits(LABELS, rule=RANDOM).rows["test"])
    counts = {s: len(r) for s, r in assign_splits(LABELS, rule=RANDOM, salt=SALT).rows.items()}
    assert counts == {s: len(r) for s, r in assign_splits(LABELS, rule=RANDOM).rows.items()}


def test_an_official_test_split_stays_official_under_a_salt():
    rows = np.random.RandomState(5).permutation(len(LABELS))
    given = GivenSplits(train=np.sort(rows[120:]), test=np.sort(rows[:120]), official=True)
    assert np.array_equal(_test_rows(OFFICIAL, SALT, given), np.sort(rows[:120]))
    salted = assign_splits(LABELS, rule=OFFICIAL, given=given, salt=SALT)
    assert not np.array_equal(
        salted.rows["dev_test"], assign_splits(LABELS, rule=OFFICIAL, given=given).rows["dev_test"]
    )


def test_prepare_records_a_digest_never_the_salt_and_redraws_for_a_new_salt(tmp_path):
    mini = load_stream("mini")
    one = replace(mini, tasks=mini.tasks[:1])
    dataset = one.tasks[0].dataset
    public_store = LocalObjectStore(tmp_path / "public")
    prepare_stream(one, public_store, image_size=8, offline_dir=None)
    store = LocalObjectStore(tmp_path / "salted")
    prepare_stream(one, store, image_size=8, offline_dir=None, split_salt=SALT)
    index = load_index(store, dataset, 8)
    public = load_index(public_store, dataset, 8)
    assert index is not None and public is not None
    assert index.split_salt == salt_digest(SALT) and public.split_salt == ""
    raw = store.get_bytes(index.key)
    assert SALT.encode() not in raw and b"split_salt" not in public_store.get_bytes(public.key)
    salted_test = read_split(store, index, "test")[0]
    public_test = read_split(public_store, public, "test")[0]
    assert salted_test.shape == public_test.shape  # same counts, other images
    assert not np.array_equal(salted_test, public_test)
    again = prepare_stream(one, store, image_size=8, offline_dir=None, split_salt=SALT)
    assert [d.status for d in again.datasets] == ["present"]
    moved = prepare_stream(one, store, image_size=8, offline_dir=None, split_salt=OTHER)
    assert [d.status for d in moved.datasets] == ["rebuilt"]
    assert load_index(store, dataset, 8).split_salt == salt_digest(OTHER)


def test_the_salt_is_never_listed_and_a_short_one_is_refused():
    settings = Settings(split_salt=SALT)
    assert settings.masked()["NEVIS_SPLIT_SALT"] == "***"
    assert Settings().masked()["NEVIS_SPLIT_SALT"] == ""
    with pytest.raises(ValueError, match="at least 16"):
        Settings(split_salt="short")


def test_doctor_says_which_salt_splits_and_never_shows_one():
    from services.cli.doctor_checks import check_split_salt

    assert "deployment's own" in check_split_salt(Settings(), "production").found
    assert "public" in check_split_salt(Settings(), "development").found
    present = check_split_salt(Settings(split_salt=SALT), "production")
    assert present.ok and SALT not in present.found


def test_the_salt_travels_as_a_credential_and_never_reaches_learner_processes(tmp_path, monkeypatch):
    from services.core.credentials import read_secrets_path
    from workers.trainer.ray_env import learner_env

    (tmp_path / "NEVIS_SPLIT_SALT").write_text(SALT)
    assert read_secrets_path(tmp_path) == {"NEVIS_SPLIT_SALT": SALT}  # a Secret may hold it
    monkeypatch.setenv("NEVIS_SPLIT_SALT", SALT)
    assert learner_env()["NEVIS_SPLIT_SALT"] == ""
