"""The across-trial correlation's null and interval (issue 47, item 6): a permutation p-value that
is uniform where there is no association and tiny where there is a perfect one, a bootstrap
interval that covers 0 under the null and excludes it under a strong association, and the
report's rows with their n per task."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr

from services.core.rank_tests import average_ranks, bootstrap_interval, permutation_p, rank_test, spearman_rho
from services.store.probes.trial_ranks import across_trials, final_checkpoints


def test_ranks_and_rho_match_scipy_with_ties() -> None:
    rng = np.random.default_rng(0)
    values = rng.integers(0, 4, size=(30, 9)).astype(float)
    assert np.allclose(average_ranks(values), rankdata(values, axis=-1))
    for x, y in zip(values[:15], values[15:], strict=True):
        expected = spearmanr(x, y).statistic
        got = spearman_rho(x, y)
        assert (got is None and np.isnan(expected)) or got == pytest.approx(expected, abs=1e-12)


def test_the_null_on_independent_data_gives_a_roughly_uniform_p() -> None:
    """Exact enumeration (n = 6: 720 orders): p ≤ α about α of the time, at several α."""
    rng = np.random.default_rng(1)
    ps = np.array([permutation_p(rng.normal(size=6), rng.normal(size=6))[0] for _ in range(600)])
    assert 0.40 <= ps.mean() <= 0.60, ps.mean()
    for alpha, slack in ((0.05, 0.03), (0.25, 0.06), (0.5, 0.07)):
        assert abs((ps <= alpha).mean() - alpha) <= slack, (alpha, (ps <= alpha).mean())


def test_sampled_permutations_are_uniform_too() -> None:
    rng = np.random.default_rng(2)
    ps = []
    for seed in range(200):
        p, used, exact = permutation_p(rng.normal(size=12), rng.normal(size=12), permutations=499, seed=seed)
        assert not exact and used == 499
        ps.append(p)
    assert 0.05 <= (np.array(ps) <= 0.1).mean() <= 0.16


def test_perfectly_correlated_data_gives_a_tiny_p_and_few_points_cannot() -> None:
    x = np.arange(10.0)
    p, used, exact = permutation_p(x, 3 * x + 1, permutations=9_999)
    assert p == pytest.approx(1 / 10_000) and used == 9_999 and not exact
    p8, used8, exact8 = permutation_p(np.arange(8.0), np.arange(8.0) ** 2)
    assert exact8 and used8 == 40_320 and p8 == pytest.approx(2 / 40_320)  # ρ = +1 and ρ = -1 orders
    four = rank_test([1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4])
    assert four.rho == 1.0 and four.p_value == pytest.approx(1 / 12)  # 4 trials: never below 0.083


def test_the_bootstrap_interval_covers_zero_under_the_null_and_excludes_it_when_strong() -> None:
    rng = np.random.default_rng(3)
    covered = excluded = 0
    for seed in range(60):
        x, noise = rng.normal(size=16), rng.normal(size=16)
        low, high = bootstrap_interval(x, noise, draws=400, seed=seed)
        covered += low <= 0.0 <= high
        low, high = bootstrap_interval(x, x + 0.3 * noise, draws=400, seed=seed)
        excluded += low > 0.0
    assert covered >= 52 and excluded >= 57, (covered, excluded)


def test_an_undefined_correlation_has_no_p_and_no_interval() -> None:
    flat = rank_test([1.0, 1.0, 1.0, 1.0, 1.0], [0.1, 0.5, 0.2, 0.9, 0.3])
    assert (flat.rho, flat.p_value, flat.low, flat.high, flat.n) == (None, None, None, None, 5)
    three = rank_test([1.0, 2.0, 3.0], [0.3, 0.1, 0.2])
    assert three.rho is not None and three.p_value is not None and three.low is None  # too few to bootstrap
    with pytest.raises(ValueError, match="pair up"):
        rank_test([1.0, 2.0], [1.0])


def _checkpoint(order: int, trial: int, step: int, lidar: float | None, accuracy: float | None) -> SimpleNamespace:
    return SimpleNamespace(
        task_order=order, trial_id=100 * order + trial, trial_index=trial, step=step,
        lidar=lidar, rankme=None, linear_accuracy=accuracy,
    )  # fmt: skip


def test_the_report_rows_use_each_trials_final_checkpoint_and_say_n_per_task() -> None:
    rows = [
        *(_checkpoint(1, t, 5, 99.0, 0.0) for t in range(5)),  # early checkpoints: never read
        *(_checkpoint(1, t, 10, float(t), 0.1 * t) for t in range(5)),
        *(_checkpoint(2, t, 10, float(t), 0.5) for t in range(3)),
        _checkpoint(2, 3, 10, None, 0.5),  # no LiDAR: left out of n
    ]
    assert [c.step for c in final_checkpoints(rows)[1]] == [10] * 5
    found = {(r.task_order, r.proxy): r.test for r in across_trials(rows)}
    assert set(found) == {(1, "lidar"), (2, "lidar")}  # RankMe was never probed here
    assert found[1, "lidar"].n == 5 and found[1, "lidar"].rho == 1.0
    assert found[1, "lidar"].p_value == pytest.approx(2 / 120)
    assert found[2, "lidar"].n == 3 and found[2, "lidar"].rho is None  # constant accuracy: undefined
