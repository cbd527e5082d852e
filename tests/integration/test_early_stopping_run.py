"""ASHA on a real local Ray: trials stopped at a rung keep the FLOPs they spent, are recorded
as stopped, and are never the chosen trial; the task's FLOPs still add up."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.store.db.models import TaskResult, TaskRun, Trial
from workers.trainer.run_plan import RunRequest

# What is tested here is learner-side (the sandbox, the harness, FLOPs), not the database
# dialect: SQLite only (the runner's PostgreSQL path is covered by test_run_stream).
pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

STEPS = 9  # rungs at steps 1 and 3 (eta 3)


def test_asha_stops_trailing_trials_and_charges_what_they_spent(runner, tiny_stream):
    from tests.integration.conftest import tiny_manifest

    stream = tiny_manifest(tiny_stream.parent / "one.json", tasks=1)
    budget = RunBudget(trials=6, steps=STEPS, max_concurrent=1, scheduler="asha", checkpoint_fractions=(1.0,))
    run_id = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:graded", budget=budget))
    with runner.sessions() as session:
        trials = session.scalars(select(Trial).join(TaskRun).where(TaskRun.submission_id == run_id)).all()
        result = session.scalars(select(TaskResult).where(TaskResult.submission_id == run_id)).one()
        statuses = sorted(t.status for t in trials)
        stopped = [t for t in trials if t.status == "stopped"]
        finished = [t for t in trials if t.status == "succeeded"]
        assert len(trials) == 6 and stopped, statuses
        assert all("stopped by early stopping at step" in t.error_text for t in stopped)
        # 1,000 FLOPs per step plus the rung predictions: a stopped trial paid for fewer steps
        assert all(0 < t.flops < min(f.flops for f in finished) for t in stopped)
        assert result.best_trial_id in {t.id for t in finished}
        assert result.flops >= sum(t.flops for t in trials)


def test_proxy_scheduler_stops_trials_by_lidar_and_charges_the_views(runner, tiny_stream):
    """The ``proxy`` scheduler on a real network: trials trailing in LiDAR at steps 2 and 4 (of
    16) stop, say so, and keep what they spent, the rung's feature passes included."""
    from tests.integration.conftest import tiny_manifest

    stream = tiny_manifest(tiny_stream.parent / "one.json", tasks=1)
    budget = RunBudget(trials=6, steps=16, max_concurrent=1, scheduler="proxy", checkpoint_fractions=(1.0,))
    run_id = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:one_worker_indep", budget=budget))
    with runner.sessions() as session:
        trials = session.scalars(select(Trial).join(TaskRun).where(TaskRun.submission_id == run_id)).all()
        result = session.scalars(select(TaskResult).where(TaskResult.submission_id == run_id)).one()
        stopped = [t for t in trials if t.status == "stopped"]
        finished = [t for t in trials if t.status == "succeeded"]
        assert len(trials) == 6 and stopped and len(stopped) + len(finished) == 6, [t.status for t in trials]
        assert all("stopped by early stopping at step" in t.error_text and "(LiDAR " in t.error_text for t in stopped)
        assert all(0 < t.flops < min(f.flops for f in finished) for t in stopped)
        assert result.best_trial_id in {t.id for t in finished}
        assert result.flops >= sum(t.flops for t in trials)
