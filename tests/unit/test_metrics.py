"""Task error as METRICS.md §1 defines it, and clear errors for malformed predictions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from services.core.errors import LearnerError
from services.core.metrics import average_precision, check_scores, mean_average_precision, task_error


def test_single_label_error_is_one_minus_top1_accuracy() -> None:
    scores = np.array([[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4], [0.5, 0.4, 0.1]])
    labels = np.array([0, 1, 0, 1])
    assert task_error(scores, labels, "single") == pytest.approx(0.5)


def test_multi_label_error_is_one_minus_macro_map_over_labels_with_positives() -> None:
    scores = np.array([[0.9, 0.2, 0.1], [0.1, 0.8, 0.3], [0.6, 0.4, 0.2], [0.2, 0.1, 0.9]])
    labels = np.array([[1, 0, 0], [0, 1, 0], [0, 1, 0], [1, 0, 0]], dtype=np.uint8)  # label 2 never positive
    expected = np.mean([average_precision_score(labels[:, k], scores[:, k]) for k in (0, 1)])
    assert mean_average_precision(scores, labels) == pytest.approx(expected)
    assert task_error(scores, labels, "multi") == pytest.approx(1 - expected)


@pytest.mark.parametrize("seed", range(40))
def test_average_precision_is_scikit_learns_with_ties_and_any_score_scale(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    positive = (rng.random(n) < rng.uniform(0.05, 0.9)).astype(np.uint8)
    positive[rng.integers(n)] = 1  # at least one positive, as the caller guarantees
    scores = rng.normal(size=n) * 10 ** rng.uniform(-3, 3)
    if seed % 2:  # coarse scores: many ties, which count as one threshold
        scores = np.round(scores / scores.std(), 1) if n > 1 else scores
    assert average_precision(positive, scores) == pytest.approx(average_precision_score(positive, scores), abs=1e-12)


def test_average_precision_counts_a_tie_as_one_threshold() -> None:
    # Thresholds 0.9 (1 of 1 right), then 0.5 (the tie: 2 of 3 right, recall 1).
    positive, scores = np.array([1, 1, 0]), np.array([0.9, 0.5, 0.5])
    assert average_precision(positive, scores) == pytest.approx(0.5 * 1 + 0.5 * (2 / 3))


def test_perfect_multi_label_scores_give_zero_error() -> None:
    labels = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.uint8)
    assert task_error(labels.astype(float), labels, "multi") == pytest.approx(0.0)


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        (np.zeros((3, 2)), r"shaped \(num_images, num_classes\) = \(4, 2\); got \(3, 2\)"),
        (np.full((4, 2), np.nan), "non-finite scores for 4 of 4 images"),
        (np.array([["a", "b"]] * 4), "real numbers"),
        ("nonsense", r"got \(\)"),
    ],
)
def test_malformed_scores_are_learner_errors(scores, message) -> None:
    with pytest.raises(LearnerError, match=message):
        check_scores(scores, num_examples=4, num_classes=2)


def test_no_positive_label_is_an_error_not_a_number() -> None:
    with pytest.raises(ValueError, match="No label has a positive example"):
        mean_average_precision(np.zeros((2, 2)), np.zeros((2, 2), dtype=np.uint8))
