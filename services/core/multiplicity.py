"""Per-task "differs beyond noise" flags as a family: p-values and Holm's step-down correction.

Why: 27 tasks tested at 5 % each flag one or two tasks by chance on every comparison of a learner
with itself. Holm (1979) keeps the chance of *any* false flag among the family at ``alpha``
without assuming the tasks are independent, and is uniformly more powerful than Bonferroni.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

ALPHA = 0.05
CORRECTION = "Holm"


def normal_p_value(estimate: float, standard_error: float) -> float:
    """Two-sided p-value of ``estimate`` against 0 with a normal null of that SE (1 at SE 0 and
    estimate 0; 0 at SE 0 otherwise)."""
    if not math.isfinite(standard_error) or standard_error <= 0.0:
        return 1.0 if estimate == 0.0 else 0.0
    return math.erfc(abs(estimate) / standard_error / math.sqrt(2.0))


def welch_p_values(a: np.ndarray, b: np.ndarray, known_variance: np.ndarray | None = None) -> np.ndarray:
    """(T,) two-sided p-values of Welch's t test (unequal variances) of mean(a) = mean(b) per
    column: ``a`` (n_A, T) and ``b`` (n_B, T), two rows or more each. ``known_variance`` (T,)
    adds a variance of the difference estimated without a small-sample error (the test
    examples' bootstrap variance), so tied values (a task error is a multiple of 1/N) never give
    a zero variance. The degrees of freedom are Welch–Satterthwaite's of the seeds' part alone:
    counting the known part as exact would raise them towards a normal's, and with two seeds a
    side that more than undoes the wider SE (a simulation flagged 10 % of self-comparisons).

    Examples:
        >>> [round(float(p), 4) for p in welch_p_values(np.array([[0.2], [0.3], [0.4]]),
        ...                                                np.array([[0.5], [0.6], [0.7]]))]
        [0.0213]
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape[0] < 2 or y.shape[0] < 2:
        raise ValueError(f"Welch's test needs two values or more per side; got {x.shape[0]} and {y.shape[0]}.")
    va, vb = x.var(axis=0, ddof=1) / x.shape[0], y.var(axis=0, ddof=1) / y.shape[0]
    diff = x.mean(axis=0) - y.mean(axis=0)
    known = np.zeros_like(diff) if known_variance is None else np.maximum(np.asarray(known_variance), 0.0)
    total = va + vb + known
    spread = va**2 / (x.shape[0] - 1) + vb**2 / (y.shape[0] - 1)
    from scipy.stats import t as student_t  # noqa: PLC0415 - scipy is slow to import

    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(spread > 0.0, (va + vb) ** 2 / spread, np.inf)
        stat = np.abs(diff) / np.sqrt(total)
        p = 2.0 * student_t.sf(stat, df)
    return np.where(total > 0.0, p, np.where(diff == 0.0, 1.0, 0.0))


def holm(p_values: Sequence[float]) -> tuple[float, ...]:
    """Holm-adjusted p-values (same order): a test is flagged at ``alpha`` when its adjusted
    p-value is at most ``alpha``, which keeps the family-wise false-flag rate at ``alpha``.

    Examples:
        >>> holm([0.01, 0.04, 0.03])
        (0.03, 0.06, 0.06)
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.size == 0:
        return ()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (p.size - np.arange(p.size)) * p[order])
    adjusted = np.empty_like(p)
    adjusted[order] = np.maximum.accumulate(scaled)
    return tuple(round(float(v), 15) for v in adjusted)


__all__ = ["ALPHA", "CORRECTION", "holm", "normal_p_value", "welch_p_values"]
