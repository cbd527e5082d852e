"""Spearman ρ and Kendall τ-b: hand-computed cases, ties, and agreement with scipy.stats."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.stats

from workers.probe.scores import correlation
from workers.probe.scores.probe_metrics import kendall_tau_b, spearman


def test_spearman_and_kendall_without_ties_by_hand():
    x, y = [1.0, 2.0, 3.0, 4.0], [10.0, 30.0, 20.0, 40.0]
    assert spearman(x, y) == 0.8  # 1 - 6·2 / (4·15)
    assert kendall_tau_b(x, y) == pytest.approx(4 / 6, rel=1e-15)  # 5 concordant, 1 discordant


def test_spearman_and_kendall_with_a_tie_by_hand():
    x, y = [1.0, 2.0, 2.0, 3.0], [1.0, 3.0, 2.0, 4.0]
    # Ranks of x: 1, 2.5, 2.5, 4. Centred: x (-1.5, 0, 0, 1.5), y (-1.5, .5, -.5, 1.5).
    assert spearman(x, y) == pytest.approx(4.5 / math.sqrt(4.5 * 5.0), rel=1e-15)
    # 5 concordant, 0 discordant, 1 pair tied in x: 5 / sqrt((6 - 1)(6 - 0)).
    assert kendall_tau_b(x, y) == pytest.approx(5 / math.sqrt(30), rel=1e-15)


def test_pairs_tied_in_both_are_neither_concordant_nor_discordant():
    x, y = [1.0, 1.0, 2.0, 3.0], [5.0, 5.0, 4.0, 6.0]
    # Pairs: (0,1) tied in both; (0,2) D; (0,3) C; (1,2) D; (1,3) C; (2,3) C. n1 = n2 = 1.
    assert kendall_tau_b(x, y) == pytest.approx((3 - 2) / 5, rel=1e-15)
    assert kendall_tau_b(x, y) == pytest.approx(scipy.stats.kendalltau(x, y).statistic, rel=1e-12)


@pytest.mark.parametrize("func", [spearman, kendall_tau_b])
def test_perfect_agreement_and_reversal(func):
    x = [0.1, 0.5, 0.2, 0.9]
    assert func(x, [2 * v + 1 for v in x]) == pytest.approx(1.0, abs=1e-15)
    assert func(x, [-v for v in x]) == pytest.approx(-1.0, abs=1e-15)


@pytest.mark.parametrize("func", [spearman, kendall_tau_b])
def test_constant_input_gives_nan_like_scipy(func):
    assert math.isnan(func([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
    assert math.isnan(func([1.0, 2.0, 3.0], [4.0, 4.0, 4.0]))


@pytest.mark.parametrize(("n", "levels", "seed"), [(2, 100, 0), (3, 2, 1), (17, 4, 2), (60, 1000, 3), (250, 7, 4)])
def test_agreement_with_scipy_stats_with_and_without_ties(n, levels, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, levels, size=n).astype(float)
    y = x * 0.5 + rng.integers(0, levels, size=n)
    if len(set(x)) == 1 or len(set(y)) == 1:
        x[0], y[0] = x[0] + 1.0, y[0] - 1.0
    assert spearman(x, y) == pytest.approx(scipy.stats.spearmanr(x, y).statistic, rel=1e-12, abs=1e-14)
    assert kendall_tau_b(x, y) == pytest.approx(
        scipy.stats.kendalltau(x, y, variant="b").statistic, rel=1e-12, abs=1e-14
    )


@pytest.mark.parametrize("seed", range(4))
def test_count_inversions_matches_brute_force(seed):
    ranks = np.random.default_rng(seed).integers(0, 9, size=40)
    brute = sum(1 for i, j in itertools.combinations(range(ranks.size), 2) if ranks[i] > ranks[j])
    assert correlation.count_inversions(ranks) == brute


def test_average_ranks_share_the_mean_rank_of_a_tie():
    assert correlation.average_ranks(np.array([3.0, 1.0, 3.0, 2.0, 3.0])).tolist() == [4.0, 1.0, 4.0, 2.0, 4.0]


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        (
            [1.0],
            [2.0],
            r"The 'x' parameter of spearman must be a 1-D sequence of at least 2 finite numbers\. "
            r"Got length 1 instead\.",
        ),
        (
            [1.0, 2.0],
            [1.0, 2.0, 3.0],
            r"The 'y' parameter of spearman must be a sequence of the same length "
            r"as 'x' \(2\)\. Got length 3 instead\.",
        ),
        ([1.0, math.nan], [1.0, 2.0], r"'x' parameter of spearman .* Got a non-finite value \(nan\) at index 1"),
        ([], [], r"'x' parameter of spearman .* Got an empty sequence instead"),
        ([[1.0, 2.0]], [1.0, 2.0], r"Got a 2-D array of shape \(1, 2\) instead"),
    ],
)
def test_bad_input_raises_value_error(x, y, message):
    with pytest.raises(ValueError, match=message):
        spearman(x, y)
    with pytest.raises(ValueError, match=message.replace("spearman", "kendall_tau_b")):
        kendall_tau_b(x, y)
