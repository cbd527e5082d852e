"""The baselines' training recipe, as pure functions (NEVIS'22 paper, METRICS.md §1).

- SGD with Nesterov momentum 0.9 and weight decay 1e-4 (on conv and linear weights, as the
  reference's mask: not on batch-norm parameters or biases);
- a cosine learning-rate schedule after a linear warm-up, as a pure function of the step, the
  reference's ``warmup_cosine_decay`` (``experiments_jax/training/learning_rate_schedules.py``,
  optax 0.1.3's ``warmup_cosine_decay_schedule``): 7 epochs of warm-up from 0, then cosine
  decay to 1e-8 at the last step;
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
WARMUP_EPOCHS = 7
"""The reference configs' ``DEFAULT_WARMUP_EPOCHS`` (``experiments_jax/configs/finetuning_*.py``)."""
FINAL_LEARNING_RATE = 1e-8
"""The reference configs' ``final_learning_rate``: where the cosine ends."""

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
            f"The 'train_size' parameter of batch_size must be an int in [1, inf). Got {train_size!r} instead."
        )
    if not p > 0:
        raise ValueError(f"The 'p' parameter of batch_size must be > 0. Got {p!r} instead.")
    if not isinstance(max_batch, int) or max_batch < 1:
        raise ValueError(
            f"The 'max_batch' parameter of batch_size must be an int in [1, inf). Got {max_batch!r} instead."
        )
    # frexp gives x = m·2^e with m in [0.5, 1): floor(log2 x) = e − 1, exactly.
    _, exponent = math.frexp(p * train_size)
    return min(max_batch, max(MIN_BATCH, 2 ** (exponent - 1)))


def steps_per_epoch(train_size: int, batch: int) -> int:
    """Updates per epoch as the reference counts them: ``train_size // batch + 1``
    (``experiments_jax/learners/finetuning/finetuning_learner.py``)."""
    return train_size // batch + 1


def warmup_steps(
    total_steps: int, epoch_steps: int, *, epochs: float = WARMUP_EPOCHS, max_fraction: float = 1.0
) -> int:
    """Warm-up length: ``epochs`` epochs of ``epoch_steps`` updates, strictly fewer than the
    budget, as the reference (``min(max_steps - 1, warmup_epochs * steps_per_epoch)``), and
    at most ``max_fraction`` of the budget (1: no further cap, the reference's rule).

    Example:
        >>> warmup_steps(50_000, 63), warmup_steps(200, 63), warmup_steps(200, 63, max_fraction=0.05)
        (441, 199, 10)
    """
    if not 0.0 <= max_fraction <= 1.0:
        raise ValueError(
            f"The 'max_fraction' parameter of warmup_steps must be a float in [0, 1]. Got {max_fraction!r} instead."
        )
    if not epochs >= 0:
        raise ValueError(f"The 'epochs' parameter of warmup_steps must be >= 0. Got {epochs!r} instead.")
    return max(0, min(total_steps - 1, round(epochs * epoch_steps), round(max_fraction * total_steps)))


def lr_factor(step: int, total_steps: int, warmup: int, floor: float = 0.0) -> float:
    """Multiplier of the peak learning rate for the update made at ``step`` (0-based).

    As the reference's optax schedule: warm-up step / warmup for step < warmup (the first
    update only fills the momentum buffer), then cosine decay from 1 to ``floor`` (the final
    rate over the peak) at ``total_steps``, floor + (1 − floor) · 0.5 · (1 + cos(π · (step −
    warmup) / (total_steps − warmup))), and ``floor`` after.
    """
    if step < 0:
        raise ValueError(f"The 'step' parameter of lr_factor must be >= 0. Got {step!r}.")
    if step < warmup:
        return step / warmup
    decay_steps = max(1, total_steps - warmup)
    progress = min(1.0, (step - warmup) / decay_steps)
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


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
            f"The 'learning_rate' hyper-parameter must be a float in (0, inf). Got {learning_rate!r} instead."
        )
    params = list(params)
    groups = [
        {"params": [p for p in params if p.ndim > 1], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0},
    ]
    return torch.optim.SGD([g for g in groups if g["params"]], lr=learning_rate, momentum=momentum, nesterov=True)


def piecewise_factor(step: int, total_steps: int, warmup: int, floor: float = 0.0) -> float:
    """The piecewise-constant alternative BHPO may pick: the peak rate until half the budget,
    a tenth of it until three quarters, a hundredth after. No warm-up (``warmup`` and
    ``floor`` are ignored), as the reference's ``piecewise_constant_progress_aligned``
    schedule, whose boundaries are ``int(progress · max_steps)``."""
    if step < 0:
        raise ValueError(f"The 'step' parameter of piecewise_factor must be >= 0. Got {step!r}.")
    return 1.0 if step < int(0.5 * total_steps) else 0.1 if step < int(0.75 * total_steps) else 0.01


SCHEDULES: dict[str, Callable[[int, int, int, float], float]] = {"cosine": lr_factor, "piecewise": piecewise_factor}
"""Learning-rate schedules by name: step, total steps, warm-up steps, final/peak → multiplier."""


def make_scheduler(optimizer: torch.optim.Optimizer, total_steps: int, warmup: int, kind: str = "cosine") -> LambdaLR:
    """A LambdaLR applying the schedule ``kind`` (:data:`SCHEDULES`), ending at
    :data:`FINAL_LEARNING_RATE`; call ``step()`` after each optimiser step."""
    factor = SCHEDULES[kind]
    floor = min(1.0, FINAL_LEARNING_RATE / optimizer.param_groups[0]["lr"])
    return LambdaLR(optimizer, lambda step: factor(step, total_steps, warmup, floor))


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
            f"The 'label_smoothing' hyper-parameter must be a float in [0, 1). Got {label_smoothing!r} instead."
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
    raise ValueError(f"The 'kind' parameter of make_loss must be 'single' or 'multi'. Got {kind!r} instead.")


__all__ = [
    "FINAL_LEARNING_RATE",
    "MIN_BATCH",
    "MOMENTUM",
    "SCHEDULES",
    "WARMUP_EPOCHS",
    "WEIGHT_DECAY",
    "LossFn",
    "batch_size",
    "lr_factor",
    "make_loss",
    "make_optimizer",
    "make_scheduler",
    "piecewise_factor",
    "steps_per_epoch",
    "warmup_steps",
]
