"""From measured checkpoints to k-fold mismatch scores (METRICS.md §2).

Contract: checkpoints are given as a strictly increasing 1-D sequence of epochs (or another
step unit) and the measured values as a 1-D curve or a folds × checkpoints array. Curves are
put on the integer grid by linear interpolation, cut to 0..c at the convergence index c,
averaged over folds, and only then normalised and scored. Invalid input raises
:class:`~services.core.metric_checks.MetricInputError` (a ``ValueError``); nothing is dropped or
guessed silently.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from services.core.metric_checks import as_curve, as_float_array, as_int, as_number, fail
from workers.probe.scores.mismatch import ofm_kernel, sm3_kernel

ArrayLike = Sequence[float] | Sequence[Sequence[float]] | np.ndarray
_INCREASING = "a non-empty 1-D sequence of strictly increasing finite numbers"
_FOLDS = "a non-empty 1-D curve or 2-D array (folds × checkpoints) of finite numbers"


def _epochs(value: Any, *, param: str, func: str) -> np.ndarray:
    e = as_curve(value, param=param, func=func)
    steps = np.diff(e)
    if (steps <= 0).any():
        i = int(np.argmax(steps <= 0)) + 1
        raise fail(param, func, _INCREASING, f"{float(e[i])!r} at index {i} after {float(e[i - 1])!r}")
    return e


def _per_fold(value: Any, n_points: int, *, param: str, epochs_param: str, func: str) -> np.ndarray:
    v = as_float_array(value, param=param, func=func, what=_FOLDS, ndims=(1, 2))
    if v.shape[-1] != n_points:
        raise fail(
            param, func, f"{_FOLDS} with one value per entry of {epochs_param!r} ({n_points})", f"shape {v.shape}"
        )
    return v


def _interpolate(epochs: np.ndarray, values: np.ndarray, *, param: str, func: str) -> tuple[np.ndarray, np.ndarray]:
    grid = np.arange(math.ceil(epochs[0]), math.floor(epochs[-1]) + 1, dtype=np.float64)
    if grid.size == 0:
        raise fail(
            param,
            func,
            "a sequence spanning at least one integer epoch",
            f"the range [{float(epochs[0])!r}, {float(epochs[-1])!r}]",
        )
    if epochs.size == 1:
        return grid, values.copy()
    # Left knot of each grid point (a grid point on the last checkpoint takes the last
    # segment with weight 1), so values at measured integer checkpoints come out exactly.
    left = np.clip(np.searchsorted(epochs, grid, side="right") - 1, 0, epochs.size - 2)
    weight = (grid - epochs[left]) / (epochs[left + 1] - epochs[left])
    out = values[..., left] * (1.0 - weight) + values[..., left + 1] * weight
    return grid, out


def interpolate_integer_epochs(epochs: ArrayLike, values: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Put a curve measured at irregular checkpoints on the integer grid, linearly.

    The grid runs over every integer from ``ceil(epochs[0])`` to ``floor(epochs[-1])``
    (from the first to the last checkpoint when they are integers).

    Args:
        epochs: Strictly increasing checkpoint positions.
        values: One value per checkpoint (1-D), or folds × checkpoints (2-D).

    Returns:
        ``(grid, values_on_grid)``: the grid as float64 integers and the interpolated
        values, with the same number of dimensions as ``values``.

    Raises:
        ValueError: Empty, non-finite or non-increasing epochs, a shape mismatch, or no
            integer between the first and the last checkpoint.

    Examples:
        >>> grid, v = interpolate_integer_epochs([0, 2, 3], [10.0, 6.0, 7.0])
        >>> grid.tolist(), v.tolist()
        ([0.0, 1.0, 2.0, 3.0], [10.0, 8.0, 6.0, 7.0])
    """
    func = "interpolate_integer_epochs"
    e = _epochs(epochs, param="epochs", func=func)
    v = _per_fold(values, e.size, param="values", epochs_param="epochs", func=func)
    return _interpolate(e, v, param="epochs", func=func)


def convergence_epoch(
    epochs: ArrayLike, losses: ArrayLike, patience: int = 3, min_delta: float = 0.0
) -> tuple[float, float, bool]:
    """The convergence index c of a pretext loss curve, exactly as METRICS.md states it.

    Walking the measured checkpoints in order with best = +inf, wait = 0: if
    ``L - min_delta < best`` then best = L and wait = 0, else wait += 1 and the walk stops
    at this checkpoint once wait >= patience. c is where patience runs out (not where the
    loss was best); if it never runs out, c is the last checkpoint.

    Note the test is the literal ``L - min_delta < best``: a positive ``min_delta`` lets a
    loss up to ``min_delta`` above the best still count as an improvement.

    Args:
        epochs: Strictly increasing checkpoint positions.
        losses: Pretext loss per checkpoint, or folds × checkpoints (averaged over folds).
        patience: Measurements without improvement that end the walk (>= 1).
        min_delta: Tolerance of the improvement test (>= 0).

    Returns:
        ``(epoch, loss, converged)``: the checkpoint c, the (fold-mean) loss measured there,
        and whether patience ran out (False when c is the last checkpoint by default).

    Raises:
        ValueError: Invalid epochs or losses, patience < 1 or min_delta < 0.

    Examples:
        >>> convergence_epoch([0, 1, 2, 3, 4, 5], [5.0, 3.0, 4.0, 3.5, 3.2, 1.0])
        (4.0, 3.2, True)
        >>> convergence_epoch([0, 1, 2], [3.0, 2.0, 1.0])
        (2.0, 1.0, False)
    """
    func = "convergence_epoch"
    e = _epochs(epochs, param="epochs", func=func)
    loss = _per_fold(losses, e.size, param="losses", epochs_param="epochs", func=func)
    if loss.ndim == 2:
        loss = loss.mean(axis=0)
    patience = as_int(patience, param="patience", func=func, low=1)
    min_delta = as_number(min_delta, param="min_delta", func=func, low=0.0)
    best, wait = math.inf, 0
    for i, value in enumerate(loss.tolist()):
        if value - min_delta < best:
            best, wait = value, 0
        else:
            wait += 1
            if wait >= patience:
                return float(e[i]), float(value), True
    return float(e[-1]), float(loss[-1]), False


def _cut(
    epochs: np.ndarray, values: np.ndarray, conv_epoch: float, *, param: str, func: str
) -> tuple[np.ndarray, np.ndarray]:
    """Interpolate onto the grid and keep the grid points <= conv_epoch."""
    if not epochs[0] <= conv_epoch <= epochs[-1]:
        raise fail(
            "conv_epoch",
            func,
            f"a number within the checkpoints of {param!r} [{float(epochs[0])!r}, {float(epochs[-1])!r}]",
            repr(conv_epoch),
        )
    grid, on_grid = _interpolate(epochs, values, param=param, func=func)
    keep = grid <= conv_epoch
    if not keep.any():
        raise fail(
            "conv_epoch", func, f"at least the first integer epoch of {param!r} ({float(grid[0])!r})", repr(conv_epoch)
        )
    return grid[keep], np.atleast_2d(on_grid[..., keep])


def _minus(value: float, headline: float) -> float:
    """value - headline, with equal values (including +inf and +inf) giving 0."""
    return 0.0 if value == headline else float(value - headline)


def _scores(curve: np.ndarray) -> tuple[float, float, float]:
    return float(np.mean(curve)), float(curve[-1]), float(np.max(curve))


def _from_start(x: np.ndarray, start: float) -> np.ndarray:
    """OFM of ``x`` measured from ``start``, the untrained network's loss: x_0 of METRICS.md
    is ``start`` (the normaliser and the running minimum begin there); the start itself,
    not a checkpoint of the curve, is not scored."""
    return ofm_kernel(np.concatenate(([start], x)))[1:]


def soft_mismatch_cv(
    target_epochs: ArrayLike,
    target_per_fold: ArrayLike,
    conv_epoch: float,
    use_ofm: bool = True,
    start: ArrayLike | None = None,
) -> dict[str, Any]:
    """k-fold MOFM / cOFM / mOFM (target loss) or MSM3 / cSM3 / mSM3 (target error).

    Each fold's curve is interpolated onto the integer grid and cut to 0..conv_epoch; the
    folds are averaged; the fold-mean curve is normalised (OFM only) and scored. The
    spread is, per METRICS.md, the max and the min of the same score computed on each
    fold's own cut curve, minus the headline.

    Interpretation choices: ``plus`` = max(per-fold) - headline and ``minus`` =
    min(per-fold) - headline, signs kept (so ``minus`` is usually <= 0, but the scores are
    not linear and either can have either sign); a per-fold value equal to the headline
    (+inf included) gives 0, so an infinite headline never produces NaN. A 1-D
    ``target_per_fold`` is one fold.

    Args:
        target_epochs: Strictly increasing checkpoint positions of the target curves.
        target_per_fold: Target loss (``use_ofm``) or target error in percent (SM3), one
            row per fold.
        conv_epoch: The convergence index c (from :func:`convergence_epoch`).
        use_ofm: Score with OFM (True) or SM3 (False).
        start: OFM only: the untrained network's target loss, one value per fold (or one for
            all), where the curve's first checkpoint is not untrained (a transfer learner's
            transferred network): OFM is measured from it (see :func:`_from_start`).

    Returns:
        A dict with ``mean`` (MOFM or MSM3), ``c`` (cOFM or cSM3), ``m`` (mOFM or mSM3),
        ``plus`` / ``minus`` (spread of ``mean``), ``c_plus`` / ``c_minus`` and
        ``m_plus`` / ``m_minus`` (spread of ``c`` and ``m``), ``m_index`` (first grid index
        of the max), ``kind`` ("ofm" or "sm3"), ``folds``, ``grid`` (cut integer grid),
        ``curve`` (the scored fold-mean curve) and ``per_fold_mean`` (each fold's score).

    Raises:
        ValueError: Invalid curves, or ``conv_epoch`` outside the checkpoints.

    Examples:
        >>> r = soft_mismatch_cv([0, 1, 2, 3], [[4.0, 2.0, 3.0, 9.0], [4.0, 2.0, 1.0, 9.0]], 2)
        >>> r["mean"], r["c"], r["m"], r["plus"], r["minus"]
        (0.0, 0.0, 0.0, 16.666666666666668, 0.0)
    """
    func = "soft_mismatch_cv"
    e = _epochs(target_epochs, param="target_epochs", func=func)
    v = _per_fold(target_per_fold, e.size, param="target_per_fold", epochs_param="target_epochs", func=func)
    c_epoch = as_number(conv_epoch, param="conv_epoch", func=func, low=-math.inf)
    grid, folds = _cut(e, v, c_epoch, param="target_epochs", func=func)
    kernel = ofm_kernel if use_ofm else sm3_kernel
    if start is not None and use_ofm:
        starts = np.broadcast_to(
            as_float_array(start, param="start", func=func, what="a finite loss, or one per fold", ndims=(0, 1)),
            (folds.shape[0],),
        )
        curve = _from_start(folds.mean(axis=0), float(starts.mean()))
        per_fold = np.array([_scores(_from_start(row, float(s))) for row, s in zip(folds, starts)])
    else:
        curve = kernel(folds.mean(axis=0))
        per_fold = np.array([_scores(kernel(row)) for row in folds])
    mean, c, m = _scores(curve)
    result: dict[str, Any] = {"mean": mean, "c": c, "m": m}
    for key, column, headline in (("", 0, mean), ("c_", 1, c), ("m_", 2, m)):
        result[f"{key}plus"] = _minus(float(per_fold[:, column].max()), headline)
        result[f"{key}minus"] = _minus(float(per_fold[:, column].min()), headline)
    result.update(
        m_index=int(np.argmax(curve)),
        kind="ofm" if use_ofm else "sm3",
        folds=folds.shape[0],
        grid=grid,
        curve=curve,
        per_fold_mean=per_fold[:, 0].copy(),
    )
    return result


def mm3_cv(
    target_epochs: ArrayLike,
    target_per_fold: ArrayLike,
    pretext_epochs: ArrayLike,
    pretext_per_fold: ArrayLike,
    conv_epoch: float,
) -> dict[str, Any]:
    """k-fold MM3: the mean of per-fold MM3 (= MM3 of the fold means, as it is linear).

    Both curves are errors in percent. The pretext curve may be a single curve (1-D or
    one row), used against every target fold, or one row per target fold. Both are put
    on the integer grid and cut to 0..conv_epoch; their cut grids must coincide.

    Args:
        target_epochs: Strictly increasing checkpoint positions of the target curves.
        target_per_fold: Target error in percent, one row per fold.
        pretext_epochs: Strictly increasing checkpoint positions of the pretext curve.
        pretext_per_fold: Pretext error in percent (one curve, or one row per fold).
        conv_epoch: The convergence index c.

    Returns:
        A dict with ``mean`` (MM3), ``plus`` / ``minus`` (max and min of per-fold MM3 minus
        ``mean``), ``folds``, ``grid``, ``curve`` (fold-mean M3 curve) and ``per_fold_mean``.

    Raises:
        ValueError: Invalid curves, fold counts that do not match, grids that differ, or
            ``conv_epoch`` outside the checkpoints.

    Examples:
        >>> r = mm3_cv([0, 1], [[50.0, 40.0], [30.0, 20.0]], [0, 1], [40.0, 30.0], 1)
        >>> r["mean"], r["plus"], r["minus"]
        (0.0, 10.0, -10.0)
    """
    func = "mm3_cv"
    te = _epochs(target_epochs, param="target_epochs", func=func)
    tv = _per_fold(target_per_fold, te.size, param="target_per_fold", epochs_param="target_epochs", func=func)
    pe = _epochs(pretext_epochs, param="pretext_epochs", func=func)
    pv = _per_fold(pretext_per_fold, pe.size, param="pretext_per_fold", epochs_param="pretext_epochs", func=func)
    c_epoch = as_number(conv_epoch, param="conv_epoch", func=func, low=-math.inf)
    grid, target = _cut(te, tv, c_epoch, param="target_epochs", func=func)
    p_grid, pretext = _cut(pe, pv, c_epoch, param="pretext_epochs", func=func)
    if p_grid.shape != grid.shape or (p_grid != grid).any():
        raise fail(
            "pretext_epochs",
            func,
            f"checkpoints whose integer grid up to conv_epoch matches 'target_epochs' ({grid[0]:g}..{grid[-1]:g})",
            f"{p_grid[0]:g}..{p_grid[-1]:g}",
        )
    if pretext.shape[0] not in (1, target.shape[0]):
        raise fail(
            "pretext_per_fold",
            func,
            f"one curve or one row per target fold ({target.shape[0]})",
            f"{pretext.shape[0]} rows",
        )
    per_fold = (target - pretext).mean(axis=1)
    mean = float(per_fold.mean())
    return {
        "mean": mean,
        "plus": _minus(float(per_fold.max()), mean),
        "minus": _minus(float(per_fold.min()), mean),
        "folds": target.shape[0],
        "grid": grid,
        "curve": (target - pretext).mean(axis=0),
        "per_fold_mean": per_fold,
    }


__all__ = ["convergence_epoch", "interpolate_integer_epochs", "mm3_cv", "soft_mismatch_cv"]
