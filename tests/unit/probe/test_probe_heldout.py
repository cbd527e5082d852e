"""Probes look only at held-out data: no probe example is in the backbone's training split.

A real stream (procedurally generated shapes tasks) is prepared into a file store and read
back the way a probe worker reads it (:class:`~workers.probe.runtime.data.TaskCache`). Every probe
example must be a dev or dev_test row, equal to the row it names, and equal to no image of
the train split (which the backbone trained on) nor of the test split.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from services.store.objects import open_store
from workers.probe.runtime.data import PROBE_SPLITS, TaskCache
from workers.stream.manifest import parse_manifest
from workers.stream.prepare import prepare_stream
from workers.stream.task_data import load_task_data


def _digests(images: np.ndarray) -> set[str]:
    return {hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest() for image in images}


def test_no_probe_example_is_in_the_training_split(tmp_path: Path) -> None:
    rule = {"kind": "random", "fractions": {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2}, "seed": 0}
    manifest = parse_manifest(
        {
            "format": 1,
            "name": "heldout",
            "version": "1",
            "description": "test",
            "source": "tests",
            "meta_test_from_year": 2019,
            "image_size": 16,
            "tasks": [
                {
                    "order": 1,
                    "year": 2004,
                    "dataset": "shapes:shape",
                    "title": "shape",
                    "domain": "shape",
                    "kind": "single",
                    "num_classes": 4,
                    "split": rule,
                },
                {
                    "order": 2,
                    "year": 2020,
                    "dataset": "shapes:multi",
                    "title": "multi",
                    "domain": "shape",
                    "kind": "multi",
                    "num_classes": 4,
                    "split": rule,
                },
            ],
        }
    )
    store = open_store(f"file://{tmp_path / 'store'}")
    prepare_stream(manifest, store, image_size=16, offline_dir=None)
    cache = TaskCache(store)
    for task in manifest.tasks:
        samples = cache.samples(manifest, task.order, image_size=16, max_examples=10_000, lidar_n=50, seed=3)
        data = load_task_data(store, task, image_size=16)
        assert set(samples.probe_splits.tolist()) == set(PROBE_SPLITS)  # both held-out splits
        held_out = sum(len(data.splits[s][0]) for s in PROBE_SPLITS)
        assert len(samples.probe_images) == held_out  # max_examples above the data: all of it
        for i, (split, row) in enumerate(zip(samples.probe_splits, samples.probe_rows)):
            np.testing.assert_array_equal(samples.probe_images[i], data.splits[str(split)][0][row])
            np.testing.assert_array_equal(samples.probe_labels[i], data.splits[str(split)][1][row])
        probe = _digests(samples.probe_images)
        assert not probe & _digests(data.splits["train"][0]), "a probe example is a training image"
        assert not probe & _digests(data.splits["test"][0]), "a probe example is a test image"
        assert _digests(samples.lidar_images) <= probe  # LiDAR's clean images are probe examples
        assert len(samples.lidar_images) == 50


def test_a_smaller_sample_keeps_to_the_held_out_splits(tmp_path: Path) -> None:
    rule = {"kind": "random", "fractions": {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2}, "seed": 0}
    manifest = parse_manifest(
        json.loads(
            json.dumps(
                {
                    "format": 1,
                    "name": "heldout",
                    "version": "1",
                    "description": "test",
                    "source": "tests",
                    "meta_test_from_year": 2019,
                    "image_size": 16,
                    "tasks": [
                        {
                            "order": 1,
                            "year": 2004,
                            "dataset": "shapes:hue",
                            "title": "hue",
                            "domain": "shape",
                            "kind": "single",
                            "num_classes": 6,
                            "split": rule,
                        }
                    ],
                }
            )
        )
    )
    store = open_store(f"file://{tmp_path / 'store'}")
    prepare_stream(manifest, store, image_size=16, offline_dir=None)
    samples = TaskCache(store).samples(manifest, 1, image_size=16, max_examples=30, lidar_n=8, seed=0)
    assert len(samples.probe_images) == 30 and set(samples.probe_splits.tolist()) <= set(PROBE_SPLITS)
    again = TaskCache(store).samples(manifest, 1, image_size=16, max_examples=30, lidar_n=8, seed=0)
    np.testing.assert_array_equal(samples.probe_rows, again.probe_rows)  # seeded: the same draw


def test_the_task_cache_keeps_what_fits_its_bytes_and_the_newest_always(tmp_path: Path) -> None:
    """Sized in bytes, not tasks: a job reading more tasks than a count-sized cache held missed
    on every one; here every task that fits stays, the least recently used going first."""
    rule = {"kind": "random", "fractions": {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2}, "seed": 0}
    manifest = parse_manifest(
        {
            "format": 1,
            "name": "cache",
            "version": "1",
            "description": "test",
            "source": "tests",
            "meta_test_from_year": 2019,
            "image_size": 16,
            "tasks": [
                {
                    "order": o,
                    "year": 2004 + o,
                    "dataset": name,
                    "title": name,
                    "domain": "shape",
                    "kind": "single",
                    "num_classes": c,
                    "split": rule,
                }
                for o, (name, c) in enumerate([("shapes:shape", 4), ("shapes:hue", 6), ("shapes:shape", 4)], 1)
            ],
        }
    )
    store = open_store(f"file://{tmp_path / 'store'}")
    prepare_stream(manifest, store, image_size=16, offline_dir=None)

    def read(cache: TaskCache, order: int):
        return cache.samples(manifest, order, image_size=16, max_examples=40, lidar_n=8, seed=0)

    roomy = TaskCache(store)
    first = [read(roomy, o) for o in (1, 2, 3)]
    assert len(roomy) == 3 and roomy.cached_bytes == sum(s.nbytes for s in first)
    assert all(read(roomy, o) is s for o, s in zip((1, 2, 3), first))  # hits: the same objects
    assert first[0].nbytes >= first[0].probe_images.nbytes > 0

    tight = TaskCache(store, max_bytes=first[0].nbytes + max(first[1].nbytes, first[2].nbytes))
    one, two = read(tight, 1), read(tight, 2)
    assert read(tight, 1) is one  # 1 is now the most recently used
    read(tight, 3)  # over the budget: 2, the least recently used, goes
    assert len(tight) == 2 and read(tight, 1) is one and read(tight, 2) is not two
    tiny = TaskCache(store, max_bytes=1)
    assert read(tiny, 1) is read(tiny, 1) and len(tiny) == 1  # the newest stays, alone
