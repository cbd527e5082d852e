"""ASHA's rule as the harness applies it: rungs, the best-1/eta cut, and the stop signal."""

from __future__ import annotations

import math

import pytest

from workers.sandbox.context import LocalTrialContext, TrialStopped
from workers.trainer.early_stopping import SuccessiveHalving, rung_steps


def test_rungs_are_the_budget_divided_by_powers_of_eta():
    assert rung_steps(90, eta=3, rungs=2) == (10, 30)
    assert rung_steps(9, eta=3, rungs=3) == (1, 3)  # 9/27 rounds to 0, kept as step 1
    assert rung_steps(1) == ()
    with pytest.raises(ValueError, match="eta"):
        rung_steps(10, eta=1)


def test_a_trial_goes_on_only_within_the_best_third_once_three_have_reported():
    asha = SuccessiveHalving(rungs=(10, 30), eta=3)
    assert asha.report(0, 10, 0.5) and asha.report(1, 10, 0.4)  # fewer than eta: go on
    assert not asha.report(2, 10, 0.6)  # worst of three
    assert asha.report(3, 10, 0.3)  # best so far
    assert not asha.report(4, 10, 0.45)  # 5 seen: best ceil(5/3) = 2 are 0.3, 0.4
    assert asha.report(5, 20, 0.99)  # not a rung
    assert asha.stopped == {2, 4}


def test_a_diverged_trial_ranks_last():
    asha = SuccessiveHalving(rungs=(5,), eta=2)
    assert asha.report(0, 5, 0.2)
    assert not asha.report(1, 5, math.nan)


def test_progress_at_a_refused_rung_raises_trial_stopped_which_except_exception_misses():
    asked = []

    def refuse(step, predictor):
        asked.append(step)
        return step < 3

    ctx = LocalTrialContext(seed=0, steps=9, save_predictor=lambda p: b"", rung_at=(1, 3), on_rung=refuse)
    ctx.progress(0, None)
    ctx.progress(1, None)
    with pytest.raises(TrialStopped) as stopped:
        try:
            ctx.progress(3, None)
        except Exception:  # noqa: BLE001 - a learner's blanket handler must not swallow it
            pytest.fail("TrialStopped was caught as an Exception")
    assert stopped.value.step == 3 and asked == [1, 3]
