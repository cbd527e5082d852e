"""FLOPs that cannot be dodged by not tracking: a learner that never calls ``ctx.track`` is
charged what the same learner is charged when it tracks its network, end to end (learner
host, harness, database), and the untracked share is recorded as a ``trial.untracked_flops``
event (the trials table has no column for it)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.store.db.models import Event, TaskResult, TaskRun, Trial
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

# Learner-side accounting, not the database dialect: SQLite only, as test_flops_of_failures.
pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

BUDGET = RunBudget(trials=1, steps=4, checkpoint_fractions=(1.0,))


def charged(runner: StreamRunner, submission_id: int) -> tuple[float, float, list[dict]]:
    """The run's one trial's FLOPs, its task's FLOPs, and its untracked-FLOP events."""
    with runner.sessions() as session:
        trial = session.scalars(select(Trial).join(TaskRun).where(TaskRun.submission_id == submission_id)).one()
        task = session.scalars(select(TaskResult).where(TaskResult.submission_id == submission_id)).one()
        events = session.scalars(
            select(Event).where(Event.submission_id == submission_id, Event.kind == "trial.untracked_flops")
        ).all()
        return trial.flops, task.flops, [dict(e.payload) for e in events]


def test_a_learner_that_never_tracks_is_charged_as_the_one_that_does(runner, tiny_stream):
    from tests.integration.conftest import tiny_manifest

    stream = str(tiny_manifest(tiny_stream.parent / "one.json", tasks=1))
    tracked = runner.start(RunRequest(stream=stream, learner="nevis_test_learners:one_worker_indep", budget=BUDGET))
    untracked = runner.start(RunRequest(stream=stream, learner="nevis_test_learners:untracked_indep", budget=BUDGET))
    trial_t, task_t, events_t = charged(runner, tracked)
    trial_u, task_u, events_u = charged(runner, untracked)
    assert trial_t > 0 and abs(trial_u - trial_t) <= 0.01 * trial_t
    assert abs(task_u - task_t) <= 0.01 * task_t  # the test-split evaluation too
    assert events_t == []
    assert len(events_u) == 1 and events_u[0]["flops_untracked"] == events_u[0]["flops"] == trial_u
