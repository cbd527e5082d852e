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


class FirstCopies:
    """Decides, one row at a time, whether a row holds the first copy of its image.

    Fed split by split in :data:`KEEP_ORDER`, each split's rows ascending, it keeps exactly
    the rows :func:`dedup_splits` keeps. Streaming preparation feeds it shard by shard, so
    it never needs every image at once: it holds one digest per distinct image.
    """

    def __init__(self) -> None:
        self.owner: dict[bytes, str] = {}
        self.within = dict.fromkeys(SPLITS, 0)
        self.across = dict.fromkeys(SPLITS, 0)

    def keep(self, split: str, digest: bytes) -> bool:
        """Whether the row of ``split`` whose image has ``digest`` is kept."""
        seen_in = self.owner.get(digest)
        if seen_in is None:
            self.owner[digest] = split
            return True
        if seen_in == split:
            self.within[split] += 1
        else:
            self.across[split] += 1
        return False

    @property
    def stats(self) -> DedupStats:
        return DedupStats(removed_within=dict(self.within), removed_across=dict(self.across))

    def how(self, how: str) -> str:
        """A split's description, with the number of duplicates removed (if any)."""
        removed = sum(self.within.values()) + sum(self.across.values())
        return how + (f"; {removed} exact duplicate images removed" if removed else "")


def dedup_splits(images: np.ndarray, assignment: SplitAssignment) -> tuple[SplitAssignment, DedupStats]:
    """Drop exact duplicates from ``assignment``.

    Args:
        images: the stored images, indexed by the assignment's row ids.
        assignment: rows per split (disjoint).

    Returns:
        The assignment without duplicates, and per-split removal counts.
    """
    hashes = image_hashes(images)
    first = FirstCopies()
    kept: dict[str, np.ndarray] = {}
    for split in KEEP_ORDER:
        rows = np.sort(np.asarray(assignment.rows[split], dtype=np.int64))
        keep = np.fromiter((first.keep(split, hashes[row]) for row in rows), bool, len(rows))
        kept[split] = rows[keep]
    return (SplitAssignment(rows={s: kept[s] for s in SPLITS}, how=first.how(assignment.how)), first.stats)


__all__ = ["KEEP_ORDER", "DedupStats", "FirstCopies", "dedup_splits", "image_hashes"]
