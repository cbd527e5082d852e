"""The images a probe job needs from a task, read once per worker and kept small.

A probe job on a checkpoint of task i reads: the current task's train split (the probes'
examples and LiDAR's clean images) and dev split (the pretext error), and the train split
of every target task. Only seeded subsamples are kept (``max_examples`` probe examples,
``lidar_n`` clean images, ``max_examples`` dev examples), in a small per-worker LRU cache,
since consecutive jobs of a worker usually share tasks. Test splits are never read.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.store.db.models import StreamVersion
from services.store.objects import ObjectStore
from workers.probe.folds import subsample
from workers.stream.manifest import StreamManifest, TaskSpec
from workers.stream.prepare import load_task_data
from workers.stream.task_info import TaskInfo, task_info
from workers.stream.versions import stored_manifest


@dataclass(frozen=True)
class TaskSamples:
    """Seeded subsamples of one task's train and dev splits, and what the learner may know."""

    order: int
    kind: str
    num_classes: int
    probe_images: np.ndarray
    probe_labels: np.ndarray
    lidar_images: np.ndarray
    dev_images: np.ndarray
    dev_labels: np.ndarray
    info: TaskInfo


def sample_task(task: TaskSpec, data: Any, *, image_size: int, max_examples: int,
                lidar_n: int, seed: int) -> TaskSamples:
    """Subsample a task's loaded splits (see the module docstring)."""
    images, labels = data.splits["train"]
    dev_images, dev_labels = data.splits["dev"]
    probe = subsample(len(images), max_examples, seed=seed)
    clean = subsample(len(images), lidar_n, seed=seed + 1)
    dev = subsample(len(dev_images), max_examples, seed=seed + 2)
    return TaskSamples(
        order=task.order, kind=task.kind, num_classes=data.index.num_classes,
        probe_images=images[probe], probe_labels=labels[probe], lidar_images=images[clean],
        dev_images=dev_images[dev], dev_labels=dev_labels[dev],
        info=task_info(task, data.index, image_size),
    )


class TaskCache:
    """Per-worker cache of manifests and task samples (least recently used goes first)."""

    def __init__(self, store: ObjectStore, *, max_tasks: int = 8) -> None:
        self.store = store
        self.max_tasks = max_tasks
        self._manifests: dict[str, StreamManifest] = {}
        self._samples: OrderedDict[tuple[Any, ...], TaskSamples] = OrderedDict()

    def manifest(self, version: StreamVersion) -> StreamManifest:
        """The manifest a stream version row holds, parsed once per worker."""
        key = f"{version.name}@{version.version}:{version.manifest_sha256}"
        if key not in self._manifests:
            self._manifests[key] = stored_manifest(version)
        return self._manifests[key]

    def samples(self, manifest: StreamManifest, order: int, *, image_size: int, max_examples: int,
                lidar_n: int, seed: int) -> TaskSamples:
        key = (manifest.name, manifest.version, order, image_size, max_examples, lidar_n, seed)
        if key in self._samples:
            self._samples.move_to_end(key)
            return self._samples[key]
        task = next(t for t in manifest.tasks if t.order == order)
        data = load_task_data(self.store, task, image_size=image_size, splits=("train", "dev"))
        samples = sample_task(task, data, image_size=image_size, max_examples=max_examples,
                              lidar_n=lidar_n, seed=seed)
        self._samples[key] = samples
        while len(self._samples) > self.max_tasks:
            self._samples.popitem(last=False)
        return samples


__all__ = ["TaskCache", "TaskSamples", "sample_task"]
