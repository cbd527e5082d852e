"""A task whose trials all wait for resources, none running, fails past the deadline naming
its ask, instead of waiting for ever (Tune's statuses, on a clock the test moves)."""

from __future__ import annotations

import pytest

from workers.trainer.pending_deadline import PendingDeadline, PlacementTimeout


def test_trials_pending_with_none_running_fail_past_the_deadline() -> None:
    now = [0.0]
    deadline = PendingDeadline("{'cpu': 4.0, 'gpu': 0.0}", deadline_s=60.0, clock=lambda: now[0])
    deadline.check(["PENDING", "PENDING"])
    now[0] = 59.0
    deadline.check(["PENDING", "PENDING"])  # not yet
    now[0] = 61.0
    with pytest.raises(PlacementTimeout, match=r"within 60 s: each asks for \{'cpu': 4.0, 'gpu': 0.0\}"):
        deadline.check(["PENDING", "PENDING"])


def test_a_running_trial_or_nothing_pending_restarts_the_clock() -> None:
    now = [0.0]
    deadline = PendingDeadline("x", deadline_s=60.0, clock=lambda: now[0])
    deadline.check(["PENDING"])
    now[0] = 50.0
    deadline.check(["RUNNING", "PENDING"])  # the cluster gives: the wait is not the cluster's refusal
    now[0] = 100.0
    deadline.check(["PENDING", "TERMINATED"])  # the clock starts again here
    now[0] = 150.0
    deadline.check(["PENDING", "TERMINATED"])
    now[0] = 170.0
    with pytest.raises(PlacementTimeout):
        deadline.check(["PENDING", "TERMINATED"])
