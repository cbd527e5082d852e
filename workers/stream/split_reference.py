"""The split rule kinds that reproduce NEVIS'22's custom splits (dm_nevis).

Each function returns ``(rows per split, how)`` for one kind described in
:mod:`workers.stream.split_rule`. A rule that needs per-row metadata (an attribute) or the
source's own parts stops with an error that names what is missing: it never falls back to a
random draw, because a random draw is a different (usually easier) task.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from services.core.errors import DatasetFormatError
from workers.stream.adapters.base import GivenSplits
from workers.stream.dealing import checked_fractions, deal, percent
from workers.stream.split_rule import COUNTED_SPLITS, REST, SOURCE_TEST, SPLITS, SplitRule

Rows = dict[str, np.ndarray]


def official_val(
    rule: SplitRule, labels: np.ndarray, given: GivenSplits | None, rng: np.random.RandomState, dataset: str
) -> tuple[Rows, str]:
    """Source train drawn into train / dev; val -> dev_test (or drawn into dev_test / test)."""
    if given is None or given.val is None:
        raise DatasetFormatError(
            f"{dataset}: the split rule 'official_val' needs the source's train / val / test "
            "lists (the sidecar's 'split' block with 'val'), but this dataset has "
            + ("none." if given is None else "no 'val' list.")
        )
    fractions = checked_fractions(rule.kind, rule.fractions, ("train", "dev"))
    rows = deal(given.train, labels[given.train], fractions, rng)
    how = f"source train ({len(given.train)} rows) drawn {percent(fractions)}; "
    if not rule.test_fractions:
        rows.update(dev_test=np.sort(given.val), test=np.sort(given.test))
        return rows, how + "source val is dev_test, source test is test"
    if len(given.test):
        raise DatasetFormatError(
            f"{dataset}: the split rule 'official_val' with test_fractions draws test from the "
            f"source's val, but the source also has {len(given.test)} test rows, which it "
            "would drop; leave the sidecar's 'test' list empty, or drop test_fractions."
        )
    shares = checked_fractions(rule.kind, rule.test_fractions, ("dev_test", "test"), field="test_fractions")
    rows.update(deal(given.val, labels[given.val], shares, rng))
    return rows, how + f"source val ({len(given.val)} rows) drawn {percent(shares)}"


def by_attribute(
    rule: SplitRule, attributes: Mapping[str, np.ndarray], given: GivenSplits | None, n: int, dataset: str
) -> tuple[Rows, str]:
    """Each row goes to the split that lists its attribute value (``rest``: all others)."""
    column = attribute_column(rule, attributes, n, dataset)
    rows: Rows = {}
    pool = np.arange(n, dtype=np.int64)
    if rule.values.get("test") == SOURCE_TEST:
        if given is None:
            raise DatasetFormatError(
                f"{dataset}: the split rule 'by_attribute' takes test from the source's test "
                "list ('source_test'), but this dataset has no 'split' block."
            )
        rows["test"], pool = np.sort(given.test), given.pool
    owner = {v: s for s, listed in rule.values.items() if not isinstance(listed, str) for v in listed}
    rest = next((s for s, v in rule.values.items() if v == REST), None)
    placed = [owner.get(v, rest) for v in column[pool].tolist()]
    stray = sorted({v for v, s in zip(column[pool].tolist(), placed) if s is None}, key=str)
    if stray:
        raise DatasetFormatError(
            f"{dataset}: rows have {rule.attribute!r} values the split rule places in no split: "
            f"{_sample(stray)}; list them in the rule's 'values' (or use {REST!r})."
        )
    missing = sorted(set(owner) - set(column[pool].tolist()), key=str)
    if missing:
        raise DatasetFormatError(
            f"{dataset}: the split rule lists {rule.attribute!r} values no row has: "
            f"{_sample(missing)}; the dataset's attribute does not match the rule."
        )
    assigned = np.asarray(placed, dtype=object)
    for split in SPLITS:
        if split not in rows:
            rows[split] = np.sort(pool[assigned == split]).astype(np.int64)
    counts = "/".join(str(len(rows[s])) for s in SPLITS)
    return rows, f"by {rule.attribute!r}: {counts} rows train/dev/dev_test/test"


def held_out(
    rule: SplitRule,
    labels: np.ndarray,
    attributes: Mapping[str, np.ndarray],
    n: int,
    rng: np.random.RandomState,
    dataset: str,
) -> tuple[Rows, str]:
    """Kept domains drawn into train / dev, held-out domains into dev_test / test."""
    held = _held_mask(rule, attributes, n, dataset)
    kept_rows, held_rows = np.flatnonzero(~held), np.flatnonzero(held)
    fractions = checked_fractions(rule.kind, rule.fractions, ("train", "dev"))
    shares = checked_fractions(rule.kind, rule.test_fractions, ("dev_test", "test"), field="test_fractions")
    rows = {**deal(kept_rows, labels[kept_rows], fractions, rng), **deal(held_rows, labels[held_rows], shares, rng)}
    return rows, (
        f"{rule.attribute!r} {_sample(list(rule.held_out))} held out ({len(held_rows)} rows, "
        f"drawn {percent(shares)}); the other {len(kept_rows)} rows drawn {percent(fractions)}"
    )


def held_out_parts(
    rule: SplitRule, attributes: Mapping[str, np.ndarray], given: GivenSplits | None, n: int, dataset: str
) -> tuple[Rows, str]:
    """Source train / test of kept domains -> train / dev; of held-out -> dev_test / test."""
    if given is None or given.val is not None:
        raise DatasetFormatError(
            f"{dataset}: the split rule 'held_out_parts' needs the source's train / test lists "
            "and no val list (the sidecar's 'split' block), but this dataset has "
            + ("none." if given is None else "a val list too.")
        )
    held = _held_mask(rule, attributes, n, dataset)
    train, test = np.sort(given.train), np.sort(given.test)
    rows = {
        "train": train[~held[train]],
        "dev": test[~held[test]],
        "dev_test": train[held[train]],
        "test": test[held[test]],
    }
    return rows, (
        f"source train/test of kept {rule.attribute!r} -> train/dev, of held-out "
        f"{_sample(list(rule.held_out))} -> dev_test/test"
    )


def per_class_counts(rule: SplitRule, labels: np.ndarray, rng: np.random.RandomState, dataset: str) -> tuple[Rows, str]:
    """Per class: fixed counts to dev / dev_test / test (last rows or seeded), rest train."""
    if labels.ndim != 1:
        raise DatasetFormatError(f"{dataset}: the split rule 'per_class_counts' needs single-label data.")
    counts = [int(rule.counts.get(s, 0)) for s in COUNTED_SPLITS]
    if rule.pick not in ("last", "random") or not sum(counts):
        raise DatasetFormatError(
            f"{dataset}: the split rule 'per_class_counts' needs counts for "
            f"{', '.join(COUNTED_SPLITS)} and pick 'last' or 'random'; got {dict(rule.counts)}, "
            f"{rule.pick!r}."
        )
    out: dict[str, list[np.ndarray]] = {s: [] for s in SPLITS}
    for cls in np.unique(labels):
        members = np.flatnonzero(labels == cls)  # dataset order
        if len(members) <= sum(counts):
            raise DatasetFormatError(
                f"{dataset}: class {int(cls)} has {len(members)} rows; the split rule puts "
                f"{sum(counts)} of each class outside train, so every class needs more."
            )
        if rule.pick == "random":
            members = members[rng.permutation(len(members))]
        cuts = np.cumsum([len(members) - sum(counts), *counts])[:-1]
        for split, part in zip(SPLITS, np.split(members, cuts)):
            out[split].append(part)
    rows = {s: np.sort(np.concatenate(out[s])).astype(np.int64) for s in SPLITS}
    listed = "/".join(str(c) for c in counts)
    return rows, f"per class: {listed} dev/dev_test/test ({rule.pick} rows), the rest train"


def random_with_train_only(
    rule: SplitRule,
    labels: np.ndarray,
    attributes: Mapping[str, np.ndarray],
    n: int,
    rng: np.random.RandomState,
    dataset: str,
) -> tuple[Rows, str]:
    """Rows with a ``train_only`` attribute value go to train; the rest are drawn."""
    if rule.pool:
        raise DatasetFormatError(f"{dataset}: a random split rule takes either 'pool' or 'train_only', not both.")
    column = attribute_column(rule, attributes, n, dataset).tolist()
    fixed_values = set(rule.train_only)
    absent = sorted(fixed_values - set(column), key=str)
    if absent:
        raise DatasetFormatError(
            f"{dataset}: the split rule keeps {rule.attribute!r} values {_sample(absent)} in "
            "train, but no row has them."
        )
    fixed = np.fromiter((v in fixed_values for v in column), dtype=bool, count=n)
    drawn_rows = np.flatnonzero(~fixed)
    fractions = checked_fractions(rule.kind, rule.fractions, SPLITS)
    rows = deal(drawn_rows, labels[drawn_rows], fractions, rng)
    rows["train"] = np.sort(np.concatenate([rows["train"], np.flatnonzero(fixed)]))
    return rows, (
        f"random {percent(fractions)} over {len(drawn_rows)} rows, seed {rule.seed}; "
        f"{int(fixed.sum())} rows with {rule.attribute!r} in {_sample(list(rule.train_only))} "
        "always in train"
    )


def attribute_column(rule: SplitRule, attributes: Mapping[str, np.ndarray], n: int, dataset: str) -> np.ndarray:
    """The rule's attribute, one value per row, or an error that names the missing field."""
    if not rule.attribute:
        raise DatasetFormatError(f"{dataset}: the split rule {rule.kind!r} names no attribute.")
    column = attributes.get(rule.attribute)
    if column is None:
        have = ", ".join(sorted(attributes)) or "none"
        raise DatasetFormatError(
            f"{dataset}: the split rule {rule.kind!r} needs the per-row attribute "
            f"{rule.attribute!r}, which this dataset does not provide (attributes it has: "
            f'{have}). Add "attributes": {{"{rule.attribute}": [one value per row]}} to its '
            "JSON sidecar."
        )
    if len(column) != n:
        raise DatasetFormatError(f"{dataset}: attribute {rule.attribute!r} has {len(column)} values for {n} rows.")
    return column


def _held_mask(rule: SplitRule, attributes: Mapping[str, np.ndarray], n: int, dataset: str) -> np.ndarray:
    column = attribute_column(rule, attributes, n, dataset).tolist()
    absent = sorted(set(rule.held_out) - set(column), key=str)
    if not rule.held_out or absent:
        raise DatasetFormatError(
            f"{dataset}: the split rule {rule.kind!r} holds out {rule.attribute!r} values "
            f"{_sample(absent or ['(none given)'])} that no row has."
        )
    held_values = set(rule.held_out)
    held = np.fromiter((v in held_values for v in column), dtype=bool, count=n)
    if held.all():
        raise DatasetFormatError(
            f"{dataset}: every row has a held-out {rule.attribute!r}; nothing is left to train on."
        )
    return held


def _sample(values: list[object], limit: int = 8) -> str:
    shown = ", ".join(repr(v) for v in values[:limit])
    return f"[{shown}{', ...' if len(values) > limit else ''}]"


__all__ = [
    "attribute_column",
    "by_attribute",
    "held_out",
    "held_out_parts",
    "official_val",
    "per_class_counts",
    "random_with_train_only",
]
