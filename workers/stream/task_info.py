"""What a learner may know about a task (:class:`TaskInfo`) and the data it gets
(:class:`LabelledData`).

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


@dataclass(frozen=True)
class LabelledData:
    """Images (uint8, N×S×S×3) and labels (int64 [N], or uint8 multi-hot [N, K])."""

    images: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return int(self.images.shape[0])


def task_info(task: TaskSpec, index: Any, size: int) -> TaskInfo:
    """What a learner may know about a task: metadata and split sizes from its shard index
    (``None`` before the shards exist), no data."""
    class_names = tuple(index.class_names) if index is not None else ()
    num_classes = index.num_classes if index is not None else (task.num_classes or 0)
    counts = index.counts if index is not None else {}
    return TaskInfo(
        order=task.order, key=task.key, dataset=task.dataset, title=task.title, year=task.year,
        domain=task.domain, kind=task.kind, num_classes=num_classes, class_names=class_names,
        image_size=size, num_train=int(counts.get("train", 0)), num_dev=int(counts.get("dev", 0)),
    )


__all__ = ["LabelledData", "TaskInfo", "task_info"]
