"""E's interval kept in the object store (services/store/runs/interval_cache.py): read back
equal, keyed by what it depends on, and an unreadable or foreign object is no interval."""

from __future__ import annotations

import numpy as np
import pytest

from services.core.predictions import TaskPredictions, decode, encode
from services.core.uncertainty import error_interval
from services.store.objects import LocalObjectStore
from services.store.runs.interval_cache import interval_key, keep_interval, load_interval
from services.store.runs.predictions import predictions_key


def test_a_kept_interval_reads_back_equal(tmp_path) -> None:
    store = LocalObjectStore(tmp_path / "store")
    labels = np.arange(30) % 3
    result = error_interval([TaskPredictions("single", (labels + (labels == 0)) % 3, labels)], resamples=50)
    key = interval_key(4, [(1, 1), (2, 3)], resamples=50, seed=0)
    assert load_interval(store, key) is None
    keep_interval(store, key, result)
    assert load_interval(store, key) == result


def test_the_key_changes_with_attempts_resamples_and_seed() -> None:
    keys = {
        interval_key(4, [(1, 1)], resamples=1000, seed=0),
        interval_key(4, [(1, 2)], resamples=1000, seed=0),
        interval_key(4, [(1, 1)], resamples=999, seed=0),
        interval_key(4, [(1, 1)], resamples=1000, seed=1),
    }
    assert len(keys) == 4 and all(k.startswith("runs/4/uncertainty/") for k in keys)
    assert predictions_key(4, 2, 3) == "runs/4/task-002/attempt-3/predictions.npz"


def test_an_unreadable_object_is_no_interval(tmp_path) -> None:
    store = LocalObjectStore(tmp_path / "store")
    key = interval_key(1, [(1, 1)], resamples=10, seed=0)
    store.put_bytes(key, b"{not json")
    assert load_interval(store, key) is None


def test_bytes_that_are_not_predictions_are_a_value_error() -> None:
    with pytest.raises(ValueError, match="Not stored task predictions"):
        decode(b"junk")
    blob = encode(np.eye(3), np.arange(3), "single")
    assert decode(blob).error == 0.0
