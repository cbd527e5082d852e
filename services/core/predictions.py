"""A task's per-example evaluation predictions, kept compactly so its error can be recomputed
(and resampled, :mod:`services.core.uncertainty`) without the learner.

What is kept is exactly what the task error e_i of METRICS.md §1 depends on, nothing more:

- single-label: the predicted class of each example (the argmax of its scores) and its label,
  each in the smallest unsigned integer type that holds it;
- multi-label: for each label, the dense rank of each example's score among that label's
  scores (ties kept as ties), and the labels as packed bits. Average precision depends only on
  the order of the scores and their ties, so the ranks give the same error, bit for bit, as the
  float64 scores the learner returned, at two bytes per score instead of eight.

:func:`encode` is called by harness code at evaluation time (the labels never reach learner
code); :func:`decode` reads the bytes back as a :class:`TaskPredictions`, whose
:attr:`~TaskPredictions.error` equals the ``task_error`` of the original scores exactly.
The format is an uncompressed ``.npz`` with a format version.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Literal

import numpy as np

from services.core.metrics import check_scores, mean_average_precision

FORMAT_VERSION = 1


@dataclass(frozen=True, eq=False)
class TaskPredictions:
    """One task's evaluation predictions and labels.

    Attributes:
        kind: ``single`` or ``multi``.
        predicted: single: (N,) predicted class; multi: (N, K) dense rank of each score within
            its label's column (higher rank = higher score).
        labels: single: (N,) class index; multi: (N, K) 0/1.
    """

    kind: Literal["single", "multi"]
    predicted: np.ndarray
    labels: np.ndarray

    @property
    def num_examples(self) -> int:
        return int(self.labels.shape[0])

    @property
    def correct(self) -> np.ndarray:
        """single-label only: whether each example was classified correctly (bool, (N,))."""
        if self.kind != "single":
            raise ValueError("The 'correct' attribute is defined for single-label tasks only.")
        return self.predicted == self.labels

    @property
    def error(self) -> float:
        """The task error e_i (METRICS.md §1), equal to ``task_error`` of the original scores."""
        if self.kind == "single":
            return float(1.0 - np.mean(self.correct))
        return 1.0 - mean_average_precision(self.predicted.astype(np.float64), self.labels)


def encode(scores: np.ndarray, labels: np.ndarray, kind: Literal["single", "multi"]) -> bytes:
    """The compact bytes of a task's predictions (``scores`` as the learner returned them).

    Examples:
        >>> blob = encode(np.array([[2.0, 1.0], [0.0, 3.0]]), np.array([0, 0]), "single")
        >>> decode(blob).error
        0.5
    """
    labels = np.asarray(labels)
    if kind == "single":
        labels = labels.reshape(-1)
        scores = check_scores(scores, num_examples=labels.shape[0], num_classes=np.shape(scores)[1])
        num_classes = max(scores.shape[1], int(labels.max(initial=0)) + 1)
        arrays = {
            "predicted": scores.argmax(axis=1).astype(_uint_for(num_classes - 1)),
            "labels": labels.astype(_uint_for(num_classes - 1)),
        }
    elif kind == "multi":
        scores = check_scores(scores, num_examples=labels.shape[0], num_classes=labels.shape[1])
        arrays = {
            "predicted": dense_ranks(scores),
            "labels": np.packbits(labels.astype(bool), axis=0),
            "shape": np.asarray(labels.shape, dtype=np.int64),
        }
    else:
        raise ValueError(f"kind must be 'single' or 'multi'; got {kind!r}")
    buffer = io.BytesIO()
    np.savez(buffer, version=np.int64(FORMAT_VERSION), kind=np.str_(kind), **arrays)
    return buffer.getvalue()


def decode(data: bytes) -> TaskPredictions:
    """Read bytes written by :func:`encode`.

    Raises:
        ValueError: the bytes are not predictions of a known format version.
    """
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            version, kind = int(npz["version"]), str(npz["kind"])
            arrays = {name: npz[name] for name in npz.files}
    except (OSError, KeyError, ValueError) as exc:
        raise ValueError(f"Not stored task predictions: {exc}") from exc
    if version != FORMAT_VERSION:
        raise ValueError(f"Stored task predictions have format version {version}; this code reads {FORMAT_VERSION}.")
    if kind == "single":
        return TaskPredictions("single", arrays["predicted"].astype(np.int64), arrays["labels"].astype(np.int64))
    rows, cols = (int(v) for v in arrays["shape"])
    labels = np.unpackbits(arrays["labels"], axis=0, count=rows)[:, :cols].astype(np.int64)
    return TaskPredictions("multi", arrays["predicted"].astype(np.int64), labels)


def dense_ranks(scores: np.ndarray) -> np.ndarray:
    """Per column, the dense rank (0 = lowest) of each score; equal scores share a rank."""
    ranks = np.empty(scores.shape, dtype=np.int64)
    for k in range(scores.shape[1]):
        _, ranks[:, k] = np.unique(scores[:, k], return_inverse=True)
    return ranks.astype(_uint_for(int(ranks.max(initial=0))))


def _uint_for(largest: int) -> type[np.unsignedinteger]:
    for dtype in (np.uint8, np.uint16, np.uint32):
        if largest <= np.iinfo(dtype).max:
            return dtype
    return np.uint64


__all__ = ["FORMAT_VERSION", "TaskPredictions", "decode", "dense_ranks", "encode"]
