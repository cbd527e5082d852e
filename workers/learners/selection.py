"""Which earlier predictor transfers best to a new task: FT-d's k-nearest-neighbour probe.

NEVIS'22 (Section 5) picks the initialisation of a new task by asking each earlier predictor
for features of a subset of the new task (up to 10,000 train and 5,000 dev images), fitting a
k-NN classifier (k = 5) on the train features and scoring it on the dev features (accuracy,
or mAP for multi-label tasks). The candidate with the lowest error wins; a randomly
initialised network is a candidate too, so a stream with nothing related falls back to it.

The distances are computed by :class:`NeighbourScores`, a torch module, so a learner that
passes it to ``ctx.track`` is charged for the search as for any other pass. The scores of a
dev example are the mean of its neighbours' one-hot (or multi-hot) labels, scored with the
service's own task error, so "error" here means exactly what it means in E.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from services.core.metrics import task_error
from workers.stream.task_info import LabelledData, TaskInfo

K_NEIGHBOURS = 5
MAX_TRAIN = 10_000
MAX_DEV = 5_000
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

    order: int  # an earlier task's order, or RANDOM_INIT
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


def probe_subset(train: LabelledData, dev: LabelledData, *, seed: int,
                 max_train: int = MAX_TRAIN, max_dev: int = MAX_DEV) -> ProbeSubset:
    """A fixed random subset of the task (the same for every candidate and every trial)."""
    rng = np.random.default_rng(seed)

    def take(data: LabelledData, cap: int) -> LabelledData:
        if len(data) <= cap:
            return data
        index = np.sort(rng.choice(len(data), size=cap, replace=False))
        return LabelledData(data.images[index], data.labels[index])

    return ProbeSubset(train=take(train, max_train), dev=take(dev, max_dev))


def knn_error(train_features: np.ndarray, subset: ProbeSubset, dev_features: np.ndarray, info: TaskInfo,
              scorer: Callable[..., torch.Tensor]) -> float:
    """The task error of a k-NN classifier on these features (``scorer``: a tracked
    :class:`NeighbourScores`)."""
    targets = _target_matrix(subset.train.labels, info)
    with torch.no_grad():
        scores = scorer(_as_tensor(dev_features), _as_tensor(train_features), targets)
    return task_error(scores.numpy(), subset.dev.labels, info.kind)


def rank_candidates(candidates: Iterable[tuple[int, FeatureFn]], subset: ProbeSubset, info: TaskInfo,
                    scorer: Callable[..., torch.Tensor]) -> list[CandidateScore]:
    """Every candidate's k-NN error, best first; on a tie the random network comes first
    (no evidence of transfer), then the most recent task.

    ``candidates`` yields (order, features function) pairs lazily, so only one earlier
    predictor needs to be loaded at a time.
    """
    scores = []
    for order, features in candidates:
        error = knn_error(features(subset.train.images), subset, features(subset.dev.images), info, scorer)
        scores.append(CandidateScore(order=order, error=error))
    return sorted(scores, key=lambda s: (s.error, s.order != RANDOM_INIT, -s.order))


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
    "K_NEIGHBOURS", "MAX_DEV", "MAX_TRAIN", "PRETRAINED", "RANDOM_INIT", "CandidateScore", "FeatureFn",
    "NeighbourScores", "ProbeSubset", "knn_error", "probe_subset", "rank_candidates",
]
