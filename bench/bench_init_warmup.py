"""Benchmark: the reference's initialisation and warm-up against this project's former ones,
at this project's default budget (one trial of 200 steps), on CPU.

Trains :class:`~workers.learners.indep.IndepLearner` (the ResNet-34, narrowed to ``--width``
so a trial takes about a minute on one core) on datasets of ``../shared/datasets`` (32 px RGB;
train split to train, val split to score) and prints the val error of each variant:

- ``old-init, 5 %``: Kaiming fan-out conv init and every block's second batch-norm scale at 0
  (what ``models.py`` did before), warm-up 5 % of the steps (what ``indep`` did before);
- ``ref-init, 5 %``: the reference's init (:func:`~workers.learners.models.init_as_haiku`);
- ``ref-init, ref``: the reference's init and warm-up (7 epochs, capped at the budget − 1);
- ``ref-init, 7 ep <= 50 %``: the reference's warm-up, capped at half the budget (``indep``'s
  default);
- ``old-init, 7 ep <= 50 %``: the former init with that warm-up.

Every variant sees the same seeds, batches and crops; only init and schedule change.

Usage: .venv/bin/python bench/bench_init_warmup.py [--datasets cifar10 coil100] [--lrs 0.01 0.1]
       [--seeds 0] [--steps 200] [--width 16] [--variants N ...] (indices into the list above)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workers.learners.indep import IndepLearner  # noqa: E402
from workers.learners.models import BasicBlock, init_as_haiku  # noqa: E402
from workers.stream.task_info import LabelledData, TaskInfo  # noqa: E402
from workers.stream.task_view import CausalTaskView  # noqa: E402

DATASETS = ROOT.parent / "shared" / "datasets"


@dataclass
class QuietContext:
    """A TrialContext that counts nothing: the figures here are errors, not FLOPs."""

    seed: int
    steps: int
    world_size: int = 1
    rank: int = 0
    device: str = "cpu"

    def track(self, module: Any) -> Any:
        return module

    def report_flops(self, flops: int) -> None:
        pass

    def progress(self, step: int, predictor: Any, *, loss: float | None = None) -> None:
        pass


def old_init(model: nn.Module) -> None:
    """What ``LowResResNet34`` did before: Kaiming fan-out convs, zero-initialised ``bn2``."""
    init_as_haiku(model)  # then overwrite what differed
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.Linear):  # PyTorch's default linear init
            m.reset_parameters()
        elif isinstance(m, BasicBlock):
            nn.init.zeros_(m.bn2.weight)


class Variant(IndepLearner):
    """IndepLearner with a chosen re-initialisation of each fresh network."""

    def __init__(self, reinit: Any, **options: Any) -> None:
        super().__init__("resnet34", **options)
        self.reinit = reinit

    def _new_predictor(self, info, ctx, options=None):  # type: ignore[no-untyped-def]
        predictor = super()._new_predictor(info, ctx, options)
        torch.manual_seed(ctx.seed)  # the same starting draw for every variant of a seed
        self.reinit(predictor.model)
        return predictor


def load(name: str) -> tuple[TaskInfo, LabelledData, LabelledData]:
    arrays = np.load(DATASETS / f"{name}.npz")
    meta = json.loads((DATASETS / f"{name}.json").read_text())
    images, labels = arrays["images"], arrays["labels"].astype(np.int64)
    if images.shape[-1] == 1:
        images = np.repeat(images, 3, axis=-1)
    train, val = (np.array(meta["split"][k]) for k in ("train", "val"))
    info = TaskInfo(
        order=0,
        key=name,
        dataset=name,
        title=name,
        year=2000,
        domain=None,
        kind="single",
        num_classes=int(meta["num_classes"]),
        class_names=tuple(meta["class_names"]),
        image_size=int(images.shape[1]),
        num_train=len(train),
        num_dev=len(val),
    )
    return info, LabelledData(images[train], labels[train]), LabelledData(images[val], labels[val])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["cifar10", "coil100"])
    parser.add_argument("--lrs", nargs="+", type=float, default=[0.01, 0.1])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--variants", nargs="+", type=int, default=[0, 1, 2, 3])
    args = parser.parse_args()
    torch.set_num_threads(1)
    variants = {
        "old-init, 5 %": Variant(old_init, width=args.width, warmup_epochs=1e9, warmup_fraction=0.05),
        "ref-init, 5 %": Variant(init_as_haiku, width=args.width, warmup_epochs=1e9, warmup_fraction=0.05),
        "ref-init, ref": Variant(init_as_haiku, width=args.width),
        "ref-init, 7 ep <= 50 %": Variant(init_as_haiku, width=args.width, warmup_fraction=0.5),
        "old-init, 7 ep <= 50 %": Variant(old_init, width=args.width, warmup_fraction=0.5),
    }
    variants = {name: v for i, (name, v) in enumerate(variants.items()) if i in args.variants}
    print(f"{'dataset':10} {'lr':>6} {'seed':>4}  " + "  ".join(f"{v:>22}" for v in variants), flush=True)
    for name in args.datasets:
        info, train, val = load(name)
        view = CausalTaskView(info, train, val, {}, lambda order, data=train: data, stream_length=1)
        for lr in args.lrs:
            for seed in args.seeds:
                errors = []
                for learner in variants.values():
                    start = time.perf_counter()
                    ctx = QuietContext(seed=seed, steps=args.steps)
                    out = learner.train(view, None, {"learning_rate": lr, "label_smoothing": 0.0}, ctx)
                    scores = learner.predict(out.predictor, val.images, ctx)
                    errors.append(float(np.mean(scores.argmax(1) != val.labels)))
                    print(f"  ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
                print(f"{name:10} {lr:6.3g} {seed:4d}  " + "  ".join(f"{e:22.3f}" for e in errors), flush=True)


if __name__ == "__main__":
    main()
