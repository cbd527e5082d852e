"""What a learner may know about a task (:class:`TaskInfo`) and the data it gets
(:class:`LabelledData`, with the stored :class:`Originals` for learners that augment).

They live in the stream layer because the causal task view hands them out and the stream's
shards define them; the learner protocol re-exports both, so learner authors import them
from :mod:`workers.learners.protocol`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from workers.stream.manifest import TaskSpec


@dataclass(frozen=True)
class TaskInfo:
    """Metadata of a task that a learner may read (no data, no test information)."""

    order: int
    key: str
    dataset: str
    title: str
    year: int
    domain: str | None
    kind: Literal["single", "multi"]
    num_classes: int
    class_names: tuple[str, ...]
    image_size: int
    num_train: int
    num_dev: int
    # The task's cFLOP cap under the run's ruleset (budget-<X>), so a search can plan to it: the
    # harness stops the task's trials once they spent this in all. None: no cap.
    flop_budget: float | None = None


@dataclass(frozen=True)
class Originals:
    """The stored originals of a split: each image with its aspect ratio, larger than S.

    Row i is ``images[i, :h, :w]`` with ``(h, w) = extents[i]``; the rest of the canvas is
    padding that a crop must never read. Training crops come from here, as the reference
    crops from the source image rather than from the task-resolution square.

    Attributes:
        images: uint8 ``[N, H, W, 3]``, the canvas (H, W: the largest extent of the dataset).
        extents: int32 ``[N, 2]``, each row's valid ``(height, width)`` from the top left.
    """

    images: np.ndarray
    extents: np.ndarray

    def __post_init__(self) -> None:
        images, extents = self.images, self.extents
        if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
            raise ValueError(
                "The 'images' parameter of Originals must be uint8 [N, H, W, 3]. "
                f"Got {images.dtype} {images.shape} instead."
            )
        if extents.shape != (images.shape[0], 2):
            raise ValueError(
                f"The 'extents' parameter of Originals must have shape {(images.shape[0], 2)}. "
                f"Got {extents.shape} instead."
            )
        if len(extents) and (extents.min() < 1 or (extents > images.shape[1:3]).any()):
            raise ValueError(
                "The 'extents' parameter of Originals must lie in [1, canvas side] "
                f"(canvas {images.shape[1:3]}). Got values in [{extents.min()}, {extents.max()}]."
            )

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def take(self, index: np.ndarray | slice) -> Originals:
        """The rows ``index`` (numpy indexing), with their extents."""
        return Originals(self.images[index], self.extents[index])


@dataclass(frozen=True)
class LabelledData:
    """Images and labels of a split, plus (where the harness sent them) the stored originals.

    ``images`` (uint8 N×S×S×3) are what the reference evaluates: the central square of each
    original, resized to the task resolution S. Learners that do not augment use them as they
    are. ``originals`` hold the larger, aspect-preserving stored images for training crops;
    ``None`` where they were not sent (dev splits, data built by hand).
    """

    images: np.ndarray
    labels: np.ndarray
    originals: Originals | None = None

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def to_arrays(self) -> list[np.ndarray]:
        """The arrays that carry this split over the learner host's wire (see from_arrays)."""
        extra = [] if self.originals is None else [self.originals.images, self.originals.extents]
        return [self.images, self.labels, *extra]

    @classmethod
    def from_arrays(cls, arrays: list[np.ndarray]) -> LabelledData:
        """Rebuild a split from :meth:`to_arrays`' output: 2 arrays, or 4 with originals."""
        if len(arrays) not in (2, 4):
            raise ValueError(f"A split travels as 2 or 4 arrays. Got {len(arrays)} instead.")
        originals = Originals(arrays[2], arrays[3]) if len(arrays) == 4 else None
        return cls(arrays[0], arrays[1], originals)

    def crop_source(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """What to take training crops of rows ``index`` from: ``(images, extents)``.

        The originals and their valid extents where present; otherwise the task-resolution
        images, whole (extents ``None``), so augmenting code works on either.
        """
        if self.originals is None:
            return self.images[index], None
        return self.originals.images[index], self.originals.extents[index]


def task_info(task: TaskSpec, index: Any, size: int) -> TaskInfo:
    """What a learner may know about a task: metadata and split sizes from its shard index
    (``None`` before the shards exist), no data."""
    class_names = tuple(index.class_names) if index is not None else ()
    num_classes = index.num_classes if index is not None else (task.num_classes or 0)
    counts = index.counts if index is not None else {}
    return TaskInfo(
        order=task.order,
        key=task.key,
        dataset=task.dataset,
        title=task.title,
        year=task.year,
        domain=task.domain,
        kind=task.kind,
        num_classes=num_classes,
        class_names=class_names,
        image_size=size,
        num_train=int(counts.get("train", 0)),
        num_dev=int(counts.get("dev", 0)),
    )


__all__ = ["LabelledData", "Originals", "TaskInfo", "task_info"]
