"""Task error as METRICS.md §1 defines it, and clear errors for malformed predictions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from services.core.errors import LearnerError
from services.core.metrics import check_scores, mean_average_precision, task_error


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
