"""Deal a dataset's rows into the four splits train / dev / dev_test / test.

Guarantees:

- the same labels, rule and given lists always give the same split (numpy's legacy
  ``RandomState``, whose stream numpy keeps fixed, seeded with the rule's seed, or under a
  deployment's secret salt with a keyed seed: :mod:`workers.stream.split_salt`);
- the splits are disjoint and cover every row (except the source's test rows under a
  ``random`` rule with ``pool: source_train``, which the reference leaves out too);
- single-label draws are stratified: classes are visited in ascending order and each class's
  rows are shuffled and cut by the fractions; the rounding remainder is carried from class to
  class, so each class is within one example of its share and the whole split is too;
- ``official_test`` never moves a row of the source's test set out of ``test``, and
  ``provided`` keeps the source's train and test lists as they are;
- a rule that needs per-row metadata or the source's own lists and does not get them stops
  with an error naming what is missing; it never falls back to a random draw.

The rule kinds are described in :mod:`workers.stream.split_rule`; this module applies the
general ones and :mod:`workers.stream.split_reference` the ones that reproduce NEVIS'22's
custom splits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from services.core.errors import DatasetFormatError, ManifestError
from workers.stream import split_reference
from workers.stream.adapters.base import GivenSplits
from workers.stream.dealing import checked_fractions, deal, percent
from workers.stream.split_rule import SOURCE_TRAIN, SPLIT_KINDS, SPLITS, SplitRule
from workers.stream.split_salt import split_rng

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


def assign_splits(  # noqa: C901
    labels: np.ndarray,
    *,
    rule: SplitRule,
    given: GivenSplits | None = None,
    attributes: Mapping[str, np.ndarray] | None = None,
    dataset: str = "This dataset",
    salt: str = "",
) -> SplitAssignment:
    """Split rows following ``rule``.

    Args:
        labels: int64 ``[N]`` (single-label, stratified) or multi-hot ``[N, K]`` (plain draw).
        rule: the manifest's split rule.
        given: the index lists the source ships, needed by ``official_test``, ``provided``,
            ``official_val``, ``held_out_parts`` and a ``by_attribute`` rule with
            ``source_test``.
        attributes: per-row metadata (name -> array [N]) for the kinds that split on it.
        dataset: how errors name the dataset, e.g. ``"Dataset 'nevis:coil100'"``; it also
            keys a salted draw.
        salt: the deployment's secret split salt (:mod:`workers.stream.split_salt`); "" draws
            with the rule's seed, as the reference does.

    Raises:
        ManifestError: the rule's fractions are malformed.
        DatasetFormatError: the rule needs split lists or an attribute the source does not
            have (never answered with a random draw instead).
    """
    n = int(labels.shape[0])
    rng = split_rng(rule.seed, salt, dataset)
    attributes = attributes or {}
    if rule.kind == "official_val":
        rows, how = split_reference.official_val(rule, labels, given, rng, dataset)
    elif rule.kind == "by_attribute":
        rows, how = split_reference.by_attribute(rule, attributes, given, n, dataset)
    elif rule.kind == "held_out":
        rows, how = split_reference.held_out(rule, labels, attributes, n, rng, dataset)
    elif rule.kind == "held_out_parts":
        rows, how = split_reference.held_out_parts(rule, attributes, given, n, dataset)
    elif rule.kind == "per_class_counts":
        rows, how = split_reference.per_class_counts(rule, labels, rng, dataset)
    elif rule.kind == "random" and rule.train_only:
        rows, how = split_reference.random_with_train_only(rule, labels, attributes, n, rng, dataset)
    elif rule.kind == "random" and rule.pool:
        rows, how = _random_over_source_train(rule, labels, given, rng, dataset)
    elif rule.kind == "random":
        fractions = checked_fractions(rule.kind, rule.fractions, SPLITS, DEFAULT_RANDOM)
        rows = deal(np.arange(n, dtype=np.int64), labels, fractions, rng)
        how = f"random {percent(fractions)} over all {n} rows, seed {rule.seed}"
    elif rule.kind == "official_test":
        if given is None:
            raise DatasetFormatError(
                "The split rule 'official_test' needs the source's own test set, but this "
                "dataset has none; use a 'random' split rule for it in the manifest."
            )
        fractions = checked_fractions(rule.kind, rule.fractions, SPLITS[:3], DEFAULT_OFFICIAL)
        pool = given.pool
        rows = {**deal(pool, labels[pool], fractions, rng), "test": np.sort(given.test)}
        how = f"source test kept; source train ({len(pool)} rows) drawn {percent(fractions)}"
    elif rule.kind == "provided":
        if given is None:
            raise DatasetFormatError(
                "The split rule 'provided' needs train / val / test lists in the dataset's "
                "sidecar ('split' block), but this dataset has none."
            )
        if given.val is None:  # only train / test: draw dev and dev_test from train
            return assign_splits(
                labels, rule=SplitRule(kind="official_test", seed=rule.seed), given=given, dataset=dataset, salt=salt
            )
        halves = deal(given.val, labels[given.val], {"dev": 0.5, "dev_test": 0.5}, rng)
        rows = {"train": np.sort(given.train), **halves, "test": np.sort(given.test)}
        how = f"provided train/test; provided val halved into dev/dev_test, seed {rule.seed}"
    else:
        raise ManifestError(f"Unknown split rule kind {rule.kind!r}; use one of {', '.join(SPLIT_KINDS)}.")
    if salt:
        how += "; draws salted (NEVIS_SPLIT_SALT)"
    return SplitAssignment(rows={s: rows[s] for s in SPLITS}, how=how)


def _random_over_source_train(
    rule: SplitRule, labels: np.ndarray, given: GivenSplits | None, rng: np.random.RandomState, dataset: str
) -> tuple[dict[str, np.ndarray], str]:
    """A random draw over the source's train + val lists; its test rows go to no split."""
    if rule.pool != SOURCE_TRAIN:
        raise ManifestError(f"Unknown pool {rule.pool!r} of a random split rule; use {SOURCE_TRAIN!r} or leave it out.")
    if given is None:
        raise DatasetFormatError(
            f"{dataset}: the split rule 'random' with pool {SOURCE_TRAIN!r} draws over the "
            "source's train (and val) lists, but this dataset has no 'split' block."
        )
    fractions = checked_fractions(rule.kind, rule.fractions, SPLITS, DEFAULT_RANDOM)
    pool = given.pool
    rows = deal(pool, labels[pool], fractions, rng)
    return rows, (
        f"random {percent(fractions)} over the source's train part ({len(pool)} rows), seed "
        f"{rule.seed}; its {len(given.test)} test rows left out"
    )


__all__ = ["DEFAULT_OFFICIAL", "DEFAULT_RANDOM", "SplitAssignment", "assign_splits", "deal"]
