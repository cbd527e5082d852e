"""What every probe fit shares: the fold layout, per-fold standardisation, losses, scores.

All k folds of a probe are fitted together. Each fold standardises the features with the
mean and standard deviation of ITS OWN training rows; instead of materialising k copies of
the features, the standardisation is folded into the first layer's weights
(``((x - mu) / sd) @ V  ==  x @ (V / sd) - (mu / sd) @ V``), so the first layer of every
fold is one matrix product with the shared features.

Scores are held-out: fold f's probe is scored on the rows of fold f only. The loss is the
probe's training objective without the penalty (cross-entropy for single-label tasks, mean
binary cross-entropy over labels for multi-label ones); the error is METRICS.md §1's task
error (1 - top-1 accuracy, or 1 - macro mAP).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from workers.probe.folds import train_masks
from services.core.metrics import task_error


@dataclass(frozen=True)
class FoldScores:
    """Held-out loss and error of one probe kind, one value per fold."""

    losses: np.ndarray
    errors: np.ndarray

    @property
    def loss(self) -> float:
        return float(np.mean(self.losses))

    @property
    def error(self) -> float:
        return float(np.mean(self.errors))

    @property
    def accuracy(self) -> float:
        """1 - mean error (top-1 accuracy, or mAP for multi-label tasks)."""
        return 1.0 - self.error


@dataclass(frozen=True)
class FoldData:
    """Features, labels and fold layout as tensors, ready for a batched fit.

    Attributes:
        x: Features (N, d), float32.
        y: int64 labels (N,) or float32 multi-hot (N, C).
        train: float32 (k, N): 1 where an example trains fold f.
        counts: Training rows per fold (k,).
        mu: Per-fold feature mean of the training rows (k, d).
        inv_sd: Per-fold 1 / standard deviation (k, d); 1 for constant features.
        num_classes: C.
        multi_label: Whether ``y`` is multi-hot.
    """

    x: torch.Tensor
    y: torch.Tensor
    train: torch.Tensor
    counts: torch.Tensor
    mu: torch.Tensor
    inv_sd: torch.Tensor
    num_classes: int
    multi_label: bool

    @property
    def folds(self) -> int:
        return int(self.train.shape[0])

    @property
    def dim(self) -> int:
        return int(self.x.shape[1])


def prepare(features: np.ndarray, labels: np.ndarray, ids: np.ndarray, folds: int,
            num_classes: int) -> FoldData:
    """Tensors and per-fold statistics for ``features`` split by fold ids ``ids``."""
    x = torch.as_tensor(np.ascontiguousarray(features, dtype=np.float32))
    multi = labels.ndim == 2
    y = torch.as_tensor(labels.astype(np.float32 if multi else np.int64))
    train = torch.as_tensor(train_masks(ids, folds).astype(np.float32))
    counts = train.sum(dim=1)
    x64 = x.double()
    mean = (train.double() @ x64) / counts.double()[:, None]
    sq = (train.double() @ (x64 * x64)) / counts.double()[:, None]
    var = (sq - mean * mean).clamp_min(0.0)
    scale = var.sqrt()
    tiny = scale <= 1e-6 * (1.0 + mean.abs())
    inv_sd = torch.where(tiny, torch.ones_like(scale), 1.0 / scale.clamp_min(1e-30))
    return FoldData(x=x, y=y, train=train, counts=counts, mu=mean.float(),
                    inv_sd=inv_sd.float(), num_classes=num_classes, multi_label=multi)


def first_layer(data: FoldData, v: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-fold affine map of the standardised features: (k, N, out) from V (k, d, out)."""
    k, d, out = v.shape
    w = v * data.inv_sd[:, :, None]
    shift = b - torch.einsum("kd,kdo->ko", data.mu, w)
    flat = data.x @ w.permute(1, 0, 2).reshape(d, k * out)  # one GEMM for every fold
    return flat.reshape(-1, k, out).permute(1, 0, 2) + shift[:, None, :]


def example_losses(data: FoldData, logits: torch.Tensor) -> torch.Tensor:
    """Loss of every example under every fold's probe: (k, N)."""
    if data.multi_label:
        target = data.y.expand(logits.shape[0], -1, -1)
        return F.binary_cross_entropy_with_logits(logits, target, reduction="none").mean(dim=2)
    return torch.logsumexp(logits, dim=2) - logits.gather(
        2, data.y.expand(logits.shape[0], -1)[:, :, None]
    ).squeeze(2)


def training_loss(data: FoldData, logits: torch.Tensor) -> torch.Tensor:
    """Sum over folds of each fold's mean loss on its own training rows."""
    per_fold = (example_losses(data, logits) * data.train).sum(dim=1) / data.counts
    return per_fold.sum()


def held_out_scores(data: FoldData, logits: torch.Tensor) -> FoldScores:
    """Loss and task error of each fold's probe on that fold's held-out rows."""
    with torch.no_grad():
        losses = example_losses(data, logits)
        held = 1.0 - data.train
        fold_loss = ((losses * held).sum(dim=1) / held.sum(dim=1)).double().numpy()
        errors = np.empty(data.folds)
        labels = data.y.numpy()
        for f in range(data.folds):
            rows = held[f].bool().numpy()
            scores = logits[f][held[f].bool()].double().numpy()
            kind = "multi" if data.multi_label else "single"
            if kind == "single":
                errors[f] = float(np.mean(scores.argmax(axis=1) != labels[rows]))
            else:
                errors[f] = task_error(scores, labels[rows].astype(np.int64), "multi")
    return FoldScores(losses=fold_loss, errors=errors)


__all__ = [
    "FoldData", "FoldScores", "example_losses", "first_layer", "held_out_scores", "prepare",
    "training_loss",
]
