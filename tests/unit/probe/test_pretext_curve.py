"""The pretext loss at each checkpoint, from the learner's per-step training curve."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workers.probe.runtime.pretext import loss_at_checkpoints


def test_each_checkpoint_averages_the_losses_since_the_previous_one() -> None:
    steps = np.array([1, 2, 3, 4, 5, 6])
    losses = np.array([6.0, 4.0, 3.0, 3.0, 2.0, 1.0])
    out = loss_at_checkpoints([0, 2, 6], steps, losses)
    # step 0 has no loss: the first recorded one (step 1); then mean of (0, 2] and (2, 6].
    assert out.tolist() == [6.0, 5.0, pytest.approx(9.0 / 4)]


def test_a_diverged_loss_stays_infinite() -> None:
    out = loss_at_checkpoints([1, 2], np.array([1, 2]), np.array([1.0, math.inf]))
    assert out.tolist() == [1.0, math.inf]


def test_a_checkpoint_after_the_last_recorded_loss_gives_none() -> None:
    assert loss_at_checkpoints([0, 1, 5], np.array([1]), np.array([1.0])) is None
