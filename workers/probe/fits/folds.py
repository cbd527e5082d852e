"""Seeded subsampling and k-fold assignment for the probes.

Contract: everything is a pure function of its arguments and ``seed``: the same inputs give
the same indices on every machine (numpy's PCG64). Single-label folds are stratified (each
class dealt round-robin over the folds after a shuffle), so every fold sees every class
that has at least k examples; multi-label folds are a shuffled round-robin. Every fold
holds at least one example, or :class:`FoldError` is raised.
"""

from __future__ import annotations

import numpy as np

from services.core.errors import NevisError


class FoldError(NevisError, ValueError):
    """The data is too small to split into the requested folds."""


def subsample(num: int, limit: int, *, seed: int) -> np.ndarray:
    """Sorted indices of at most ``limit`` of ``num`` items, drawn without replacement.

    Examples:
        >>> subsample(5, 10, seed=0).tolist()
        [0, 1, 2, 3, 4]
        >>> len(subsample(100, 10, seed=0))
        10
    """
    if num <= limit:
        return np.arange(num)
    rng = np.random.default_rng([seed, 0x5EED])
    return np.sort(rng.choice(num, size=limit, replace=False))


def fold_ids(labels: np.ndarray, folds: int, *, seed: int) -> np.ndarray:
    """The fold (0..folds-1) of each example; stratified by class for 1-D labels.

    Args:
        labels: int labels (N,) for single-label data, or multi-hot (N, K).
        folds: k, at least 2.
        seed: Seed of the shuffle.

    Raises:
        FoldError: Fewer examples than folds.

    Examples:
        >>> ids = fold_ids(np.array([0, 0, 0, 1, 1, 1]), 3, seed=0)
        >>> sorted(np.bincount(ids).tolist())
        [2, 2, 2]
    """
    n = int(labels.shape[0])
    if n < folds:
        raise FoldError(
            f"Cannot split {n} examples into {folds} folds; lower the 'folds' probe setting or raise 'max_examples'."
        )
    rng = np.random.default_rng([seed, 0xF01D])
    out = np.empty(n, dtype=np.int64)
    if labels.ndim == 1:
        offset = 0
        for cls in np.unique(labels):
            members = rng.permutation(np.flatnonzero(labels == cls))
            out[members] = (np.arange(members.size) + offset) % folds
            offset += members.size
    else:
        order = rng.permutation(n)
        out[order] = np.arange(n) % folds
    return out


def train_masks(ids: np.ndarray, folds: int) -> np.ndarray:
    """Boolean (folds, N): row f is True where an example trains fold f's probe."""
    return ids[None, :] != np.arange(folds)[:, None]


__all__ = ["FoldError", "fold_ids", "subsample", "train_masks"]
