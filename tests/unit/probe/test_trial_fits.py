"""Probe fits batched over a trial's checkpoints, and the features handed over to them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from services.store.objects import open_store
from services.store.probes.settings import ProbeSettings
from workers.probe.fits.probes import fit_probes, fit_probes_batched
from workers.probe.runtime.measure import TargetFeatures
from workers.probe.runtime.trial_fits import features_key, fit_trial, load_features, save_features

SETTINGS = ProbeSettings(folds=3, mlp_hidden=16, mlp_steps=40, linear_max_iter=60)


def _features(steps: int, n: int = 90, d: int = 12, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features that get more informative with the step, as a trained backbone's would."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 3
    signal = rng.normal(size=(3, d))[labels]
    sets = np.stack([rng.normal(size=(n, d)) + 0.8 * g * signal for g in range(steps)])
    return sets.astype(np.float32), labels


def test_a_batched_fit_gives_each_checkpoint_its_own_fit() -> None:
    sets, labels = _features(4)
    batched = fit_probes_batched(sets, labels, num_classes=3, settings=SETTINGS)
    assert len(batched) == 4
    for x, together in zip(sets, batched):
        alone = fit_probes(x, labels, num_classes=3, settings=SETTINGS)
        for kind in ("mlp2", "mlp3"):  # independent Adam steps from the same start: identical
            np.testing.assert_allclose(together[kind].losses, alone[kind].losses, rtol=1e-4, atol=1e-5)
            np.testing.assert_array_equal(together[kind].errors, alone[kind].errors)
        # L-BFGS shares its stopping rule over the batch: the same convex optimum, nearly.
        np.testing.assert_allclose(together["linear"].losses, alone["linear"].losses, rtol=2e-2)
        assert np.abs(together["linear"].errors - alone["linear"].errors).max() <= 0.05
    errors = [fit["linear"].error for fit in batched]
    assert errors[-1] < errors[0]  # more signal, lower held-out error


def test_fit_trial_fits_every_target_step_and_kind_and_batches_by_feature_shape() -> None:
    sets, labels = _features(3)
    wide, _ = _features(3, d=20, seed=1)
    features = {
        0: {2: TargetFeatures(sets[0], labels, 3), 1: TargetFeatures(wide[0], labels, 3)},
        5: {2: TargetFeatures(sets[1], labels, 3), 1: TargetFeatures(wide[1][:, :15], labels, 3)},
        9: {2: TargetFeatures(sets[2], labels, 3)},
    }
    fits = fit_trial(features, SETTINGS)
    assert [(f.target_order, f.step, f.kind) for f in fits] == [
        (1, 0, "linear"),
        (1, 0, "mlp2"),
        (1, 0, "mlp3"),
        (1, 5, "linear"),
        (1, 5, "mlp2"),
        (1, 5, "mlp3"),
        (2, 0, "linear"),
        (2, 0, "mlp2"),
        (2, 0, "mlp3"),
        (2, 5, "linear"),
        (2, 5, "mlp2"),
        (2, 5, "mlp3"),
        (2, 9, "linear"),
        (2, 9, "mlp2"),
        (2, 9, "mlp3"),
    ]
    assert all(len(f.scores.losses) == 3 and f.num_examples == 90 and f.num_classes == 3 for f in fits)


def test_features_round_trip_through_the_store(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    sets, labels = _features(1)
    multi = (np.arange(90)[:, None] % np.array([2, 3]) == 0).astype(np.int64)
    key = features_key("abc", 7)
    assert load_features(store, key) is None
    save_features(store, key, {4: TargetFeatures(sets[0], labels, 3), 1: TargetFeatures(sets[0], multi, 2)})
    back = load_features(store, key)
    assert back is not None and sorted(back) == [1, 4]
    np.testing.assert_array_equal(back[4].features, sets[0])
    np.testing.assert_array_equal(back[1].labels, multi)
    assert (back[4].num_classes, back[1].num_classes) == (3, 2)


def test_an_empty_trial_has_no_fits() -> None:
    assert fit_trial({}, SETTINGS) == []
    with pytest.raises(ValueError):
        fit_probes_batched(np.zeros((2, 1, 4), dtype=np.float32), np.array([0]), num_classes=2, settings=SETTINGS)
