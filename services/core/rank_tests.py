"""A rank correlation with what it takes to read it: n, a permutation null and a bootstrap interval.

Why: the across-trial correlation of a label-free proxy (LiDAR, RankMe) with linear-probe
accuracy has a handful of points per task (about 4 trials in the ``standard`` search). A
Spearman ρ of 0.8 on 4 points is what chance gives one time in six, so a figure without its n,
a null and an interval cannot be defended. :func:`rank_test` gives all three:

- **ρ**: Spearman's, the Pearson correlation of average ranks (ties share their mean rank);
- **p**: two-sided permutation p-value of H0 "no association", ``(1 + #{|ρ_π| ≥ |ρ|}) / (1 + B)``
  over permutations π of one side. Exact (every permutation, B = n!) up to
  :data:`EXACT_UP_TO` points, else B seeded random permutations: under H0 the p-value is
  (super-)uniform, so it is below 0.05 at most 5 % of the time; with n = 4 the smallest
  attainable is 1/12 (two of the 24 orders reach |ρ| = 1);
- **interval**: percentile bootstrap of ρ over the pairs (resampled with replacement; a
  resample with a constant side has no ρ and is dropped), at ``level``. None below
  :data:`MIN_BOOTSTRAP_POINTS` points, where resamples are mostly ties.

Undefined (fewer than 2 points, or a constant side): ρ, p and the interval are None.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

EXACT_UP_TO = 8  # 8! = 40,320 permutations, enumerated exactly
PERMUTATIONS = 9_999
BOOTSTRAP_DRAWS = 2_000
MIN_BOOTSTRAP_POINTS = 4
_TOLERANCE = 1e-12  # |ρ_π| ≥ |ρ| up to rounding: equal ρ counts as as extreme


@dataclass(frozen=True)
class RankTest:
    """Spearman ρ of n pairs, its permutation p-value and bootstrap interval (None: undefined)."""

    n: int
    rho: float | None
    p_value: float | None
    low: float | None
    high: float | None
    permutations: int  # B: n! when exact, else the seeded draws; 0 when undefined
    exact: bool
    level: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks along the last axis, ties sharing the mean of the ranks they span: a value's
    rank is the count below it plus (the count equal to it + 1) / 2. Pairwise, so
    O(rows × n²): meant for the few points a rank test sees (a bootstrap's rows at once)."""
    values = np.asarray(values, dtype=np.float64)
    below = (values[..., None, :] < values[..., :, None]).sum(axis=-1)
    equal = (values[..., None, :] == values[..., :, None]).sum(axis=-1)
    return below + (equal + 1) / 2.0


def _centred(ranks: np.ndarray) -> np.ndarray:
    return ranks - ranks.mean(axis=-1, keepdims=True)


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman ρ of paired values; None with fewer than 2 pairs or a constant side.

    Examples:
        >>> spearman_rho([1, 2, 3, 4], [10, 30, 20, 40])
        0.8
        >>> spearman_rho([1, 1, 1], [1, 2, 3]) is None
        True
    """
    a, b = _pairs(x, y)
    if a.size < 2:
        return None
    ra, rb = _centred(average_ranks(a)), _centred(average_ranks(b))
    denom = math.sqrt(float(ra @ ra) * float(rb @ rb))
    return None if denom == 0.0 else float(np.clip(ra @ rb / denom, -1.0, 1.0))


@functools.lru_cache(maxsize=EXACT_UP_TO + 1)
def _every_order(n: int) -> np.ndarray:
    """Every permutation of ``range(n)`` as rows (n ≤ :data:`EXACT_UP_TO`), made once per n."""
    return np.array(list(itertools.permutations(range(n))), dtype=np.int64)


def _pairs(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if a.size != b.size:
        raise ValueError(f"x and y must pair up: {a.size} values against {b.size}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("x and y must be finite numbers")
    return a, b


def permutation_p(
    x: Sequence[float], y: Sequence[float], *, permutations: int = PERMUTATIONS, seed: int = 0
) -> tuple[float | None, int, bool]:
    """Two-sided permutation p-value of Spearman ρ (see the module docstring): (p, B, exact)."""
    a, b = _pairs(x, y)
    rho = spearman_rho(a, b)
    if rho is None:
        return None, 0, False
    ra, rb = _centred(average_ranks(a)), _centred(average_ranks(b))
    denom = math.sqrt(float(ra @ ra) * float(rb @ rb))
    exact = a.size <= EXACT_UP_TO
    if exact:
        orders = _every_order(a.size)
    else:
        rng = np.random.default_rng(seed)
        orders = np.argsort(rng.random((permutations, a.size)), axis=1)
    permuted = rb[orders] @ ra / denom
    extreme = int(np.count_nonzero(np.abs(permuted) >= abs(rho) - _TOLERANCE))
    if exact:  # the identity is among the orders: p = #extreme / n!
        return extreme / len(orders), len(orders), True
    return (1 + extreme) / (1 + len(orders)), len(orders), False


def bootstrap_interval(
    x: Sequence[float], y: Sequence[float], *, draws: int = BOOTSTRAP_DRAWS, level: float = 0.95, seed: int = 0
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of Spearman ρ over the pairs (see the module docstring)."""
    a, b = _pairs(x, y)
    if a.size < MIN_BOOTSTRAP_POINTS or spearman_rho(a, b) is None:
        return None, None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, a.size, size=(draws, a.size))
    ra, rb = _centred(average_ranks(a[picks])), _centred(average_ranks(b[picks]))
    denom = np.sqrt(np.einsum("ij,ij->i", ra, ra) * np.einsum("ij,ij->i", rb, rb))
    defined = denom > 0
    if defined.sum() < draws // 2:  # mostly constant resamples: no interval worth showing
        return None, None
    rhos = np.clip(np.einsum("ij,ij->i", ra, rb)[defined] / denom[defined], -1.0, 1.0)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(rhos, [tail, 1.0 - tail])
    return float(low), float(high)


def rank_test(
    x: Sequence[float],
    y: Sequence[float],
    *,
    permutations: int = PERMUTATIONS,
    draws: int = BOOTSTRAP_DRAWS,
    level: float = 0.95,
    seed: int = 0,
) -> RankTest:
    """ρ, its permutation p-value and its bootstrap interval for n pairs (see the module docstring)."""
    a, b = _pairs(x, y)
    rho = spearman_rho(a, b)
    p, used, exact = permutation_p(a, b, permutations=permutations, seed=seed)
    low, high = bootstrap_interval(a, b, draws=draws, level=level, seed=seed)
    return RankTest(int(a.size), rho, p, low, high, used, exact, level)


__all__ = [
    "BOOTSTRAP_DRAWS",
    "EXACT_UP_TO",
    "MIN_BOOTSTRAP_POINTS",
    "PERMUTATIONS",
    "RankTest",
    "average_ranks",
    "bootstrap_interval",
    "permutation_p",
    "rank_test",
    "spearman_rho",
]
