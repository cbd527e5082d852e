"""Benchmark: augmented training images per second per CPU core, at 64 px, from stored originals.

Three ways to make the same batches (the reference's random crop, resize and left-right flip,
drawn by :func:`workers.learners.augment.crop_params`), each including the gather of a step's
rows from the split's arrays as the training loop does:

- ``per-image``: :func:`~workers.learners.augment.train_transform` called on one image at a
  time, as a per-image data loader (a ``Dataset.__getitem__``) would;
- ``grid-sample``: ``train_transform`` on the whole batch (the built-in learners' loop before
  the batched input: every canvas converted to float, one 2-D ``grid_sample``);
- ``batched``: :class:`~workers.learners.input_pipeline.TrainBatches` on the CPU (what the
  built-in learners run now: two separable gathers from uint8, :mod:`workers.learners.batch_crop`).

Originals are generated at the sizes storage gives a source larger than the stored cap: long
side ``--canvas`` (96 px = 1.5 × 64, the default ``NEVIS_STORED_SCALE``), aspect ratios between
3:4 and 4:3, on a square canvas (each row its own valid extent). One intra-op thread; figures
are images per second of this thread's CPU time (per core, steadier on a shared machine) and
of wall time, best of ``--repeats`` rounds that alternate the ways. Target: batched ≥ 1,000
images/s per core (issue 24). Where a CUDA device exists, ``--device cuda`` times the batched
way on it (wall time, synchronised; the source resident on the device).

Usage: .venv/bin/python bench/bench_input.py [--images 4096] [--batch 256] [--canvas 96]
       [--repeats 3] [--seconds 2] [--device cpu] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.learners.augment import AugmentConfig, train_transform
from workers.learners.input_pipeline import TrainBatches
from workers.learners.protocol import LabelledData
from workers.learners.training import epoch_batches
from workers.stream.task_info import Originals

SIZE = 64


def make_split(n: int, canvas: int, seed: int = 0) -> LabelledData:
    """A training split of ``n`` generated originals: long side ``canvas``, aspect 3:4 to 4:3."""
    rng = np.random.default_rng(seed)
    aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3), n))  # width / height
    height = np.where(aspect >= 1, canvas / aspect, canvas).round().astype(np.int32)
    width = np.where(aspect >= 1, canvas, canvas * aspect).round().astype(np.int32)
    images = rng.integers(0, 256, (n, canvas, canvas, 3), dtype=np.uint8)
    originals = Originals(images, np.stack([height, width], axis=1))
    return LabelledData(np.zeros((n, SIZE, SIZE, 3), np.uint8), rng.integers(0, 10, n), originals)


def per_image(data: LabelledData, cfg: AugmentConfig, batch: int, steps: int) -> None:
    gen = torch.Generator().manual_seed(0)
    for idx in epoch_batches(len(data), batch, steps, gen):
        for i in idx.numpy():
            source, extents = data.crop_source(np.array([i]))
            train_transform(source, cfg, generator=gen, extents=extents)


def grid_sample(data: LabelledData, cfg: AugmentConfig, batch: int, steps: int) -> None:
    gen = torch.Generator().manual_seed(0)
    for idx in epoch_batches(len(data), batch, steps, gen):
        source, extents = data.crop_source(idx.numpy())
        train_transform(source, cfg, generator=gen, extents=extents)


def batched(data: LabelledData, cfg: AugmentConfig, batch: int, steps: int, device: str = "cpu") -> None:
    gen = torch.Generator().manual_seed(0)
    labels = torch.from_numpy(data.labels)
    for _ in TrainBatches(data, labels, cfg, steps=steps, batch=batch, generator=gen, crops=gen, device=device):
        pass
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


Way = Callable[[LabelledData, AugmentConfig, int, int], None]


def rate(way: Way, data: LabelledData, cfg: AugmentConfig, batch: int, seconds: float) -> tuple[float, float]:
    """(images per CPU second of this thread, images per wall second) over about ``seconds``."""
    images, cpu, wall = 0, 0.0, 0.0
    steps = 1
    while wall < seconds:
        start, cpu_start = time.perf_counter(), time.thread_time()
        way(data, cfg, batch, steps)
        cpu += time.thread_time() - cpu_start
        wall += time.perf_counter() - start
        images += steps * batch
        steps = min(steps * 2, 64)
    return images / max(cpu, 1e-9), images / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4096, help="originals in the split")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--canvas", type=int, default=96, help="long side of the originals (px)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="per way and round")
    parser.add_argument("--device", default="cpu", help="also time the batched way on this device")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data, cfg = make_split(args.images, args.canvas), AugmentConfig(size=SIZE)
    ways: dict[str, Way] = {"per-image": per_image, "grid-sample": grid_sample, "batched": batched}
    best = {name: (0.0, 0.0) for name in ways}
    for _ in range(args.repeats):
        for name, way in ways.items():
            cpu, wall = rate(way, data, cfg, args.batch, args.seconds)
            best[name] = (max(best[name][0], cpu), max(best[name][1], wall))
    figures: dict[str, object] = {
        "size": SIZE,
        "canvas": args.canvas,
        "batch": args.batch,
        "threads": 1,
        "repeats": args.repeats,
        "torch": torch.__version__,
        **{f"{name}_per_core": round(cpu) for name, (cpu, _) in best.items()},
        **{f"{name}_wall": round(wall) for name, (_, wall) in best.items()},
    }
    print(
        f"augmented {SIZE} px images/s from {args.canvas} px originals, batch {args.batch}, "
        f"1 thread, best of {args.repeats}:"
    )
    for name, (cpu, wall) in best.items():
        print(f"  {name:12s} {cpu:9.0f} per core (CPU time)  {wall:9.0f} wall")
    speedup = best["batched"][0] / best["per-image"][0]
    print(
        f"  batched / per-image: {speedup:.1f}x per core; target >= 1000 per core: "
        f"{'met' if best['batched'][0] >= 1000 else 'NOT met'}"
    )
    figures["batched_over_per_image"] = round(speedup, 2)
    if args.device != "cpu":
        _, wall = rate(lambda d, c, b, s: batched(d, c, b, s, args.device), data, cfg, args.batch, args.seconds)
        figures[f"batched_{args.device}_wall"] = round(wall)
        print(f"  batched on {args.device}: {wall:.0f} images/s (wall, synchronised)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
