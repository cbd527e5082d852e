"""The running charge of a task sums every rank's reports, not rank 0's alone (issue 46)."""

from __future__ import annotations

from workers.trainer.task_budget import TaskCharge


def test_every_rank_of_a_running_trial_counts_toward_the_cap():
    charge = TaskCharge(cap=100)
    assert charge.report(0, 10, rank=0) and charge.report(0, 60, rank=1)
    assert charge.total == 70  # both ranks' work, not rank 0's 10
    assert charge.report(0, 50, rank=1) and charge.total == 70  # each rank's reports only grow
    assert not charge.report(1, 30, rank=0) and charge.reached  # another trial's rank 0 tips it over


def test_settling_a_trial_replaces_every_rank_report():
    charge = TaskCharge(cap=1_000)
    charge.report(3, 100, rank=0)
    charge.report(3, 200, rank=1)
    charge.settle(3, 350)  # the trial's charge: all ranks summed, or the floor
    assert charge.total == 350
    charge.report(3, 999, rank=1)  # a late report of an ended trial is ignored
    assert charge.total == 350
