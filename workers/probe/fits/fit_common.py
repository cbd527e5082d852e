"""What every probe fit shares: the fold layout, per-fold standardisation, losses, scores.

All k folds of a probe are fitted together. Each fold standardises the features with the
mean and standard deviation of ITS OWN training rows; instead of materialising k copies of
the features, the standardisation is folded into the first layer's weights
(``((x - mu) / sd) @ V  ==  x @ (V / sd) - (mu / sd) @ V``), so the first layer of every
fold is one matrix product with the shared features.

Several checkpoints of one trial (the same examples, different features) are fitted in the
same batch too: ``x`` holds G feature sets (G, N, d) and the batch has G·k members, member
m being fold m % k of feature set m // k; each member is an independent problem, so one
batched fit gives every checkpoint's k folds at the cost of a few large operations instead
of G·k small ones.

Each fold's probe computes on its own rows only (:mod:`~workers.probe.fits.fold_blocks`):
its training rows when it trains, its held-out rows when it is scored. A pass names its rows
with :class:`Rows` (:func:`fit_rows`), which carries their labels and loss weights.

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

from services.core.metrics import task_error
from workers.probe.fits.fold_blocks import FoldBlocks, fold_blocks
from workers.probe.fits.folds import train_masks


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
        x: Feature sets (G, N, d), float32 (G = 1 for one checkpoint).
        y: int64 labels (N,) or float32 multi-hot (N, C).
        train: float32 (G·k, N): 1 where an example trains batch member m.
        counts: Training rows per member (G·k,).
        mu: Per-member feature mean of the training rows (G·k, d).
        inv_sd: Per-member 1 / standard deviation (G·k, d); 1 for constant features.
        num_classes: C.
        multi_label: Whether ``y`` is multi-hot.
        blocks: The rows regrouped by fold (each member computes on its own rows only), or
            None: every member computes on all N rows, its loss masked.
    """

    x: torch.Tensor
    y: torch.Tensor
    train: torch.Tensor
    counts: torch.Tensor
    mu: torch.Tensor
    inv_sd: torch.Tensor
    num_classes: int
    multi_label: bool
    blocks: FoldBlocks | None = None

    def __post_init__(self) -> None:
        if self.blocks is not None and self.blocks.members != self.folds:
            raise ValueError(
                f"FoldData's blocks hold {self.blocks.members} members, its masks "
                f"{self.folds}; replace both (or set blocks=None)."
            )

    @property
    def folds(self) -> int:
        """Batch members (G·k): every fold of every feature set."""
        return int(self.train.shape[0])

    @property
    def groups(self) -> int:
        return int(self.x.shape[0])

    @property
    def dim(self) -> int:
        return int(self.x.shape[-1])


def fit_device() -> torch.device:
    """Where probes are fitted: the GPU when there is one (the fits are batched tensor code
    that runs unchanged on either), else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def prepare(
    features: np.ndarray,
    labels: np.ndarray,
    ids: np.ndarray,
    folds: int,
    num_classes: int,
    device: torch.device | None = None,
) -> FoldData:
    """Tensors and per-member statistics for ``features`` ((N, d), or G sets (G, N, d) of
    the same examples) split by fold ids ``ids``, on ``device`` (default: the CPU)."""
    device = device or torch.device("cpu")
    x = torch.as_tensor(np.ascontiguousarray(features, dtype=np.float32)).to(device)
    if x.ndim == 2:
        x = x[None]
    multi = labels.ndim == 2
    y = torch.as_tensor(labels.astype(np.float32 if multi else np.int64)).to(device)
    masks = torch.as_tensor(train_masks(ids, folds).astype(np.float32)).to(device)
    train = masks.repeat(x.shape[0], 1)
    counts = train.sum(dim=1)
    x64, m64 = x.double(), masks.double()
    mean = torch.einsum("kn,gnd->gkd", m64, x64).reshape(-1, x.shape[2]) / counts.double()[:, None]
    sq = torch.einsum("kn,gnd->gkd", m64, x64 * x64).reshape(-1, x.shape[2]) / counts.double()[:, None]
    var = (sq - mean * mean).clamp_min(0.0)
    scale = var.sqrt()
    tiny = scale <= 1e-6 * (1.0 + mean.abs())
    inv_sd = torch.where(tiny, torch.ones_like(scale), 1.0 / scale.clamp_min(1e-30))
    return FoldData(
        x=x,
        y=y,
        train=train,
        counts=counts,
        mu=mean.float(),
        inv_sd=inv_sd.float(),
        num_classes=num_classes,
        multi_label=multi,
        blocks=fold_blocks(x, ids, folds),
    )


@dataclass(frozen=True)
class Rows:
    """The rows one pass of a fit computes on, per batch member: their labels and loss weights.

    Attributes:
        held: Whether these are the members' held-out rows (else their training rows).
        labels: (G·k, R) int64, or (G·k, R, C) multi-hot.
        weights: (G·k, R): on a member's training rows 1 / its count (a training pass) or 1
            (a held-out pass); 0 on every other row (padding, or rows of the other role).
        multi_label: Whether the labels are multi-hot.
    """

    held: bool
    labels: torch.Tensor
    weights: torch.Tensor
    multi_label: bool


def fit_rows(data: FoldData, *, held: bool) -> Rows:
    """The training (``held=False``) or held-out rows of every member, as
    :func:`first_layer` lays them out for ``data``."""
    if data.blocks is None:
        labels = data.y.expand(data.folds, *data.y.shape)
        weights = 1.0 - data.train if held else data.train / data.counts[:, None]
        return Rows(held=held, labels=labels, weights=weights, multi_label=data.multi_label)
    order, valid = (data.blocks.order, data.blocks.valid) if held else data.blocks.train_order()
    labels = data.y[order]
    labels = labels.repeat(data.groups, *([1] * (labels.ndim - 1)))
    weights = valid.repeat(data.groups, 1)
    if not held:
        weights = weights / data.counts[:, None]
    return Rows(held=held, labels=labels, weights=weights, multi_label=data.multi_label)


def first_layer(data: FoldData, v: torch.Tensor, b: torch.Tensor, rows: Rows | None = None) -> torch.Tensor:
    """Per-member affine map of the standardised features from V (G·k, d, out): on the members'
    ``rows`` ((G·k, R, out), aligned with ``rows.labels``), or on all N rows (None)."""
    members, d, out = v.shape
    w = v * data.inv_sd[:, :, None]
    shift = b - torch.einsum("kd,kdo->ko", data.mu, w)
    if rows is not None and data.blocks is not None:
        return data.blocks.held_layer(w, shift) if rows.held else data.blocks.train_layer(w, shift)
    g = data.groups
    k = members // g
    # one GEMM per feature set for all its folds: (G, N, d) @ (G, d, k·out)
    flat = torch.bmm(data.x, w.reshape(g, k, d, out).permute(0, 2, 1, 3).reshape(g, d, k * out))
    n = data.x.shape[1]
    return flat.reshape(g, n, k, out).permute(0, 2, 1, 3).reshape(members, n, out) + shift[:, None, :]


def example_losses(rows: Rows, logits: torch.Tensor) -> torch.Tensor:
    """Loss of every row under its member's probe: (G·k, R)."""
    if rows.multi_label:
        return F.binary_cross_entropy_with_logits(logits, rows.labels, reduction="none").mean(dim=2)
    return torch.logsumexp(logits, dim=2) - logits.gather(2, rows.labels[:, :, None]).squeeze(2)


def training_loss(rows: Rows, logits: torch.Tensor) -> torch.Tensor:
    """Sum over members of each member's mean loss on its own training ``rows``."""
    return (example_losses(rows, logits) * rows.weights).sum()


def held_out_scores(rows: Rows, logits: torch.Tensor) -> FoldScores:
    """Loss and task error of each member's probe on its held-out ``rows`` (G·k values;
    :func:`split_groups` cuts them per feature set)."""
    with torch.no_grad():
        weights = rows.weights
        fold_loss = ((example_losses(rows, logits) * weights).sum(dim=1) / weights.sum(dim=1)).double().cpu().numpy()
        errors = np.empty(len(fold_loss))
        labels, held, logits = rows.labels.cpu().numpy(), (weights > 0).cpu().numpy(), logits.cpu()
        for f in range(len(fold_loss)):
            scores = logits[f][torch.from_numpy(held[f])].double().numpy()
            mine = labels[f][held[f]]
            if rows.multi_label:
                errors[f] = task_error(scores, mine.astype(np.int64), "multi")
            else:
                errors[f] = float(np.mean(scores.argmax(axis=1) != mine))
    return FoldScores(losses=fold_loss, errors=errors)


def split_groups(scores: FoldScores, groups: int) -> list[FoldScores]:
    """One :class:`FoldScores` per feature set from a batched fit's G·k values."""
    k = len(scores.losses) // groups
    return [
        FoldScores(losses=scores.losses[g * k : (g + 1) * k], errors=scores.errors[g * k : (g + 1) * k])
        for g in range(groups)
    ]


__all__ = [
    "FoldData",
    "FoldScores",
    "Rows",
    "example_losses",
    "first_layer",
    "fit_device",
    "fit_rows",
    "held_out_scores",
    "prepare",
    "split_groups",
    "training_loss",
]
