"""Mismatch curves of one target / pretext pair (METRICS.md §2, Stuhr & Brauer).

Contract: every function takes curves already on the integer grid and already cut to
checkpoints 0..c (see :mod:`workers.probe.scores.mismatch_cv` for the grid, the convergence index and
the k-fold versions). A curve is a non-empty 1-D sequence of finite numbers; anything else
raises :class:`~services.core.metric_checks.MetricInputError` (a ``ValueError``). Results are
float64 arrays (per-checkpoint curves) or Python floats (scalars). Lower is better for
every value here. The only non-finite result is the +inf of the OFM special case
(x_0 = min_j x_j and some x_e > x_0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from services.core.metric_checks import as_curve, fail

ArrayLike = Sequence[float] | np.ndarray


# --- unchecked kernels: inputs are finite float64 1-D arrays (also used by the CV code) ---


def sm3_kernel(x: np.ndarray) -> np.ndarray:
    """SM3_e = x_e - min_{j<=e} x_j."""
    return x - np.minimum.accumulate(x)


def ofm_normalize_kernel(x: np.ndarray) -> np.ndarray:
    """N(x) of METRICS.md, including the x_0 = min special case."""
    low = x.min()
    if x[0] == low:
        return np.where(x == x[0], 0.0, np.inf)
    return 100.0 * x / (x[0] - low)


def ofm_kernel(x: np.ndarray) -> np.ndarray:
    """OFM_e = SM3_e of N(x).

    In the regular case this is computed as 100 * (x_e - min_{j<=e} x_j) / (x_0 - min_j x_j),
    which is the same number with less round-off (exact zeros stay exact). In the special
    case min_{j<=e} N_j = N_0 = 0, so OFM = N(x) itself (0 or +inf).
    """
    low = x.min()
    if x[0] == low:
        return ofm_normalize_kernel(x)
    return 100.0 * sm3_kernel(x) / (x[0] - low)


# --- M3 ---------------------------------------------------------------------------------


def m3(target: ArrayLike, pretext: ArrayLike) -> np.ndarray:
    """M3_e = target error minus pretext error at each checkpoint (sign kept).

    Both curves are errors in percent on the same checkpoints 0..c.

    Args:
        target: Target-model error per checkpoint, in percent.
        pretext: Pretext-model error per checkpoint, in percent, same length.

    Returns:
        The M3 curve, float64, same length as the inputs.

    Raises:
        ValueError: A curve is empty, not 1-D, not finite, or the lengths differ.

    Examples:
        >>> m3([50.0, 40.0, 45.0], [60.0, 30.0, 20.0]).tolist()
        [-10.0, 10.0, 25.0]
    """
    return _m3(target, pretext, "m3")


def _m3(target: ArrayLike, pretext: ArrayLike, func: str) -> np.ndarray:
    t = as_curve(target, param="target", func=func)
    p = as_curve(pretext, param="pretext", func=func)
    if p.shape != t.shape:
        raise fail("pretext", func, f"a curve of the same length as 'target' ({t.size})", f"length {p.size}")
    return t - p


def mm3(target: ArrayLike, pretext: ArrayLike) -> float:
    """MM3 = mean over checkpoints of :func:`m3` (lower is better).

    Examples:
        >>> mm3([50.0, 40.0, 45.0], [60.0, 30.0, 20.0])
        8.333333333333334
    """
    return float(np.mean(_m3(target, pretext, "mm3")))


# --- SM3 family (apply to the target error) ----------------------------------------------


def sm3(curve: ArrayLike) -> np.ndarray:
    """SM3_e = x_e - min_{j<=e} x_j: how far the curve is above its best so far (>= 0).

    Args:
        curve: Target error per checkpoint 0..c.

    Returns:
        The SM3 curve, float64, same length.

    Raises:
        ValueError: ``curve`` is empty, not 1-D, or not finite.

    Examples:
        >>> sm3([5.0, 3.0, 4.0, 2.0, 6.0]).tolist()
        [0.0, 0.0, 1.0, 0.0, 4.0]
    """
    return sm3_kernel(as_curve(curve, param="curve", func="sm3"))


def msm3(curve: ArrayLike) -> float:
    """MSM3 = mean_e SM3_e.

    Examples:
        >>> msm3([5.0, 3.0, 4.0, 2.0, 6.0])
        1.0
    """
    return float(np.mean(sm3_kernel(as_curve(curve, param="curve", func="msm3"))))


def csm3(curve: ArrayLike) -> float:
    """cSM3 = SM3 at the last checkpoint of the (already cut) curve, i.e. at c.

    Examples:
        >>> csm3([5.0, 3.0, 4.0])
        1.0
    """
    return float(sm3_kernel(as_curve(curve, param="curve", func="csm3"))[-1])


def msm3max(curve: ArrayLike) -> float:
    """mSM3 = max_e SM3_e.

    Examples:
        >>> msm3max([5.0, 3.0, 4.0, 2.0, 6.0])
        4.0
    """
    return float(np.max(sm3_kernel(as_curve(curve, param="curve", func="msm3max"))))


def msm3max_index(curve: ArrayLike) -> int:
    """The first checkpoint index where SM3 reaches its maximum (0 for a flat SM3).

    Examples:
        >>> msm3max_index([5.0, 3.0, 4.0, 2.0, 3.0])
        2
    """
    return int(np.argmax(sm3_kernel(as_curve(curve, param="curve", func="msm3max_index"))))


# --- OFM family (apply to the target loss) -----------------------------------------------


def ofm_normalize(curve: ArrayLike) -> np.ndarray:
    """N(x)_e = 100 * x_e / (x_0 - min_j x_j), with the METRICS.md special case.

    When x_0 is the minimum (training never beat the untrained checkpoint), N is 0 where
    x_e = x_0 and +inf where x_e > x_0.

    Args:
        curve: Target loss per checkpoint 0..c.

    Returns:
        The normalised curve, float64, possibly containing +inf.

    Raises:
        ValueError: ``curve`` is empty, not 1-D, or not finite.

    Examples:
        >>> ofm_normalize([4.0, 2.0, 3.0]).tolist()
        [200.0, 100.0, 150.0]
        >>> ofm_normalize([1.0, 1.0, 2.0]).tolist()
        [0.0, 0.0, inf]
    """
    return ofm_normalize_kernel(as_curve(curve, param="curve", func="ofm_normalize"))


def ofm_curve(curve: ArrayLike) -> np.ndarray:
    """OFM_e = SM3_e of N(x) = 100 * (x_e - min_{j<=e} x_j) / (x_0 - min_j x_j).

    A constant curve gives zeros; in the special case (x_0 = min) it is 0 where x_e = x_0
    and +inf where x_e > x_0.

    Examples:
        >>> ofm_curve([4.0, 2.0, 3.0]).tolist()
        [0.0, 0.0, 50.0]
        >>> ofm_curve([2.0, 2.0, 2.0]).tolist()
        [0.0, 0.0, 0.0]
    """
    return ofm_kernel(as_curve(curve, param="curve", func="ofm_curve"))


def mofm(curve: ArrayLike) -> float:
    """MOFM = mean_e OFM_e (+inf in the special case as soon as one x_e > x_0).

    Examples:
        >>> mofm([4.0, 2.0, 3.0, 2.5])
        18.75
        >>> mofm([1.0, 3.0])
        inf
    """
    return float(np.mean(ofm_kernel(as_curve(curve, param="curve", func="mofm"))))


def cofm(curve: ArrayLike) -> float:
    """cOFM = OFM at the last checkpoint of the (already cut) curve, i.e. at c.

    Examples:
        >>> cofm([4.0, 2.0, 3.0, 2.5])
        25.0
    """
    return float(ofm_kernel(as_curve(curve, param="curve", func="cofm"))[-1])


def mofm_max(curve: ArrayLike) -> float:
    """mOFM = max_e OFM_e (+inf in the special case as soon as one x_e > x_0).

    Examples:
        >>> mofm_max([4.0, 2.0, 3.0, 2.5])
        50.0
    """
    return float(np.max(ofm_kernel(as_curve(curve, param="curve", func="mofm_max"))))


__all__ = [
    "cofm",
    "csm3",
    "m3",
    "mm3",
    "mofm",
    "mofm_max",
    "msm3",
    "msm3max",
    "msm3max_index",
    "ofm_curve",
    "ofm_kernel",
    "ofm_normalize",
    "ofm_normalize_kernel",
    "sm3",
    "sm3_kernel",
]
