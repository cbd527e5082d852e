"""Remove exact duplicate images, so that no image is in two splits.

Duplicates are found on the stored-resolution bytes (two source images that become equal
after resizing count as one). Of each group of equal images one copy is kept: the one in the
split that comes first in :data:`KEEP_ORDER` (test before dev_test before dev before train,
so nothing of test leaks into train), and within that split the lowest row id.

Guarantee: after :func:`dedup_splits`, no image hash appears twice, in one split or across
splits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from workers.stream.manifest import SPLITS
from workers.stream.splits import SplitAssignment

KEEP_ORDER: tuple[str, ...] = ("test", "dev_test", "dev", "train")


@dataclass(frozen=True)
class DedupStats:
    """How many rows each split lost, and why."""

    removed_within: Mapping[str, int]  # copies of an image kept elsewhere in the same split
    removed_across: Mapping[str, int]  # copies of an image kept in a higher-priority split

    @property
    def removed(self) -> dict[str, int]:
        return {s: self.removed_within[s] + self.removed_across[s] for s in SPLITS}

    @property
    def total_removed(self) -> int:
        return sum(self.removed.values())

    def as_dict(self) -> dict[str, object]:
        return {
            "method": "sha256 of stored-resolution bytes; keep order " + " > ".join(KEEP_ORDER),
            "removed": self.removed,
            "removed_within_split": dict(self.removed_within),
            "removed_across_splits": dict(self.removed_across),
            "total_removed": self.total_removed,
        }


def image_hashes(images: np.ndarray) -> list[bytes]:
    """sha256 digest of each image's bytes (``images`` is ``[N, ...]`` uint8)."""
    images = np.ascontiguousarray(images)
    return [hashlib.sha256(image.tobytes()).digest() for image in images]


def dedup_splits(
    images: np.ndarray, assignment: SplitAssignment
) -> tuple[SplitAssignment, DedupStats]:
    """Drop exact duplicates from ``assignment``.

    Args:
        images: the stored images, indexed by the assignment's row ids.
        assignment: rows per split (disjoint).

    Returns:
        The assignment without duplicates, and per-split removal counts.
    """
    hashes = image_hashes(images)
    owner: dict[bytes, str] = {}
    kept: dict[str, np.ndarray] = {}
    within = dict.fromkeys(SPLITS, 0)
    across = dict.fromkeys(SPLITS, 0)
    for split in KEEP_ORDER:
        rows = np.sort(np.asarray(assignment.rows[split], dtype=np.int64))
        keep = np.ones(len(rows), dtype=bool)
        for position, row in enumerate(rows):
            digest = hashes[row]
            seen_in = owner.get(digest)
            if seen_in is None:
                owner[digest] = split
                continue
            keep[position] = False
            if seen_in == split:
                within[split] += 1
            else:
                across[split] += 1
        kept[split] = rows[keep]
    how = assignment.how
    removed = sum(within.values()) + sum(across.values())
    if removed:
        how += f"; {removed} exact duplicate images removed"
    return (
        SplitAssignment(rows={s: kept[s] for s in SPLITS}, how=how),
        DedupStats(removed_within=within, removed_across=across),
    )


__all__ = ["KEEP_ORDER", "DedupStats", "dedup_splits", "image_hashes"]
