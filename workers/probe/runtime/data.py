"""The images a probe job needs from a task, read once per worker and kept small.

Probes look only at data the backbone never trained on (METRICS.md §2 compares a model on
held-out data): each target task's ``dev`` and ``dev_test`` splits (:data:`PROBE_SPLITS`),
never ``train`` (the backbone's gradient steps) and never ``test`` (the headline). One seeded
subsample of them (``max_examples``) is the probe examples: the target probes' k folds, the
features RankMe reads, the pretext error and loss of the current task (so m^P and m^T are
measured on the same examples), and, its first ``lidar_n`` rows of another seeded draw,
LiDAR's clean images, with their stored originals (:class:`~workers.stream.task_info.Originals`)
where the shards have them: LiDAR's views are cut from those, as training cuts its crops. Where each example came from is kept (``probe_splits``,
``probe_rows``) so that this can be checked. Samples live in a per-worker LRU cache sized in
bytes, since consecutive jobs of a worker share tasks: a checkpoint job reads its current task
and earlier ones in the same order every time, so a cache holding fewer tasks than a job reads
would miss on every one of them (a count of tasks cannot know how large they are).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from services.store.db.models import StreamVersion
from services.store.objects import ObjectStore
from workers.probe.fits.folds import subsample
from workers.stream.manifest import StreamManifest, TaskSpec
from workers.stream.task_data import load_task_data
from workers.stream.task_info import Originals, TaskInfo, task_info
from workers.stream.versions import stored_manifest

PROBE_SPLITS: tuple[str, ...] = ("dev", "dev_test")  # held out from the backbone's training
# Per worker: about 40 tasks of 2,000 probe images at 64 px with their LiDAR originals.
DEFAULT_CACHE_BYTES = 1 << 30


@dataclass(frozen=True)
class TaskSamples:
    """One seeded subsample of a task's held-out splits, and what the learner may know.

    ``probe_splits[i]`` and ``probe_rows[i]`` name the split and row that probe example i
    was read from; ``lidar_images`` are some of the probe images.
    """

    order: int
    kind: str
    num_classes: int
    probe_images: np.ndarray
    probe_labels: np.ndarray
    lidar_images: np.ndarray
    info: TaskInfo
    probe_splits: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype="<U8"))
    probe_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    lidar_originals: Originals | None = None  # the stored originals of ``lidar_images``

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (what the cache counts)."""
        arrays = [self.probe_images, self.probe_labels, self.lidar_images, self.probe_splits, self.probe_rows]
        if self.lidar_originals is not None:
            arrays += [self.lidar_originals.images, self.lidar_originals.extents]
        return int(sum(a.nbytes for a in arrays))


def _originals_at(stored: list[Originals], rows: np.ndarray) -> Originals:
    """The stored originals of ``rows`` of the splits laid end to end, on one canvas."""
    height = max(o.images.shape[1] for o in stored)
    width = max(o.images.shape[2] for o in stored)
    offsets = np.cumsum([0, *(len(o) for o in stored)])
    images = np.zeros((len(rows), height, width, 3), dtype=np.uint8)
    extents = np.zeros((len(rows), 2), dtype=np.int32)
    for i, row in enumerate(rows):
        part = int(np.searchsorted(offsets, row, side="right")) - 1
        source, local = stored[part], int(row - offsets[part])
        images[i, : source.images.shape[1], : source.images.shape[2]] = source.images[local]
        extents[i] = source.extents[local]
    return Originals(images, extents)


def sample_task(
    task: TaskSpec, data: Any, *, image_size: int, max_examples: int, lidar_n: int, seed: int
) -> TaskSamples:
    """Subsample a task's loaded held-out splits (see the module docstring)."""
    parts = [data.splits[s] for s in PROBE_SPLITS]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    splits = np.concatenate([np.full(len(p[0]), s, dtype="<U8") for s, p in zip(PROBE_SPLITS, parts)])
    rows = np.concatenate([np.arange(len(p[0]), dtype=np.int64) for p in parts])
    probe = subsample(len(images), max_examples, seed=seed)
    clean = subsample(len(probe), lidar_n, seed=seed + 1)
    stored = [getattr(data, "originals", {}).get(s) for s in PROBE_SPLITS]
    originals = _originals_at(stored, probe[clean]) if all(o is not None for o in stored) else None
    return TaskSamples(
        order=task.order,
        kind=task.kind,
        num_classes=data.index.num_classes,
        probe_images=images[probe],
        probe_labels=labels[probe],
        lidar_images=images[probe][clean],
        info=task_info(task, data.index, image_size),
        probe_splits=splits[probe],
        probe_rows=rows[probe],
        lidar_originals=originals,
    )


class TaskCache:
    """Per-worker cache of manifests and task samples: at most ``max_bytes`` of samples, the
    least recently used going first (the newest is kept even when it alone is larger)."""

    def __init__(self, store: ObjectStore, *, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self._manifests: dict[str, StreamManifest] = {}
        self._samples: OrderedDict[tuple[Any, ...], TaskSamples] = OrderedDict()
        self._bytes = 0

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._samples)

    def manifest(self, version: StreamVersion) -> StreamManifest:
        """The manifest a stream version row holds, parsed once per worker."""
        key = f"{version.name}@{version.version}:{version.manifest_sha256}"
        if key not in self._manifests:
            self._manifests[key] = stored_manifest(version)
        return self._manifests[key]

    def samples(
        self, manifest: StreamManifest, order: int, *, image_size: int, max_examples: int, lidar_n: int, seed: int
    ) -> TaskSamples:
        key = (manifest.name, manifest.version, order, image_size, max_examples, lidar_n, seed)
        if key in self._samples:
            self._samples.move_to_end(key)
            return self._samples[key]
        task = next(t for t in manifest.tasks if t.order == order)
        data = load_task_data(self.store, task, image_size=image_size, splits=PROBE_SPLITS, originals=PROBE_SPLITS)
        samples = sample_task(task, data, image_size=image_size, max_examples=max_examples, lidar_n=lidar_n, seed=seed)
        self._samples[key] = samples
        self._bytes += samples.nbytes
        while self._bytes > self.max_bytes and len(self._samples) > 1:
            self._bytes -= self._samples.popitem(last=False)[1].nbytes
        return samples


__all__ = ["DEFAULT_CACHE_BYTES", "PROBE_SPLITS", "TaskCache", "TaskSamples", "sample_task"]
