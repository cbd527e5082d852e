"""The baselines' training recipe, as pure functions (NEVIS'22 paper, METRICS.md §1).

- SGD with Nesterov momentum 0.9 and weight decay 1e-4 (on conv and linear weights, as the
  reference's mask: not on batch-norm parameters or biases);
- a cosine learning-rate schedule after a linear warm-up, as a pure function of the step;
- the batch-size rule b = min(B, max(16, 2^floor(log2(p·D))));
- label-smoothed cross-entropy for single-label tasks, binary cross-entropy on logits for
  multi-label tasks (targets smoothed towards 1/2 by the same amount).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Literal

import torch
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR

MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4
MIN_BATCH = 16

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def batch_size(train_size: int, p: float = 0.0025, max_batch: int = 512) -> int:
    """The baselines' batch size for a training set of ``train_size`` examples.

    b = min(max_batch, max(16, 2^floor(log2(p · train_size)))).

    Example:
        >>> batch_size(1000), batch_size(100_000), batch_size(1_000_000)
        (16, 128, 512)
    """
    if not isinstance(train_size, int) or train_size < 1:
        raise ValueError(
            "The 'train_size' parameter of batch_size must be an int in [1, inf). "
            f"Got {train_size!r} instead."
        )
    if not p > 0:
        raise ValueError(f"The 'p' parameter of batch_size must be > 0. Got {p!r} instead.")
    if not isinstance(max_batch, int) or max_batch < 1:
        raise ValueError(
            "The 'max_batch' parameter of batch_size must be an int in [1, inf). "
            f"Got {max_batch!r} instead."
        )
    # frexp gives x = m·2^e with m in [0.5, 1): floor(log2 x) = e − 1, exactly.
    _, exponent = math.frexp(p * train_size)
    return min(max_batch, max(MIN_BATCH, 2 ** (exponent - 1)))


def warmup_steps(total_steps: int, fraction: float) -> int:
    """Number of warm-up steps: ``fraction`` of the budget, rounded, at most all of it."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(
            "The 'fraction' parameter of warmup_steps must be a float in [0, 1]. "
            f"Got {fraction!r} instead."
        )
    return min(total_steps, round(fraction * total_steps))


def lr_factor(step: int, total_steps: int, warmup: int) -> float:
    """Multiplier of the peak learning rate for the update made at ``step`` (0-based).

    Warm-up: (step + 1) / warmup for step < warmup, so the first update already moves.
    Then cosine decay: 0.5 · (1 + cos(π · (step − warmup) / (total_steps − warmup))),
    which is 1 at the end of warm-up and tends to 0 at ``total_steps``.
    """
    if step < 0:
        raise ValueError(f"The 'step' parameter of lr_factor must be >= 0. Got {step!r}.")
    if step < warmup:
        return (step + 1) / warmup
    decay_steps = max(1, total_steps - warmup)
    progress = min(1.0, (step - warmup) / decay_steps)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(
    params: Iterable[torch.nn.Parameter],
    learning_rate: float,
    *,
    momentum: float = MOMENTUM,
    weight_decay: float = WEIGHT_DECAY,
) -> torch.optim.SGD:
    """SGD with Nesterov momentum, as in the paper; weight decay on conv and linear weights only.

    The reference decays only parameters named ``w`` (``default_weight_decay_mask``): batch-norm
    scales and shifts and every bias (the 1-D parameters) are left undecayed.
    """
    if not learning_rate > 0:
        raise ValueError(
            "The 'learning_rate' hyper-parameter must be a float in (0, inf). "
            f"Got {learning_rate!r} instead."
        )
    params = list(params)
    groups = [{"params": [p for p in params if p.ndim > 1], "weight_decay": weight_decay},
              {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]
    return torch.optim.SGD(
        [g for g in groups if g["params"]], lr=learning_rate, momentum=momentum, nesterov=True
    )


def piecewise_factor(step: int, total_steps: int, warmup: int) -> float:
    """The piecewise-constant alternative BHPO may pick: the same warm-up, then the peak
    rate until half the budget, a tenth of it until three quarters, a hundredth after."""
    if step < 0:
        raise ValueError(f"The 'step' parameter of piecewise_factor must be >= 0. Got {step!r}.")
    if step < warmup:
        return (step + 1) / warmup
    progress = step / max(1, total_steps)
    return 1.0 if progress < 0.5 else 0.1 if progress < 0.75 else 0.01


SCHEDULES: dict[str, Callable[[int, int, int], float]] = {"cosine": lr_factor, "piecewise": piecewise_factor}
"""Learning-rate schedules by name: step, total steps, warm-up steps → multiplier."""


def make_scheduler(optimizer: torch.optim.Optimizer, total_steps: int, warmup: int,
                   kind: str = "cosine") -> LambdaLR:
    """A LambdaLR applying the schedule ``kind`` (:data:`SCHEDULES`); call ``step()`` after
    each optimiser step."""
    factor = SCHEDULES[kind]
    return LambdaLR(optimizer, lambda step: factor(step, total_steps, warmup))


def make_loss(kind: Literal["single", "multi"], label_smoothing: float = 0.0) -> LossFn:
    """The task's training loss on logits.

    Args:
        kind: "single" (integer targets [N]) or "multi" (multi-hot targets [N, K]).
        label_smoothing: in [0, 1). Single-label: mixes the one-hot target with the
            uniform distribution. Multi-label: moves each binary target towards 1/2,
            y · (1 − ε) + ε / 2.

    Returns:
        loss(logits, targets) → scalar mean loss.
    """
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(
            "The 'label_smoothing' hyper-parameter must be a float in [0, 1). "
            f"Got {label_smoothing!r} instead."
        )
    if kind == "single":

        def single(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(logits, targets, label_smoothing=label_smoothing)

        return single
    if kind == "multi":

        def multi(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            soft = targets.to(logits.dtype) * (1.0 - label_smoothing) + label_smoothing / 2
            return F.binary_cross_entropy_with_logits(logits, soft)

        return multi
    raise ValueError(
        f"The 'kind' parameter of make_loss must be 'single' or 'multi'. Got {kind!r} instead."
    )


__all__ = [
    "MIN_BATCH", "MOMENTUM", "SCHEDULES", "WEIGHT_DECAY", "LossFn", "batch_size", "lr_factor",
    "make_loss", "make_optimizer", "make_scheduler", "piecewise_factor", "warmup_steps",
]
