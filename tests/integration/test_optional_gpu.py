"""A learner that prefers a GPU (``Resources(gpu_optional=True)``, as ``indep`` does) runs on
a cluster without one: the runner drops the ask instead of leaving the trial unschedulable."""

from __future__ import annotations

import pytest
import ray
from sqlalchemy import select

from services.core.budget import RunBudget
from services.store.db.models import Submission, TaskRun, Trial
from workers.trainer.run_plan import RunRequest

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]


def test_a_gpu_preferring_learner_trains_on_the_cpus_of_a_cluster_without_gpus(runner, tiny_stream):
    from tests.integration.conftest import tiny_manifest

    stream = str(tiny_manifest(tiny_stream.parent / "one.json", tasks=1))
    sid = runner.start(
        RunRequest(
            stream=stream,
            learner="nevis_test_learners:gpu_preferring_indep",
            budget=RunBudget(trials=1, steps=2, checkpoint_fractions=(1.0,)),
        )
    )
    assert ray.cluster_resources().get("GPU", 0.0) == 0.0  # the premise: no GPU here
    with runner.sessions() as session:
        assert session.get(Submission, sid).status == "succeeded"
        (trial,) = session.scalars(select(Trial).join(TaskRun).where(TaskRun.submission_id == sid)).all()
        assert trial.status == "succeeded" and trial.flops > 0
