"""The harness's dev scoring of a trial, offered to the learner so that no weights pay twice.

A best-on-dev learner (the reference's ``fit_with_early_stopping``) scores its final weights
on the dev split before it returns them, and the harness scored the returned predictor on the
same split again: two passes over the same weights. Here the trial's context offers the
harness's scoring to learner code (``ctx.dev_error``): the learner's ``predict`` runs on the dev
images under the trial's meter (charged as before), the error is computed by harness code, and
the scores are remembered under the digest of the predictor's saved bytes. When the trial
returns a predictor whose saved bytes have that digest, the host sends those scores instead of
predicting again; any other predictor (other weights, or the same object changed afterwards)
is predicted anew. Harness code on the other side of the pipe still computes the trial's dev
error from the scores, never from a number the learner gives.

Only the newest and the lowest-error scores are kept (what a best-on-dev learner returns), so
memory stays at two dev-sized score arrays however often a trial validates.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.core.metrics import task_error
from workers.learners.protocol import LabelledData


@dataclass(frozen=True)
class _Scored:
    scores: np.ndarray
    error: float
    order: int  # when it was scored (the newest is kept)


class DevScoring:
    """One trial's dev scoring, done by the harness for the learner and for itself.

    Args:
        dev: the task's dev split (images and labels; the learner sees both in its view).
        kind: ``single`` or ``multi`` (how the error is computed).
        predict: the learner's ``predict`` of a predictor on the dev images, checked numeric.
        save: the learner's ``save_predictor``, checked bytes: the key of what is remembered.
    """

    def __init__(
        self, dev: LabelledData, kind: str, predict: Callable[[Any], np.ndarray], save: Callable[[Any], bytes]
    ) -> None:
        self.dev, self.kind, self._predict, self._save = dev, kind, predict, save
        self._kept: dict[str, _Scored] = {}
        self._scored = 0
        self.passes = 0  # dev passes run (what was charged), for tests and reports
        self.reused = False  # whether the trial's own dev scores were remembered ones

    def error(self, predictor: Any) -> float:
        """The dev error of ``predictor`` now (one metered pass; ``inf`` on an empty dev split)."""
        if len(self.dev) == 0:
            return float("inf")
        digest = _digest(self._save(predictor))
        scores = self._run(predictor)
        error = float(task_error(scores, self.dev.labels, self.kind))
        self._scored += 1
        self._kept[digest] = _Scored(scores, error, self._scored)
        self._keep_newest_and_best()
        return error

    def scores_for(self, predictor: Any, saved: bytes) -> np.ndarray:
        """The dev scores of the predictor a trial returns (``saved``: its saved bytes): those
        remembered for the same bytes, or a new pass."""
        kept = self._kept.get(_digest(saved))
        self.reused = kept is not None
        return kept.scores if kept is not None else self._run(predictor)

    def _run(self, predictor: Any) -> np.ndarray:
        self.passes += 1
        return self._predict(predictor)

    def _keep_newest_and_best(self) -> None:
        newest = max(self._kept.values(), key=lambda s: s.order)
        best = min(self._kept.values(), key=lambda s: (s.error, -s.order))
        self._kept = {k: s for k, s in self._kept.items() if s is newest or s is best}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


__all__ = ["DevScoring"]
