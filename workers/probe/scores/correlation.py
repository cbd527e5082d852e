"""Rank correlations that judge a label-free proxy against probe accuracy (METRICS.md §3).

Contract: both inputs are 1-D finite sequences of the same length >= 2; the result is a
Python float in [-1, 1], or NaN when it is undefined (one input is constant), as in
``scipy.stats``. Ties are handled exactly: average ranks for Spearman ρ, the τ-b tie
correction for Kendall. Invalid input raises
:class:`~services.core.metric_checks.MetricInputError` (a ``ValueError``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from services.core.metric_checks import as_curve, fail

ArrayLike = Sequence[float] | np.ndarray


def _pair(x: ArrayLike, y: ArrayLike, func: str) -> tuple[np.ndarray, np.ndarray]:
    a = as_curve(x, param="x", func=func)
    b = as_curve(y, param="y", func=func)
    if a.size < 2:
        raise fail("x", func, "a 1-D sequence of at least 2 finite numbers", f"length {a.size}")
    if b.size != a.size:
        raise fail("y", func, f"a sequence of the same length as 'x' ({a.size})", f"length {b.size}")
    return a, b


def _tie_groups(sorted_values: np.ndarray) -> np.ndarray:
    """Start index of each run of equal values in a sorted array, plus the end."""
    change = np.flatnonzero(sorted_values[1:] != sorted_values[:-1]) + 1
    return np.concatenate(([0], change, [sorted_values.size]))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing the mean of the ranks they span."""
    order = np.argsort(values, kind="stable")
    bounds = _tie_groups(values[order])
    sizes = np.diff(bounds)
    mean_rank = (bounds[:-1] + bounds[1:] + 1) / 2.0  # mean of start+1 .. end
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, sizes)
    return ranks


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman ρ: the Pearson correlation of average ranks.

    Args:
        x: One value per item (e.g. LiDAR per checkpoint).
        y: The paired values (e.g. linear-probe accuracy), same length.

    Returns:
        ρ in [-1, 1]; NaN when ``x`` or ``y`` is constant.

    Raises:
        ValueError: Not 1-D finite sequences of one length >= 2.

    Examples:
        >>> spearman([1.0, 2.0, 3.0, 4.0], [10.0, 30.0, 20.0, 40.0])
        0.8
    """
    a, b = _pair(x, y, "spearman")
    ra = average_ranks(a) - (a.size + 1) / 2.0  # the mean rank is (n + 1) / 2, ties or not
    rb = average_ranks(b) - (b.size + 1) / 2.0
    denom = math.sqrt(float(np.dot(ra, ra)) * float(np.dot(rb, rb)))
    if denom == 0.0:
        return math.nan
    return float(np.clip(np.dot(ra, rb) / denom, -1.0, 1.0))


def _tied_pairs(values: np.ndarray) -> int:
    sizes = np.diff(_tie_groups(np.sort(values)))
    return int((sizes * (sizes - 1) // 2).sum())


def _dense_ranks(values: np.ndarray) -> np.ndarray:
    """0-based ranks where equal values share a rank and ranks have no gaps."""
    _, inverse = np.unique(values, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)


def count_inversions(ranks: np.ndarray) -> int:
    """Number of pairs i < j with ranks[i] > ranks[j], for non-negative int ranks.

    Vectorised over the bits of the rank, most significant first: a pair is counted at
    the highest bit where the two ranks differ, i.e. within the group of equal higher
    bits, as a 1 (earlier) followed by a 0 (later). O(n log² n), no Python loop over n.
    """
    total = 0
    for bit in range(int(ranks.max()).bit_length() - 1, -1, -1):
        order = np.argsort(ranks >> (bit + 1), kind="stable")  # groups, original order inside
        group = (ranks >> (bit + 1))[order]
        ones = ((ranks >> bit) & 1)[order]
        ones_before = np.cumsum(ones) - ones  # ones strictly before, over the whole array
        new_group = np.concatenate(([True], group[1:] != group[:-1]))
        start_of_mine = np.maximum.accumulate(np.where(new_group, np.arange(group.size), 0))
        ones_before_in_group = ones_before - ones_before[start_of_mine]
        total += int(ones_before_in_group[ones == 0].sum())
    return total


def kendall_tau_b(x: ArrayLike, y: ArrayLike) -> float:
    """Kendall τ-b: (concordant − discordant) / sqrt((n0 − n1)(n0 − n2)).

    n0 = n(n−1)/2 pairs; n1 and n2 are the pairs tied in ``x`` and in ``y``. Pairs tied
    in either are neither concordant nor discordant.

    Args:
        x: One value per item.
        y: The paired values, same length.

    Returns:
        τ-b in [-1, 1]; NaN when ``x`` or ``y`` is constant.

    Raises:
        ValueError: Not 1-D finite sequences of one length >= 2.

    Examples:
        >>> kendall_tau_b([1.0, 2.0, 3.0, 4.0], [10.0, 30.0, 20.0, 40.0])
        0.6666666666666666
    """
    a, b = _pair(x, y, "kendall_tau_b")
    n = a.size
    n0 = n * (n - 1) // 2
    n1, n2 = _tied_pairs(a), _tied_pairs(b)
    if n1 == n0 or n2 == n0:  # noqa: PLR1714
        return math.nan
    # Sorted by x, then y: among pairs not tied in x, discordant ones are exactly the
    # inversions of y; pairs tied in x are in increasing y order, so never inversions.
    order = np.lexsort((b, a))
    discordant = count_inversions(_dense_ranks(b[order]))
    joint = _tied_pairs(_joint_keys(a[order], b[order]))  # tied in both x and y
    concordant = n0 - n1 - n2 + joint - discordant
    tau = (concordant - discordant) / math.sqrt(float(n0 - n1) * float(n0 - n2))
    return float(min(1.0, max(-1.0, tau)))


def _joint_keys(a_sorted: np.ndarray, b_sorted: np.ndarray) -> np.ndarray:
    """One integer per item, equal exactly when (x, y) are equal (input sorted by x, y)."""
    same = np.concatenate(([False], (a_sorted[1:] == a_sorted[:-1]) & (b_sorted[1:] == b_sorted[:-1])))
    return np.cumsum(~same)


__all__ = ["average_ranks", "count_inversions", "kendall_tau_b", "spearman"]
