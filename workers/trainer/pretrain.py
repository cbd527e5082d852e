"""Make a pretrained checkpoint from a stream's meta-train data, for PT and PT+FT.

NEVIS'22's PT baselines start from a model pretrained elsewhere. Pretrained weights cannot
be downloaded on every machine, and tests need one too, so ``nevis pretrain`` makes one
here: the built-in FT-prev learner trained through the stream's meta-train tasks in order,
each task starting from the previous one's backbone, with fixed hyper-parameters. The
result is the last task's predictor in the Indep format, which ``nevis run --pretrained``
accepts for ``pt`` and ``pt_ft`` (their heads are replaced, only the backbone transfers).
The meta-test tasks are never read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.core.errors import NevisError
from services.store.objects import ObjectStore
from workers.learners.finetune import FtPrevLearner
from workers.learners.protocol import LabelledData
from workers.sandbox.context import LocalTrialContext
from workers.stream.manifest import StreamManifest, TaskSpec
from workers.stream.prepare import load_task_data
from workers.stream.task_info import task_info
from workers.stream.task_view import CausalTaskView

PRETRAIN_CONFIG = {"learning_rate": 0.02, "label_smoothing": 0.1}


@dataclass(frozen=True)
class PretrainResult:
    """The checkpoint, what it was made from, and what it cost."""

    checkpoint: bytes
    tasks: tuple[str, ...]
    flops: int


def pretrain(manifest: StreamManifest, store: ObjectStore, *, image_size: int, steps: int, seed: int = 0,
             model: str = "small_cnn", on_task: Callable[[TaskSpec, int, int], None] | None = None
             ) -> PretrainResult:
    """Train through the meta-train tasks of ``manifest`` (prepared in ``store``), in order.

    Raises:
        NevisError: the stream has no meta-train task to learn from.
    """
    tasks = manifest.meta_train
    if not tasks:
        raise NevisError(f"Stream {manifest.name!r} has no meta-train task to pretrain on.")
    learner = FtPrevLearner(model)
    past: dict[int, tuple] = {}
    predictors: dict[int, bytes] = {}
    checkpoint, flops = b"", 0
    for position, task in enumerate(tasks, start=1):
        if on_task is not None:
            on_task(task, position, len(tasks))
        data = load_task_data(store, task, image_size=image_size, splits=("train", "dev"))
        info = task_info(task, data.index, image_size)
        view = CausalTaskView(
            info, LabelledData(*data.splits["train"]), LabelledData(*data.splits["dev"]),
            {order: entry[0] for order, entry in past.items()}, lambda order: past[order][1],
            stream_length=len(manifest.tasks), load_past_predictor=predictors.__getitem__)
        ctx = LocalTrialContext(seed=seed + task.order, steps=steps, save_predictor=learner.save_predictor)
        output = learner.train(view, None, PRETRAIN_CONFIG, ctx)
        checkpoint = learner.save_predictor(output.predictor)
        flops += int(ctx.meter.measured)
        predictors = {task.order: checkpoint}  # FT-prev reads only the latest
        past[task.order] = (info, LabelledData(*data.splits["train"]))
        past = {task.order: past[task.order]}  # keep one task's data: bounded memory
    return PretrainResult(checkpoint=checkpoint, tasks=tuple(t.key for t in tasks), flops=flops)


__all__ = ["PRETRAIN_CONFIG", "PretrainResult", "pretrain"]
