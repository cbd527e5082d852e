"""The training curve a trial context records: floats as given, tensor losses read in batches."""

from __future__ import annotations

import math

import pytest
import torch

from services.core.errors import LearnerError
from workers.sandbox.context import LOSS_READ_EVERY, LocalTrialContext


def context(steps: int = 10) -> LocalTrialContext:
    return LocalTrialContext(seed=0, steps=steps, save_predictor=lambda p: b"")


def test_tensor_losses_give_the_curve_that_floats_give():
    losses = torch.linspace(2.0, 0.5, 7, dtype=torch.float64)
    by_float, by_tensor = context(), context()
    by_float.progress(0, None)
    by_tensor.progress(0, None)
    for step, loss in enumerate(losses, start=1):
        by_float.progress(step, None, loss=float(loss))
        by_tensor.progress(step, None, loss=loss.reshape(1, 1))  # one element, any shape
    assert [(p.step, p.loss) for p in by_tensor.curve] == [(p.step, p.loss) for p in by_float.curve]
    assert by_tensor.curve[0].loss is None


def test_tensor_losses_wait_to_be_read_until_a_batch_fills_or_the_curve_is_read():
    ctx = context(steps=LOSS_READ_EVERY + 2)
    weights = torch.ones(3, requires_grad=True)
    for step in range(1, LOSS_READ_EVERY):
        ctx.progress(step, None, loss=(weights * step).sum())  # a loss still in its graph
    assert all(p.loss is None for p in ctx._points)  # nothing read yet: no wait for a device
    assert all(not t.requires_grad for _, t in ctx._unread)  # kept detached: no graph held
    ctx.progress(LOSS_READ_EVERY, None, loss=(weights * LOSS_READ_EVERY).sum())  # the batch is full
    assert not ctx._unread and ctx._points[-1].loss == 3.0 * LOSS_READ_EVERY
    ctx.progress(LOSS_READ_EVERY + 1, None, loss=torch.tensor(0.25))
    assert ctx._points[-1].loss is None
    assert ctx.curve[-1].loss == 0.25  # reading the curve reads what is left


def test_a_diverged_tensor_loss_is_the_worst_loss_as_a_float_one_is():
    ctx = context()
    ctx.progress(1, None, loss=torch.tensor(float("nan")))
    ctx.progress(2, None, loss=float("nan"))
    assert [p.loss for p in ctx.curve] == [math.inf, math.inf]


def test_a_loss_of_many_elements_is_refused_at_once_naming_its_shape():
    ctx = context()
    with pytest.raises(LearnerError, match=r"one element.*\(2, 3\)"):
        ctx.progress(1, None, loss=torch.zeros(2, 3))


def test_a_loss_that_cannot_be_read_is_the_learners_error_naming_it():
    ctx = context()
    ctx.progress(1, None, loss=torch.empty((), device="meta"))  # no data behind it
    with pytest.raises(LearnerError, match="could not be read as a number"):
        ctx.wire_curve()  # a finished trial fails with it
    assert ctx.wire_curve(or_empty=True) == []  # one that failed already sends no curve


def test_the_wire_curve_spells_a_diverged_loss_for_json():
    ctx = context()
    ctx.progress(0, None)
    ctx.progress(1, None, loss=torch.tensor(float("inf")))
    ctx.progress(2, None, loss=0.5)
    assert ctx.wire_curve() == [[0, None], [1, "inf"], [2, 0.5]]
