"""A task's prepared data, read back for a run: its split arrays (the task-resolution central
squares; the stored originals of the splits asked for), every shard checked against the
index, and the index checked to follow the task's split rule (:mod:`.prepare` writes them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from services.core.errors import DatasetFormatError, DatasetNotFoundError
from services.store.objects.base import ObjectStore
from workers.stream.manifest import SPLITS, TaskSpec
from workers.stream.shards import DatasetIndex, load_index, read_labelled
from workers.stream.split_rule import split_rule_key
from workers.stream.task_info import LabelledData, Originals


def follows_rule(index: DatasetIndex, task: TaskSpec) -> bool:
    """Whether a prepared dataset was split by the rule the task asks for (the one check that
    both a rebuild and a run make before trusting a stored split)."""
    return dict(index.split_rule) == split_rule_key(task.split)


@dataclass(frozen=True)
class TaskData:
    """A task's prepared splits, as the stream runner reads them."""

    task: TaskSpec
    index: DatasetIndex
    splits: Mapping[str, tuple[np.ndarray, np.ndarray]]  # split → (images at S, labels)
    originals: Mapping[str, Originals] = field(default_factory=dict)  # splits asked for

    def labelled(self, split: str) -> LabelledData:
        """One split as a learner gets it: images at S, labels, and originals if loaded."""
        images, labels = self.splits[split]
        return LabelledData(images, labels, self.originals.get(split))


def load_task_index(store: ObjectStore, task: TaskSpec, *, image_size: int) -> DatasetIndex:
    """The index of a task's dataset, checked to follow the task's split rule.

    Raises:
        DatasetNotFoundError: the dataset has not been prepared at this size.
        DatasetFormatError: it was prepared under another split rule.
    """
    index = load_index(store, task.dataset, image_size)
    if index is None:
        raise DatasetNotFoundError(
            f"Dataset {task.dataset!r} (task {task.order}) is not prepared at {image_size} px "
            f"in store {store.url}; run `nevis data prepare --stream <stream> "
            f"--image-size {image_size}` first."
        )
    if not follows_rule(index, task):
        raise DatasetFormatError(
            f"Dataset {task.dataset!r} was prepared with split rule {dict(index.split_rule)}, "
            f"but task {task.order} asks for {split_rule_key(task.split)}; run "
            "`nevis data prepare` for this stream again."
        )
    return index


def load_task_data(
    store: ObjectStore,
    task: TaskSpec,
    *,
    image_size: int,
    splits: Sequence[str] = SPLITS,
    originals: Sequence[str] = (),
    index: DatasetIndex | None = None,
) -> TaskData:
    """Read the requested splits of a task (each shard verified).

    ``originals`` names the splits (among ``splits``) whose stored originals are read too:
    the training splits handed to learners that augment; nothing else needs them. ``index``:
    the task's shard index where the caller has read it already.
    """
    index = index if index is not None else load_task_index(store, task, image_size=image_size)
    data = {s: read_labelled(store, index, s, originals=s in originals) for s in splits}
    return TaskData(
        task=task,
        index=index,
        splits={s: (d.images, d.labels) for s, d in data.items()},
        originals={s: d.originals for s, d in data.items() if d.originals is not None},
    )


__all__ = ["TaskData", "follows_rule", "load_task_data", "load_task_index"]
