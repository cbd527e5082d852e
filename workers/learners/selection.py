"""Which earlier predictor transfers best to a new task: FT-d's k-nearest-neighbour probe.

NEVIS'22 (Section 5) picks the initialisation of a new task by asking each earlier predictor
for features of a subset of the new task (up to 10,000 train and 5,000 dev images), fitting a
k-NN classifier (k = 5) on the train features and scoring it on the dev features (accuracy,
or mAP for multi-label tasks). The candidate with the lowest error wins.

What the reference does and this module follows (``dm_nevis`` at ``7dc53a2``,
``experiments_jax/learners/finetuning_dknn/finetuning_dknn_learner.py``,
``_init_from_knn_transfer`` and ``_init_from_transfer_matrix``;
``experiments_jax/training/transfer_oracle.py``, ``TransferMatrix.transfer_tasks``):

- **Candidates.** The reference scores a randomly initialised network beside the earlier
  tasks' networks, but then walks the ranking for the best *earlier task*: the random network
  is never chosen after the first task (the first necessarily starts fresh). So the candidates
  are the earlier predictors only; :data:`RANDOM_INIT` is a candidate only where a learner asks
  for it (FT-d's ``include_fresh``), and is otherwise scored apart, for the record.
- **Ties.** The reference lists the earlier tasks in stream order, the random network last, and
  sorts with numpy's default ``argsort`` (an insertion sort, so order-keeping, for the ≤16
  candidates where it applies; unspecified beyond). Here :func:`rank_candidates` keeps the order
  the candidates came in on equal errors, always: the earliest task wins a tie, the pretrained
  checkpoint (PT+FT) and then the fresh network come after every task.
- **Batch norm.** The reference embeds with ``is_training=True`` in batches of 128
  (``batch_size_embed_for_knn``): batch norm normalises with each batch's own statistics.
  :func:`probe_features` does the same, without touching the running statistics.

The distances are computed by :class:`NeighbourScores`, a torch module, so a learner that
passes it to ``ctx.track`` is charged for the search as for any other pass. The scores of a
dev example are the mean of its neighbours' one-hot (or multi-hot) labels, scored with the
service's own task error, so "error" here means exactly what it means in E.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from services.core.metrics import task_error
from workers.learners.training import eval_mode
from workers.stream.task_info import LabelledData, TaskInfo

K_NEIGHBOURS = 5
MAX_TRAIN = 10_000
MAX_DEV = 5_000
KNN_BATCH = 128
"""Images per feature pass of the probe: the reference's ``batch_size_embed_for_knn``. Batch
norm uses each batch's statistics, so the batch size is part of what the features are."""
RANDOM_INIT = -1
"""The candidate order that stands for a freshly initialised network."""
PRETRAINED = -2
"""The candidate order that stands for the run's pretrained checkpoint (PT+FT)."""

FeatureFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class ProbeSubset:
    """The images and labels every candidate is probed on (the same for all of them)."""

    train: LabelledData
    dev: LabelledData


@dataclass(frozen=True)
class CandidateScore:
    """One candidate's k-NN error on the new task (lower transfers better)."""

    order: int  # an earlier task's order, PRETRAINED or RANDOM_INIT
    error: float


class NeighbourScores(nn.Module):
    """k-NN class scores of query features against reference features, in matmuls.

    Squared distances are ``|q|² - 2 q·r + |r|²``; the score of class c for a query is the
    share of its k nearest references labelled c (multi-hot labels average per label).
    """

    def __init__(self, k: int = K_NEIGHBOURS, chunk: int = 1024) -> None:
        super().__init__()
        self.k, self.chunk = k, chunk

    def forward(self, queries: torch.Tensor, references: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        k = min(self.k, references.shape[0])
        ref_sq = (references * references).sum(dim=1)
        out = []
        for start in range(0, queries.shape[0], self.chunk):
            q = queries[start : start + self.chunk]
            dist = (q * q).sum(dim=1, keepdim=True) - 2.0 * (q @ references.T) + ref_sq
            nearest = dist.topk(k, dim=1, largest=False).indices
            out.append(targets[nearest].mean(dim=1))
        return torch.cat(out)


def probe_subset(
    train: LabelledData, dev: LabelledData, *, seed: int, max_train: int = MAX_TRAIN, max_dev: int = MAX_DEV
) -> ProbeSubset:
    """A fixed random subset of the task (the same for every candidate and every trial)."""
    rng = np.random.default_rng(seed)

    def take(data: LabelledData, cap: int) -> LabelledData:
        if len(data) <= cap:
            return data
        index = np.sort(rng.choice(len(data), size=cap, replace=False))
        return LabelledData(data.images[index], data.labels[index])

    return ProbeSubset(train=take(train, max_train), dev=take(dev, max_dev))


@contextmanager
def batch_statistics(model: nn.Module) -> Iterator[None]:
    """Batch norm normalising with each batch's own statistics (the reference's
    ``is_training=True``) and leaving the running ones untouched; every other layer in eval mode."""
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d | nn.BatchNorm3d)]
    before = model.training, [(m.training, m.track_running_stats) for m in norms]
    model.eval()
    for m in norms:
        m.train()
        m.track_running_stats = False  # batch statistics, and no update of the running ones
    try:
        yield
    finally:
        model.train(before[0])
        for m, (training, track) in zip(norms, before[1], strict=True):
            m.train(training)
            m.track_running_stats = track


def probe_features(
    features: Callable[[torch.Tensor], torch.Tensor],
    model: nn.Module,
    prepare: Callable[[np.ndarray], torch.Tensor],
    images: np.ndarray,
    *,
    width: int,
    batch: int = KNN_BATCH,
) -> np.ndarray:
    """``features`` (a tracked representation pass of ``model``) over ``images`` as the reference
    embeds for its k-NN: batches of ``batch``, batch norm on batch statistics, no gradients.

    A last batch of one image joins the one before (batch statistics of a single image are
    undefined where the feature map is 1×1); a probe of one image in all uses the running
    statistics. ``width`` is the feature size (the shape of an empty result).
    """
    if len(images) == 0:
        return np.zeros((0, width), dtype=np.float32)
    bounds = list(range(0, len(images), batch)) + [len(images)]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] == 1:
        del bounds[-2]
    outputs = []
    with torch.no_grad(), batch_statistics(model) if len(images) > 1 else eval_mode(model):
        for start, stop in itertools.pairwise(bounds):
            outputs.append(features(prepare(images[start:stop])).float().cpu())
    return torch.cat(outputs).numpy()


def knn_error(
    train_features: np.ndarray,
    subset: ProbeSubset,
    dev_features: np.ndarray,
    info: TaskInfo,
    scorer: Callable[..., torch.Tensor],
) -> float:
    """The task error of a k-NN classifier on these features (``scorer``: a tracked
    :class:`NeighbourScores`)."""
    targets = _target_matrix(subset.train.labels, info)
    with torch.no_grad():
        scores = scorer(_as_tensor(dev_features), _as_tensor(train_features), targets)
    return task_error(scores.numpy(), subset.dev.labels, info.kind)


def candidate_error(
    features: FeatureFn, subset: ProbeSubset, info: TaskInfo, scorer: Callable[..., torch.Tensor]
) -> float:
    """One candidate's k-NN error: its features of the subset's train and dev images, scored."""
    return knn_error(features(subset.train.images), subset, features(subset.dev.images), info, scorer)


def rank_candidates(
    candidates: Iterable[tuple[int, FeatureFn]],
    subset: ProbeSubset,
    info: TaskInfo,
    scorer: Callable[..., torch.Tensor],
) -> list[CandidateScore]:
    """Every candidate's k-NN error, best first; equal errors keep the order the candidates came
    in (the reference's: earlier tasks oldest first, then whatever is not a task).

    ``candidates`` yields (order, features function) pairs lazily, so only one earlier
    predictor needs to be loaded at a time.
    """
    scores = [
        CandidateScore(order=order, error=candidate_error(features, subset, info, scorer))
        for order, features in candidates
    ]
    return sorted(scores, key=lambda s: s.error)  # stable: ties stay in candidate order


def _as_tensor(features: np.ndarray) -> torch.Tensor:
    """Features as float32, unnormalised: Euclidean k-NN on the raw representation."""
    return torch.from_numpy(np.asarray(features, dtype=np.float32))


def _target_matrix(labels: np.ndarray, info: TaskInfo) -> torch.Tensor:
    """One-hot (single-label) or multi-hot (multi-label) targets as floats, (N, K)."""
    labels = np.asarray(labels)
    if info.kind == "multi":
        return torch.from_numpy(labels.astype(np.float32))
    onehot = np.zeros((len(labels), info.num_classes), dtype=np.float32)
    onehot[np.arange(len(labels)), labels.astype(np.int64)] = 1.0
    return torch.from_numpy(onehot)


__all__ = [
    "KNN_BATCH",
    "K_NEIGHBOURS",
    "MAX_DEV",
    "MAX_TRAIN",
    "PRETRAINED",
    "RANDOM_INIT",
    "CandidateScore",
    "FeatureFn",
    "NeighbourScores",
    "ProbeSubset",
    "batch_statistics",
    "candidate_error",
    "knn_error",
    "probe_features",
    "probe_subset",
    "rank_candidates",
]
