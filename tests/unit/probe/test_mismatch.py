"""Golden values for METRICS.md §2: M3, SM3, OFM, the integer grid, c, and the k-fold versions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workers.probe.scores.probe_metrics import (
    MetricInputError,
    cofm,
    convergence_epoch,
    csm3,
    interpolate_integer_epochs,
    m3,
    mm3,
    mm3_cv,
    mofm,
    mofm_max,
    msm3,
    msm3max,
    msm3max_index,
    ofm_curve,
    ofm_normalize,
    sm3,
    soft_mismatch_cv,
)

INF = math.inf


# --- M3 / MM3 ------------------------------------------------------------------------------


def test_m3_is_target_minus_pretext_with_sign_kept():
    assert m3([50, 40, 45], [60, 30, 20]).tolist() == [-10.0, 10.0, 25.0]
    assert mm3([50, 40, 45], [60, 30, 20]) == pytest.approx(25 / 3, abs=1e-15)


def test_m3_returns_float64_array():
    out = m3(np.array([1, 2], dtype=np.int32), (1.5, 0.5))
    assert out.dtype == np.float64
    assert out.tolist() == [-0.5, 1.5]


def test_m3_rejects_curves_of_different_lengths():
    with pytest.raises(
        ValueError,
        match=r"The 'pretext' parameter of m3 must be a curve of the same "
        r"length as 'target' \(3\)\. Got length 2 instead\.",
    ):
        m3([1, 2, 3], [1, 2])


# --- SM3 family ----------------------------------------------------------------------------


def test_sm3_is_distance_above_best_so_far():
    assert sm3([5, 3, 4, 2, 6]).tolist() == [0.0, 0.0, 1.0, 0.0, 4.0]
    assert msm3([5, 3, 4, 2, 6]) == 1.0
    assert csm3([5, 3, 4, 2, 6]) == 4.0
    assert msm3max([5, 3, 4, 2, 6]) == 4.0
    assert msm3max_index([5, 3, 4, 2, 6]) == 4


def test_msm3max_index_is_the_first_index_of_the_max():
    assert sm3([3, 1, 2, 0, 1]).tolist() == [0.0, 0.0, 1.0, 0.0, 1.0]
    assert msm3max_index([3, 1, 2, 0, 1]) == 2
    assert msm3max_index([1, 2, 3]) == 2  # rising curve: SM3 = 0, 1, 2


def test_csm3_is_the_value_at_the_last_checkpoint_of_the_cut_curve():
    assert csm3([5, 3, 4]) == 1.0
    assert csm3([5, 3, 4, 2]) == 0.0


@pytest.mark.parametrize("func", [msm3, csm3, msm3max, mofm, cofm, mofm_max])
def test_constant_and_single_point_curves_score_zero(func):
    assert func([7.0, 7.0, 7.0]) == 0.0
    assert func([3.0]) == 0.0


def test_monotone_decreasing_curve_has_no_mismatch():
    assert sm3([9, 7, 4, 1]).tolist() == [0.0] * 4
    assert ofm_curve([9, 7, 4, 1]).tolist() == [0.0] * 4


# --- OFM family ----------------------------------------------------------------------------


def test_ofm_normalize_regular_case_divides_by_x0_minus_min():
    assert ofm_normalize([4, 2, 3, 2.5]).tolist() == [200.0, 100.0, 150.0, 125.0]


def test_ofm_regular_case_golden_values():
    curve = [4.0, 2.0, 3.0, 2.5]  # x_0 - min = 2
    assert ofm_curve(curve).tolist() == [0.0, 0.0, 50.0, 25.0]
    assert mofm(curve) == 18.75
    assert cofm(curve) == 25.0
    assert mofm_max(curve) == 50.0


def test_ofm_is_sm3_of_the_normalised_curve():
    rng = np.random.default_rng(3)
    curve = rng.uniform(0.5, 3.0, size=30)
    curve[0] = 3.5  # regular case
    np.testing.assert_allclose(ofm_curve(curve), sm3(ofm_normalize(curve)), rtol=1e-12, atol=1e-12)


def test_ofm_is_invariant_to_scaling_the_loss():
    curve = np.array([4.0, 2.0, 3.0, 2.5, 2.2])
    np.testing.assert_allclose(ofm_curve(curve * 7.5), ofm_curve(curve), rtol=1e-14)


def test_ofm_special_case_is_zero_where_equal_and_inf_where_worse():
    assert ofm_normalize([1.0, 1.0, 2.0]).tolist() == [0.0, 0.0, INF]
    assert ofm_curve([1.0, 1.0, 2.0]).tolist() == [0.0, 0.0, INF]
    assert mofm([1.0, 1.0, 2.0]) == INF
    assert mofm_max([1.0, 1.0, 2.0]) == INF
    assert cofm([1.0, 1.0, 2.0]) == INF


def test_ofm_special_case_c_can_be_zero_while_mean_and_max_are_inf():
    assert ofm_curve([1.0, 2.0, 1.0]).tolist() == [0.0, INF, 0.0]
    assert cofm([1.0, 2.0, 1.0]) == 0.0
    assert mofm([1.0, 2.0, 1.0]) == INF
    assert mofm_max([1.0, 2.0, 1.0]) == INF


# --- the integer grid ----------------------------------------------------------------------


def test_interpolation_fills_integer_epochs_linearly():
    grid, values = interpolate_integer_epochs([0, 2, 3], [10.0, 6.0, 7.0])
    assert grid.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert values.tolist() == [10.0, 8.0, 6.0, 7.0]


def test_interpolation_of_folds_keeps_one_row_per_fold():
    grid, values = interpolate_integer_epochs([0, 2], [[0.0, 4.0], [4.0, 0.0]])
    assert grid.tolist() == [0.0, 1.0, 2.0]
    assert values.tolist() == [[0.0, 2.0, 4.0], [4.0, 2.0, 0.0]]


def test_interpolation_of_fractional_epochs_spans_the_integers_inside():
    grid, values = interpolate_integer_epochs([0.5, 2.5], [0.0, 4.0])
    assert grid.tolist() == [1.0, 2.0]
    assert values.tolist() == [1.0, 3.0]


def test_interpolation_matches_numpy_interp_and_keeps_measured_points_exact():
    rng = np.random.default_rng(0)
    epochs = np.concatenate(([0.0], np.cumsum(rng.uniform(0.3, 4.0, size=20))))
    epochs[-1] = np.floor(epochs[-1])
    values = rng.normal(size=(3, epochs.size))
    grid, out = interpolate_integer_epochs(epochs, values)
    assert grid[0] == 0.0 and grid[-1] == epochs[-1]
    for fold in range(3):
        np.testing.assert_allclose(out[fold], np.interp(grid, epochs, values[fold]), rtol=1e-12, atol=1e-12)
    assert out[:, 0].tolist() == values[:, 0].tolist()
    assert out[:, -1].tolist() == values[:, -1].tolist()


def test_interpolation_of_one_integer_checkpoint_is_that_point():
    grid, values = interpolate_integer_epochs([4], [2.5])
    assert grid.tolist() == [4.0] and values.tolist() == [2.5]


@pytest.mark.parametrize(
    ("epochs", "values", "message"),
    [
        ([0, 2, 2], [1, 2, 3], r"strictly increasing .* Got 2\.0 at index 2 after 2\.0 instead"),
        ([3, 1], [1, 2], r"strictly increasing"),
        ([0.2, 0.8], [1, 2], r"spanning at least one integer epoch"),
        ([0, 1, 2], [1, 2], r"'values' parameter .* one value per entry of 'epochs' \(3\)"),
        ([], [], r"Got an empty sequence instead"),
    ],
)
def test_interpolation_rejects_bad_checkpoints(epochs, values, message):
    with pytest.raises(ValueError, match=message):
        interpolate_integer_epochs(epochs, values)


# --- the convergence index -----------------------------------------------------------------


def test_convergence_index_is_where_patience_runs_out_not_the_best_loss():
    # best at epoch 1 (3.0); 4.0, 3.5, 3.2 are three measurements without improvement.
    assert convergence_epoch([0, 1, 2, 3, 4, 5], [5.0, 3.0, 4.0, 3.5, 3.2, 1.0]) == (4.0, 3.2, True)


def test_convergence_index_is_the_last_checkpoint_when_patience_never_runs_out():
    assert convergence_epoch([0, 1, 2], [3.0, 2.0, 1.0]) == (2.0, 1.0, False)
    assert convergence_epoch([0, 1, 2, 3], [3.0, 4.0, 5.0, 1.0]) == (3.0, 1.0, False)


def test_convergence_counts_measurements_not_epochs_and_equal_is_no_improvement():
    assert convergence_epoch([0, 10, 20, 40, 80], [5, 4, 4, 4, 4]) == (80.0, 4.0, True)
    assert convergence_epoch([0, 10, 20, 40, 80], [5, 4, 4, 4, 4], patience=2) == (40.0, 4.0, True)
    assert convergence_epoch([0, 1], [3.0, 4.0], 1) == (1.0, 4.0, True)


def test_min_delta_applies_literally_as_loss_minus_delta_below_best():
    losses = [5.0, 4.0, 4.05, 4.1, 4.0, 3.0]
    assert convergence_epoch(range(6), losses, patience=3) == (4.0, 4.0, True)
    # L - 0.1 < best: 4.05, 4.1 and 4.0 each count as improvements, so patience never runs out.
    assert convergence_epoch(range(6), losses, patience=3, min_delta=0.1) == (5.0, 3.0, False)


def test_convergence_of_folds_uses_the_fold_mean_loss():
    folds = [[4.0, 2.0, 4.0, 6.0, 0.0], [4.0, 4.0, 2.0, 0.0, 0.0]]  # mean 4, 3, 3, 3, 0
    assert convergence_epoch([0, 1, 2, 3, 4], folds, patience=2) == (3.0, 3.0, True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"patience": 0}, r"The 'patience' parameter of convergence_epoch must be an int in \[1, inf\)\. Got 0"),
        ({"patience": True}, r"'patience' .* Got True instead"),
        ({"patience": 2.5}, r"'patience'"),
        ({"min_delta": -0.1}, r"The 'min_delta' parameter of convergence_epoch must be a finite number in \[0, inf\)"),
        ({"min_delta": math.nan}, r"'min_delta'"),
    ],
)
def test_convergence_rejects_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        convergence_epoch([0, 1, 2], [3.0, 2.0, 1.0], **kwargs)


# --- k-fold soft mismatch ------------------------------------------------------------------

FOLDS = [[10.0, 6.0, 8.0, 7.0], [10.0, 8.0, 6.0, 9.0]]  # fold mean 10, 7, 7, 8


def test_soft_mismatch_cv_scores_the_fold_mean_and_spreads_over_folds():
    r = soft_mismatch_cv([0, 1, 2, 3], FOLDS, 3)
    # Fold mean: x_0 - min = 3, OFM = [0, 0, 0, 100/3]. Fold A: [0, 0, 50, 25]; B: [0, 0, 0, 75].
    assert r["curve"].tolist() == pytest.approx([0.0, 0.0, 0.0, 100 / 3])
    assert (r["mean"], r["c"], r["m"]) == pytest.approx((25 / 3, 100 / 3, 100 / 3))
    assert r["per_fold_mean"].tolist() == [18.75, 18.75]
    # Both folds score above the fold-mean headline: the scores are not linear.
    assert (r["plus"], r["minus"]) == pytest.approx((18.75 - 25 / 3, 18.75 - 25 / 3))
    assert (r["c_plus"], r["c_minus"]) == pytest.approx((75 - 100 / 3, 25 - 100 / 3))
    assert (r["m_plus"], r["m_minus"]) == pytest.approx((75 - 100 / 3, 50 - 100 / 3))
    assert r["kind"] == "ofm" and r["folds"] == 2 and r["m_index"] == 3
    assert r["grid"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_soft_mismatch_cv_with_sm3_scores_the_error_curve():
    r = soft_mismatch_cv([0, 1, 2, 3], FOLDS, 3, use_ofm=False)
    # Fold mean SM3: [0, 0, 0, 1]; A: [0, 0, 2, 1]; B: [0, 0, 0, 3].
    assert (r["mean"], r["c"], r["m"]) == (0.25, 1.0, 1.0)
    assert (r["plus"], r["minus"]) == (0.5, 0.5)
    assert (r["c_plus"], r["c_minus"], r["m_plus"], r["m_minus"]) == (2.0, 0.0, 2.0, 1.0)
    assert r["kind"] == "sm3"


def test_soft_mismatch_cv_cuts_at_conv_epoch_before_normalising():
    r = soft_mismatch_cv([0, 1, 2, 3], [[4.0, 2.0, 3.0, 9.0], [4.0, 2.0, 1.0, 9.0]], 2)
    # Cut fold mean [4, 2, 2] never rises; fold A [4, 2, 3] gives OFM [0, 0, 50].
    assert (r["mean"], r["c"], r["m"]) == (0.0, 0.0, 0.0)
    assert r["plus"] == pytest.approx(50 / 3) and r["minus"] == 0.0
    assert r["c_plus"] == 50.0 and r["grid"].tolist() == [0.0, 1.0, 2.0]


def test_soft_mismatch_cv_interpolates_irregular_checkpoints_of_one_fold():
    r = soft_mismatch_cv([0, 2, 4], [10.0, 6.0, 8.0], 3)
    # Grid 0..4: 10, 8, 6, 7, 8; cut to 0..3: OFM = 25 * [0, 0, 0, 1].
    assert r["curve"].tolist() == [0.0, 0.0, 0.0, 25.0]
    assert (r["mean"], r["c"], r["m"], r["plus"], r["minus"]) == (6.25, 25.0, 25.0, 0.0, 0.0)


def test_soft_mismatch_cv_infinite_headline_gives_zero_or_minus_inf_spread():
    r = soft_mismatch_cv([0, 1, 2], [[2.0, 1.0, 3.0], [2.0, 3.0, 3.0]], 2)
    # Fold mean [2, 2, 3]: x_0 is the min and 3 > 2, so +inf. Fold A: [0, 0, 200]; B: +inf.
    assert (r["mean"], r["c"], r["m"]) == (INF, INF, INF)
    assert r["plus"] == 0.0 and r["minus"] == -INF
    assert r["c_plus"] == 0.0 and r["c_minus"] == -INF


def test_soft_mismatch_cv_rejects_conv_epoch_outside_the_checkpoints():
    with pytest.raises(
        ValueError,
        match=r"The 'conv_epoch' parameter of soft_mismatch_cv must be a number "
        r"within the checkpoints of 'target_epochs' \[0\.0, 3\.0\]\. Got 5\.0 instead\.",
    ):
        soft_mismatch_cv([0, 1, 2, 3], FOLDS, 5)


# --- k-fold MM3 ----------------------------------------------------------------------------


def test_mm3_cv_is_the_mean_of_per_fold_mm3_with_its_spread():
    target = [[50.0, 40.0, 30.0], [30.0, 20.0, 30.0]]
    r = mm3_cv([0, 1, 2], target, [0, 1, 2], [40.0, 30.0, 20.0], 1)
    assert r["per_fold_mean"].tolist() == [10.0, -10.0]
    assert (r["mean"], r["plus"], r["minus"]) == (0.0, 10.0, -10.0)
    assert r["curve"].tolist() == [0.0, 0.0] and r["grid"].tolist() == [0.0, 1.0]


def test_mm3_cv_equals_mm3_of_the_fold_mean_curves():
    rng = np.random.default_rng(5)
    target, pretext = rng.uniform(0, 100, size=(5, 9)), rng.uniform(0, 100, size=(5, 9))
    r = mm3_cv(range(9), target, range(9), pretext, 8)
    assert r["mean"] == pytest.approx(mm3(target.mean(axis=0), pretext.mean(axis=0)), rel=1e-12)


def test_mm3_cv_puts_an_irregular_pretext_curve_on_the_same_grid():
    r = mm3_cv([0, 1, 2], [[50.0, 40.0, 30.0]], [0, 2], [40.0, 20.0], 2)
    assert r["curve"].tolist() == [10.0, 10.0, 10.0] and r["mean"] == 10.0


@pytest.mark.parametrize(
    ("pretext_epochs", "pretext", "message"),
    [
        ([0, 0.5], [40.0, 30.0], r"'conv_epoch' .* within the checkpoints of 'pretext_epochs'"),
        ([1, 2], [40.0, 30.0], r"'pretext_epochs' .* matches 'target_epochs' \(0\.\.1\)\. Got 1\.\.1 instead"),
        ([0, 1, 2], [[1.0, 2.0, 3.0]] * 3, r"'pretext_per_fold' .* one curve or one row per target fold \(2\)"),
        ([0.5, 2], [40.0, 30.0], r"'pretext_epochs' .* grid up to conv_epoch matches 'target_epochs' \(0\.\.1\)"),
    ],
)
def test_mm3_cv_rejects_pretext_curves_that_do_not_line_up(pretext_epochs, pretext, message):
    with pytest.raises(ValueError, match=message):
        mm3_cv([0, 1, 2], [[50.0, 40.0, 30.0], [30.0, 20.0, 30.0]], pretext_epochs, pretext, 1)


# --- bad curves ----------------------------------------------------------------------------


def test_empty_curve_error_message_has_the_project_shape():
    with pytest.raises(MetricInputError) as info:
        sm3([])
    assert str(info.value) == (
        "The 'curve' parameter of sm3 must be a non-empty 1-D sequence of finite "
        "numbers. Got an empty sequence instead."
    )
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("curve", "got"),
    [
        ([1.0, math.nan, 2.0], r"Got a non-finite value \(nan\) at index 1 instead"),
        ([1.0, 2.0, math.inf], r"Got a non-finite value \(inf\) at index 2 instead"),
        ([[1.0, 2.0]], r"Got a 2-D array of shape \(1, 2\) instead"),
        (3.0, r"Got a scalar instead"),
        (["a", "b"], r"Got an array of dtype <U1"),
        ([None, 1.0], r"Got a non-finite value \(nan\) at index 0 instead"),
        ([{}, 1.0], r"Got values that are not numbers \(\[\{\}, 1\.0\]\) instead"),
        ([1 + 2j], r"Got an array of dtype complex128"),
    ],
)
def test_bad_curves_raise_value_error_naming_the_problem(curve, got):
    with pytest.raises(ValueError, match=r"The 'curve' parameter of mofm must be .*" + got):
        mofm(curve)
