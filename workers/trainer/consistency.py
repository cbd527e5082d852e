"""The consistency check of a meta-test evaluation: does the learner's error jump when a few
test images are moved by one pixel?

Why: NEVIS'22's data is public, so a submission can carry a table from image to label
(docs/isolation.md, "Public data"). A table keyed by exact bytes answers the original test
images and nothing else; a learner that generalises answers a copy shifted by one pixel almost
as it answers the original. So a secret sample of each task's test images is scored twice in
the same ``predict`` call, as the originals and as copies shifted one pixel in a secret
direction (edges repeated), all shuffled together; the original images' predictions alone make
the task's error. A learner right on the originals and wrong on their copies far more often
than the reverse is marked.

The sample, the direction and the order come from the operating system's randomness, drawn
per evaluation in harness code and never stored or shown, so a learner cannot tell which
images are copies except by matching them to the originals it was given alongside (docs say
what this check does not catch).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import numpy as np

SAMPLE = 64
"""Test images of a task scored twice (all of them when fewer)."""
MIN_SAMPLE = 8
"""Fewer test images than this: no check (too few to tell a jump from noise)."""
JUMP = 0.15
"""A net share of the sample right as original and wrong as copy above this is marked."""
ALPHA = 1e-3
"""... and only when a one-sided sign test gives p below this (an honest learner's flips go both ways)."""
SHIFTS: tuple[tuple[int, int], ...] = ((0, 1), (0, -1), (1, 0), (-1, 0))


@dataclass(frozen=True)
class ConsistencyPlan:
    """What one evaluation scores: the images in a secret order, and where each came from."""

    images: np.ndarray  # originals and copies, shuffled: what ``predict`` sees
    order: np.ndarray  # position in ``images`` of [original 0..N-1, copy 0..k-1]
    sample: np.ndarray  # rows of the originals that were copied

    @property
    def num_originals(self) -> int:
        return len(self.order) - len(self.sample)

    def originals(self, scores: np.ndarray) -> np.ndarray:
        """The originals' scores, in their own order (what the task's error is computed on)."""
        return scores[self.order[: self.num_originals]]

    def copies(self, scores: np.ndarray) -> np.ndarray:
        """The shifted copies' scores, in :attr:`sample` order."""
        return scores[self.order[self.num_originals :]]


@dataclass(frozen=True)
class Consistency:
    """The check's outcome for one task (what is stored and shown)."""

    checked: int  # images scored twice (0: no check)
    right_then_wrong: int  # right as original, wrong as copy
    wrong_then_right: int
    flagged: bool

    @property
    def jump(self) -> float | None:
        """The net share of the sample lost by shifting one pixel (None when not checked)."""
        if not self.checked:
            return None
        return (self.right_then_wrong - self.wrong_then_right) / self.checked


def plan_check(images: np.ndarray, *, enabled: bool = True, rng: np.random.Generator | None = None) -> ConsistencyPlan:
    """The evaluation's input: ``images`` plus shifted copies of a secret sample, shuffled
    (not ``enabled``, or too few images: ``images`` as they are, nothing checked).

    ``rng`` is for tests; by default the draw is the operating system's.
    """
    n = len(images)
    k = min(SAMPLE, n) if enabled and n >= MIN_SAMPLE else 0
    if not k:
        return ConsistencyPlan(images=images, order=np.arange(n), sample=np.zeros(0, np.int64))
    rng = rng or np.random.default_rng(secrets.randbits(128))
    sample = np.sort(rng.choice(n, size=k, replace=False))
    dy, dx = SHIFTS[int(rng.integers(len(SHIFTS)))]
    copies = shift_one_pixel(images[sample], dy, dx)
    everything = np.concatenate([images, copies])
    permutation = rng.permutation(len(everything))  # images[permutation[i]] is shown at i
    order = np.empty_like(permutation)
    order[permutation] = np.arange(len(everything))
    return ConsistencyPlan(images=everything[permutation], order=order, sample=sample)


def shift_one_pixel(images: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """``images`` [n, H, W, C] moved by (dy, dx) pixels, the uncovered edge repeated."""
    if not len(images):
        return images.copy()
    pad = ((0, 0), (max(dy, 0), max(-dy, 0)), (max(dx, 0), max(-dx, 0)), (0, 0))
    padded = np.pad(images, pad, mode="edge")
    height, width = images.shape[1:3]
    top, left = max(-dy, 0), max(-dx, 0)
    return np.ascontiguousarray(padded[:, top : top + height, left : left + width])


def judge(plan: ConsistencyPlan, scores: np.ndarray, labels: np.ndarray) -> Consistency:
    """Compare the sample's answers as originals and as copies (``labels`` of the originals)."""
    k = len(plan.sample)
    if not k:
        return Consistency(0, 0, 0, False)
    before = _right(plan.originals(scores)[plan.sample], labels[plan.sample])
    after = _right(plan.copies(scores), labels[plan.sample])
    lost, gained = int(np.sum(before & ~after)), int(np.sum(~before & after))
    flagged = (lost - gained) / k > JUMP and _sign_test(lost, gained) < ALPHA
    return Consistency(k, lost, gained, bool(flagged))


def _right(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per example: the top-scored class is a right one (single- or multi-label)."""
    top = scores.argmax(axis=1)
    if labels.ndim == 1:
        return top == labels
    return labels[np.arange(len(labels)), top] > 0


def _sign_test(lost: int, gained: int) -> float:
    """One-sided p of at least ``lost`` of ``lost + gained`` flips going one way by chance."""
    n = lost + gained
    if n == 0:
        return 1.0
    return sum(math.comb(n, i) for i in range(lost, n + 1)) / 2**n


__all__ = [
    "ALPHA",
    "JUMP",
    "MIN_SAMPLE",
    "SAMPLE",
    "Consistency",
    "ConsistencyPlan",
    "judge",
    "plan_check",
    "shift_one_pixel",
]
