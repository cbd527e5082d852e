"""The harness's dev scoring offered to learners: one pass per set of weights, and a score that
stays with the bytes it was computed for (workers/sandbox/dev_scoring.py)."""

from __future__ import annotations

import pickle

import numpy as np

from workers.learners.protocol import LabelledData
from workers.sandbox.dev_scoring import DevScoring

DEV = LabelledData(np.zeros((4, 2, 2, 3), np.uint8), np.array([0, 1, 1, 0]))


def _scoring() -> DevScoring:
    """A 'predictor' is a list of the 4 predicted labels; its scores are their one-hot rows."""
    return DevScoring(DEV, "single", lambda p: np.eye(2)[np.asarray(p)], pickle.dumps)


def test_the_returned_weights_are_not_scored_twice() -> None:
    scoring = _scoring()
    final = [0, 1, 0, 0]
    assert scoring.error(final) == 0.25
    scores = scoring.scores_for(final, pickle.dumps(final))
    assert scoring.passes == 1 and scoring.reused
    np.testing.assert_array_equal(scores, np.eye(2)[final])


def test_a_score_does_not_follow_other_weights_nor_the_same_object_changed() -> None:
    scoring = _scoring()
    scored = [0, 1, 1, 0]
    assert scoring.error(scored) == 0.0
    other = [1, 0, 0, 1]
    assert scoring.scores_for(other, pickle.dumps(other)).argmax(1).tolist() == other
    scored[:] = other  # the scored object, changed after scoring
    assert scoring.scores_for(scored, pickle.dumps(scored)).argmax(1).tolist() == other
    assert scoring.passes == 3 and not scoring.reused


def test_the_best_and_the_newest_scores_are_kept_for_a_best_on_dev_return() -> None:
    scoring = _scoring()
    best, middle, final = [0, 1, 1, 0], [0, 1, 1, 1], [1, 1, 1, 1]
    for weights in (best, middle, final):
        scoring.error(weights)
    for weights in (best, final):
        scoring.scores_for(weights, pickle.dumps(weights))
        assert scoring.reused
    scoring.scores_for(middle, pickle.dumps(middle))  # neither best nor newest: dropped, scored anew
    assert not scoring.reused and scoring.passes == 4


def test_an_empty_dev_split_is_never_predicted_for_the_learner() -> None:
    scoring = DevScoring(
        LabelledData(np.zeros((0, 2, 2, 3), np.uint8), np.zeros(0, np.int64)),
        "single",
        lambda p: np.zeros((0, 2)),
        pickle.dumps,
    )
    assert scoring.error([0]) == float("inf") and scoring.passes == 0
