"""FLOPs that cannot be dodged by dying: a trial whose process is killed is charged what its
last periodic report said, a failed multi-worker trial what every rank spent, and a task's
failed ``prepare_task`` (raised, or its process killed) what its host last reported."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.core.errors import TaskFailedError
from services.store.db.models import Event, Trial
from workers.stream.task_data import load_task_data
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

# What is tested here is learner-side (the sandbox, the harness, FLOPs), not the database
# dialect: SQLite only (the runner's PostgreSQL path is covered by test_run_stream).
pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

BUDGET = RunBudget(trials=1, steps=4, checkpoint_fractions=(1.0,))


def only_trial(runner: StreamRunner) -> Trial:
    with runner.sessions() as session:
        trial = session.scalars(select(Trial)).one()
        session.expunge(trial)
        return trial


def test_a_trial_killed_with_sigkill_is_charged_its_last_report(runner, tiny_stream):
    from tests.integration.conftest import tiny_manifest

    stream = tiny_manifest(tiny_stream.parent / "one.json", tasks=1)
    with pytest.raises(TaskFailedError):
        runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:killed_midway", budget=BUDGET))
    trial = only_trial(runner)
    # three steps of a 64x64 linear layer on 256 rows: forward 2·256·64·64 and, the input
    # needing no gradient, a weight gradient of the same size
    assert trial.status == "failed"
    assert trial.flops == 3 * 2 * (2 * 256 * 64 * 64)


def test_a_failed_multi_worker_trial_is_charged_every_rank(runner, tiny_stream, monkeypatch):
    from tests.integration.conftest import tiny_manifest

    monkeypatch.setattr(runner, "settings", runner.settings.model_copy(update={"sandbox": "none"}))  # trusted code only
    stream = tiny_manifest(tiny_stream.parent / "one.json", tasks=1)
    with pytest.raises(TaskFailedError):
        runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:failing_two_workers", budget=BUDGET))
    trial = only_trial(runner)
    assert trial.status == "failed" and trial.flops == 2000


@pytest.mark.parametrize("learner", ["prepare_raiser", "prepare_killer"])
def test_a_failed_preparation_is_charged_its_last_report(runner, tiny_stream, learner):
    from nevis_hostile_learners import FailingPreparer

    from tests.integration.conftest import tiny_manifest

    stream = tiny_manifest(tiny_stream.parent / "one.json", tasks=1)
    with pytest.raises(TaskFailedError, match="prepare_task failed"):
        runner.start(RunRequest(stream=str(stream), learner=f"nevis_hostile_learners:{learner}", budget=BUDGET))
    with runner.sessions() as session:
        submission_id = session.scalars(select(Event.submission_id)).first()
        plan = runner.plan(submission_id)
        failed = session.scalars(select(Event).where(Event.kind == "task.failed")).one()
        assert not session.scalars(select(Trial)).all()  # no trial ran: the preparation comes first
    train = load_task_data(runner.store, plan.tasks[0], image_size=plan.image_size, splits=("train",)).splits["train"][
        0
    ]
    pixels = train.reshape(len(train), -1).shape[1]
    assert failed.payload["spent_flops"] == 2 * len(train) * pixels * FailingPreparer.width
