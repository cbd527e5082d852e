"""Deal a dataset's rows into the four splits train / dev / dev_test / test.

Guarantees:

- the same labels, rule and given lists always give the same split (numpy's legacy
  ``RandomState``, whose stream numpy keeps fixed, seeded with the rule's seed);
- the splits are disjoint and cover every row;
- single-label draws are stratified: classes are visited in ascending order and each class's
  rows are shuffled and cut by the fractions; the rounding remainder is carried from class to
  class, so each class is within one example of its share and the whole split is too;
- ``official_test`` never moves a row of the source's test set out of ``test``, and
  ``provided`` keeps the source's train and test lists as they are.

The rule kinds are described on :class:`~workers.stream.manifest.SplitRule`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from services.core.errors import DatasetFormatError, ManifestError
from workers.stream.adapters.base import GivenSplits
from workers.stream.manifest import SPLITS, SplitRule

# Used when a rule gives no fractions: NEVIS'22's random 56/12/12/20, and 70/15/15 of the
# official train set when the source has its own test set.
DEFAULT_RANDOM = {"train": 0.56, "dev": 0.12, "dev_test": 0.12, "test": 0.20}
DEFAULT_OFFICIAL = {"train": 0.70, "dev": 0.15, "dev_test": 0.15}


@dataclass(frozen=True)
class SplitAssignment:
    """Sorted int64 row ids of the raw dataset for each of :data:`SPLITS`."""

    rows: Mapping[str, np.ndarray]
    how: str  # one line on how the rule was applied, for the shard index

    @property
    def counts(self) -> dict[str, int]:
        return {split: int(len(self.rows[split])) for split in SPLITS}


def assign_splits(
    labels: np.ndarray, *, rule: SplitRule, given: GivenSplits | None = None
) -> SplitAssignment:
    """Split rows following ``rule``.

    Args:
        labels: int64 ``[N]`` (single-label, stratified) or multi-hot ``[N, K]`` (plain draw).
        rule: the manifest's split rule.
        given: the index lists the source ships, needed by ``official_test`` and ``provided``.

    Raises:
        ManifestError: the rule's fractions are malformed.
        DatasetFormatError: the rule needs split lists the source does not have.
    """
    n = int(labels.shape[0])
    rng = np.random.RandomState(rule.seed)
    if rule.kind == "random":
        fractions = _fractions(rule, SPLITS, DEFAULT_RANDOM)
        rows = deal(np.arange(n, dtype=np.int64), labels, fractions, rng)
        how = f"random {_percent(fractions)} over all {n} rows, seed {rule.seed}"
    elif rule.kind == "official_test":
        if given is None:
            raise DatasetFormatError(
                "The split rule 'official_test' needs the source's own test set, but this "
                "dataset has none; use a 'random' split rule for it in the manifest."
            )
        fractions = _fractions(rule, SPLITS[:3], DEFAULT_OFFICIAL)
        pool = given.pool
        rows = {**deal(pool, labels[pool], fractions, rng), "test": np.sort(given.test)}
        how = f"source test kept; source train ({len(pool)} rows) drawn {_percent(fractions)}"
    elif rule.kind == "provided":
        if given is None:
            raise DatasetFormatError(
                "The split rule 'provided' needs train / val / test lists in the dataset's "
                "sidecar ('split' block), but this dataset has none."
            )
        if given.val is None:  # only train / test: draw dev and dev_test from train
            return assign_splits(
                labels, rule=SplitRule(kind="official_test", seed=rule.seed), given=given
            )
        halves = deal(given.val, labels[given.val], {"dev": 0.5, "dev_test": 0.5}, rng)
        rows = {"train": np.sort(given.train), **halves, "test": np.sort(given.test)}
        how = f"provided train/test; provided val halved into dev/dev_test, seed {rule.seed}"
    else:
        raise ManifestError(
            f"Unknown split rule kind {rule.kind!r}; use random, official_test or provided."
        )
    return SplitAssignment(rows={s: rows[s] for s in SPLITS}, how=how)


def deal(
    rows: np.ndarray,
    labels: np.ndarray,
    fractions: Mapping[str, float],
    rng: np.random.RandomState,
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
        counts = _round_to_total(quota, len(group))
        carry = quota - counts
        for name, part in zip(names, np.split(shuffled, np.cumsum(counts)[:-1])):
            out[name].append(part)
    return {s: np.sort(np.concatenate(out[s])).astype(np.int64) for s in names}


def _round_to_total(quota: np.ndarray, total: int) -> np.ndarray:
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


def _fractions(
    rule: SplitRule, names: Sequence[str], default: Mapping[str, float]
) -> dict[str, float]:
    """The rule's fractions over ``names`` (missing names get 0), checked to sum to 1."""
    given = dict(rule.fractions) or dict(default)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ManifestError(
            f"Split rule {rule.kind!r} takes fractions for {', '.join(names)}; "
            f"got {', '.join(unknown)} too."
        )
    values = {s: float(given.get(s, 0.0)) for s in names}
    if any(v < 0 or not math.isfinite(v) for v in values.values()) or not math.isclose(
        sum(values.values()), 1.0, abs_tol=1e-6
    ):
        raise ManifestError(
            f"Split rule {rule.kind!r} needs non-negative fractions summing to 1; got {values}."
        )
    return values


def _percent(fractions: Mapping[str, float]) -> str:
    return "/".join(f"{round(100 * v):g}" for v in fractions.values()) + " " + "/".join(fractions)


__all__ = ["DEFAULT_OFFICIAL", "DEFAULT_RANDOM", "SplitAssignment", "assign_splits", "deal"]
