"""Training helpers every built-in learner shares (Indep, the transfer learners, BHPO): the
loss's targets, shuffled index batches by epoch, the data-parallel wrapper of a multi-worker
trial, and evaluation mode for a pass that must not change a model's mode. Kept apart from any one learner so that none imports another for them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from services.core.errors import LearnerError
from workers.learners.protocol import TaskInfo, TrialContext


def data_parallel(model: nn.Module, ctx: TrialContext) -> nn.Module:
    """``model`` wrapped in DistributedDataParallel inside a worker group (gradients averaged
    over ranks at every step), or itself for a one-worker trial."""
    import torch.distributed as dist  # noqa: PLC0415

    if ctx.world_size <= 1 or not (dist.is_available() and dist.is_initialized()):
        return model
    device_ids = [torch.device(ctx.device).index] if ctx.device.startswith("cuda") else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def label_tensor(labels: np.ndarray, info: TaskInfo) -> torch.Tensor:
    """Targets as the loss wants them: int64 [N] (single) or float32 multi-hot [N, K]."""
    if info.kind == "multi":
        if labels.ndim != 2 or labels.shape[1] != info.num_classes:
            raise LearnerError(
                f"Multi-label task {info.key!r} needs multi-hot labels of shape "
                f"(N, {info.num_classes}); got {labels.shape}."
            )
        return torch.from_numpy(np.asarray(labels, dtype=np.float32))
    if labels.ndim != 1:
        raise LearnerError(f"Single-label task {info.key!r} needs integer labels of shape (N,); got {labels.shape}.")
    return torch.from_numpy(np.asarray(labels, dtype=np.int64))


def epoch_batches(n: int, batch: int, steps: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """``steps`` index batches, each epoch a fresh shuffle; a short tail joins the next epoch."""
    order = torch.empty(0, dtype=torch.int64)
    for _ in range(steps):
        while len(order) < batch:
            order = torch.cat([order, torch.randperm(n, generator=generator)])
        yield order[:batch]
        order = order[batch:]


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """Evaluation mode for the duration, then back to whatever mode it was in."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


__all__ = ["data_parallel", "epoch_batches", "eval_mode", "label_tensor"]
