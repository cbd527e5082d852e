"""Seeded, stratified draws: shuffle rows per class and cut them by fractions.

Shared by every split rule that draws (:mod:`workers.stream.splits` and
:mod:`workers.stream.split_reference`). numpy's legacy ``RandomState`` is used because numpy
keeps its stream fixed, so a seed gives the same split on any numpy version.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from services.core.errors import ManifestError


def deal(
    rows: np.ndarray, labels: np.ndarray, fractions: Mapping[str, float], rng: np.random.RandomState
) -> dict[str, np.ndarray]:
    """Shuffle ``rows`` and cut them by ``fractions``, stratified when labels are 1-D.

    Returns sorted row ids per key of ``fractions``.
    """
    names = list(fractions)
    share = np.array([fractions[s] for s in names], dtype=np.float64)
    out: dict[str, list[np.ndarray]] = {s: [] for s in names}
    if labels.ndim == 1:
        groups = [rows[labels == c] for c in np.unique(labels)]
    else:
        groups = [rows]
    carry = np.zeros(len(names))
    for group in groups:
        shuffled = group[rng.permutation(len(group))]
        quota = len(group) * share + carry
        counts = round_to_total(quota, len(group))
        carry = quota - counts
        for name, part in zip(names, np.split(shuffled, np.cumsum(counts)[:-1])):
            out[name].append(part)
    return {s: np.sort(np.concatenate(out[s])).astype(np.int64) for s in names}


def round_to_total(quota: np.ndarray, total: int) -> np.ndarray:
    """Non-negative integers summing to ``total``, each within one of its quota.

    Ties go to the earlier split, so the result never depends on float noise order.
    """
    counts = np.floor(np.maximum(quota, 0.0)).astype(np.int64)
    rest = quota - counts
    order = sorted(range(len(quota)), key=lambda i: (-rest[i], i))
    while counts.sum() < total:
        for i in order:
            if counts.sum() == total:
                break
            counts[i] += 1
    for i in reversed(order):  # only when negative quotas were clipped
        while counts.sum() > total and counts[i] > 0:
            counts[i] -= 1
    return counts


def checked_fractions(
    kind: str,
    given: Mapping[str, float],
    names: Sequence[str],
    default: Mapping[str, float] | None = None,
    *,
    field: str = "fractions",
) -> dict[str, float]:
    """``given`` (or ``default`` when empty) over ``names``, checked to sum to 1.

    Missing names get 0. ``field`` names the rule field in errors.
    """
    chosen = dict(given) or dict(default or {})
    unknown = sorted(set(chosen) - set(names))
    if unknown or not chosen:
        raise ManifestError(
            f"Split rule {kind!r} takes {field} for {', '.join(names)}; "
            f"got {', '.join(unknown) or 'none'}" + (" too." if unknown and chosen else ".")
        )
    values = {s: float(chosen.get(s, 0.0)) for s in names}
    if any(v < 0 or not math.isfinite(v) for v in values.values()) or not math.isclose(
        sum(values.values()), 1.0, abs_tol=1e-6
    ):
        raise ManifestError(f"Split rule {kind!r} needs non-negative {field} summing to 1; got {values}.")
    return values


def percent(fractions: Mapping[str, float]) -> str:
    """``56/12/12/20 train/dev/dev_test/test``: shares and the splits they go to."""
    return "/".join(f"{round(100 * v):g}" for v in fractions.values()) + " " + "/".join(fractions)


__all__ = ["checked_fractions", "deal", "percent", "round_to_total"]
