"""Mismatch scores of one trial from per-checkpoint measurements, checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from services.store.probes.settings import ProbeSettings
from workers.probe.scores.trial_scores import trial_mismatch


def test_scores_of_a_small_trial_by_hand() -> None:
    # Pretext loss 5, 3, 4, 4 with patience 1: the walk stops at step 2, so c = 2.
    result = trial_mismatch(
        [0, 1, 2, 3],
        fold_losses=[[4.0], [2.0], [3.0], [1.0]],
        fold_errors=[[0.5], [0.3], [0.4], [0.2]],
        pretext_error=[0.6, 0.4, 0.35, 0.3],
        pretext_loss=[5.0, 3.0, 4.0, 4.0],
        settings=ProbeSettings(patience=1),
    )
    assert (result.conv_step, result.converged) == (2, True)
    s = result.scores
    # OFM on losses 4, 2, 3: N = 200, 100, 150 -> OFM = 0, 0, 50.
    assert (s["mofm"], s["cofm"], s["mofm_max"]) == pytest.approx((50 / 3, 50.0, 50.0))
    # SM3 on errors 50, 30, 40 (%): 0, 0, 10.
    assert (s["msm3"], s["csm3"], s["msm3max"]) == pytest.approx((10 / 3, 10.0, 10.0))
    # M3 = 50-60, 30-40, 40-35 -> MM3 = -5.
    assert s["mm3"] == pytest.approx(-5.0)
    assert result.curves["scored_steps"] == [0, 1, 2]
    assert result.curves["ofm"] == pytest.approx([0.0, 0.0, 50.0])
    assert result.curves["m3"] == pytest.approx([-10.0, -10.0, 5.0])
    assert result.spreads["mofm"] == {"plus": 0.0, "minus": 0.0}  # one fold: no spread


def test_irregular_checkpoints_are_interpolated_on_the_step_grid() -> None:
    # Losses 4, 2, 3 at steps 0, 2, 3 -> grid 0..3: 4, 3, 2, 3 -> OFM 0, 0, 0, 50.
    result = trial_mismatch(
        [0, 2, 3],
        [[4.0, 4.0], [2.0, 2.0], [3.0, 3.0]],
        [[0.1, 0.1]] * 3,
        [0.1] * 3,
        [3.0, 2.0, 1.0],
        settings=ProbeSettings(),
    )
    assert (result.conv_step, result.converged) == (3, False)
    assert result.scores["mofm"] == pytest.approx(12.5) and result.scores["cofm"] == pytest.approx(50.0)
    assert result.curves["ofm"] == pytest.approx([0.0, 0.0, 50.0])  # read at steps 0, 2, 3
    assert result.curves["grid_points"] == 4 and result.curves["folds"] == 2


def test_folds_give_a_spread_around_the_fold_mean() -> None:
    result = trial_mismatch(
        [0, 1], [[1.0, 1.0], [1.0, 1.0]], [[0.5, 0.3], [0.3, 0.5]], [0.4, 0.4], [2.0, 1.0], settings=ProbeSettings()
    )
    # Fold SM3 curves: (0, 0) and (0, 20) -> fold-mean errors 40, 40 -> MSM3 0; per fold 0 and 10.
    assert result.scores["msm3"] == 0.0
    assert result.spreads["msm3"] == {"plus": pytest.approx(10.0), "minus": 0.0}


def test_a_probe_never_better_than_untrained_has_infinite_ofm() -> None:
    result = trial_mismatch(
        [0, 1, 2], [[1.0], [2.0], [1.5]], [[0.2]] * 3, [0.2] * 3, [3.0, 2.0, 1.0], settings=ProbeSettings()
    )
    assert math.isinf(result.scores["mofm"]) and math.isinf(result.scores["mofm_max"])
    assert result.scores["msm3"] == 0.0


def test_without_a_training_curve_the_pretext_error_finds_c() -> None:
    result = trial_mismatch(
        [0, 1, 2, 3, 4],
        [[1.0]] * 5,
        [[0.5]] * 5,
        [0.5, 0.4, 0.45, 0.46, 0.47],
        None,
        settings=ProbeSettings(patience=2),
    )
    assert result.conv_step == 3 and result.curves["pretext_loss_source"] == "pretext_error"
    assert result.curves["pretext_loss"] is None


def test_a_diverged_pretext_loss_counts_as_the_worst_loss() -> None:
    result = trial_mismatch(
        [0, 1, 2], [[1.0]] * 3, [[0.5]] * 3, [0.5] * 3, [2.0, math.inf, 1.0], settings=ProbeSettings(patience=1)
    )
    assert result.conv_step == 1 and result.curves["pretext_loss"] == [2.0, 5.0, 1.0]


def test_empty_measurements_are_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        trial_mismatch([], np.zeros((0, 1)), np.zeros((0, 1)), [], None, settings=ProbeSettings())
