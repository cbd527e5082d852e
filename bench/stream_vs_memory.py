"""Streamed against in-memory training on one small task: the test error of each (docs/fidelity.md P8).

The task is sklearn's digits written class after class (as ImageNet's reader yields its
classes), prepared in shards of ``--per-shard`` rows. ``indep_small`` trains on it with the
same hyper-parameters and seeds twice: from the whole train split in memory, and from the
stream of shards (``view.train_stream``, 2 shards shuffled at a time) the harness offers a
large task. It prints each seed's test error and the mean difference with its spread.

    .venv/bin/python bench/stream_vs_memory.py --seeds 3 --steps 150
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

from services.store.objects import LocalObjectStore
from workers.ingest.writers.parquet_writer import ImageRow, write_parquet_dataset
from workers.learners.loading import load_learner
from workers.sandbox.metering.flops import FlopMeter
from workers.stream.adapters import AdapterContext
from workers.stream.build import build_dataset
from workers.stream.images import stored_side
from workers.stream.manifest import SplitRule
from workers.stream.manifest_files import load_stream
from workers.stream.shard_stream import store_stream
from workers.stream.shards import read_labelled
from workers.stream.task_data import load_task_index
from workers.stream.task_info import task_info
from workers.stream.task_view import CausalTaskView

SIZE = 32


class _Context:
    """The least TrialContext a built-in learner needs, on CPUs."""

    world_size, rank, device = 1, 0, "cpu"

    def __init__(self, seed: int, steps: int) -> None:
        self.seed, self.steps, self.meter = seed, steps, FlopMeter()

    def track(self, module):
        return self.meter.track(module)

    def report_flops(self, flops: int) -> None:
        return None

    def progress(self, step: int, predictor, *, loss=None) -> None:
        return None


def _prepare(folder: Path, per_shard: int):
    digits = load_digits()
    order = np.argsort(digits.target, kind="stable")  # class after class
    pixels = (digits.images[order] * 255 / 16).astype(np.uint8)
    rows = (
        ImageRow(image=np.repeat(p[..., None], 3, axis=2), label=int(t))
        for p, t in zip(pixels, digits.target[order], strict=True)
    )
    write_parquet_dataset(rows, folder / "sorted_digits.parquet", class_names=[str(i) for i in range(10)])
    base = next(t for t in load_stream("mini").tasks if t.dataset == "sklearn:digits")
    task = replace(base, dataset="parquet:sorted_digits", split=SplitRule(kind="random", seed=5))
    store = LocalObjectStore(folder / "store")
    build_dataset(
        store,
        task,
        AdapterContext(offline_dir=folder, image_size=SIZE),
        stored_side(SIZE, 1.5),
        per_shard,
        lambda stage: None,
    )
    return store, task, load_task_index(store, task, image_size=SIZE)


def _test_error(store, task, index, *, streamed: bool, seed: int, steps: int) -> float:
    train = read_labelled(store, index, "train", originals=True)
    dev = read_labelled(store, index, "dev", originals=False)
    test = read_labelled(store, index, "test", originals=False)
    stream = store_stream(store, index, "train") if streamed else None
    view = CausalTaskView(
        task_info(task, index, SIZE), (lambda: train), dev, {}, lambda order: dev, 1, train_stream=stream
    )
    learner, ctx = load_learner("indep_small"), _Context(seed, steps)
    out = learner.train(view, None, {"learning_rate": 0.05}, ctx)
    scores = learner.predict(out.predictor, test.images, ctx)
    return float(np.mean(np.argmax(scores, axis=1) != test.labels))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--per-shard", type=int, default=48)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store, task, index = _prepare(Path(tmp), args.per_shard)
        errors = {
            mode: [
                _test_error(store, task, index, streamed=mode == "streamed", seed=s, steps=args.steps)
                for s in range(args.seeds)
            ]
            for mode in ("memory", "streamed")
        }
    diff = np.subtract(errors["streamed"], errors["memory"])
    print(
        json.dumps(
            {
                "train_rows": index.counts["train"],
                "test_rows": index.counts["test"],
                "train_shards": len(index.shards["train"]),
                "steps": args.steps,
                "test_error": errors,
                "mean_streamed_minus_memory": float(diff.mean()),
                "sd_between_seeds": {m: float(np.std(e, ddof=1)) for m, e in errors.items()},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
