"""FT-d's selection runs once per task (its ``prepare_task``), before the trials, in a learner
host, and is charged to the task once: the run's cFLOP does not depend on how many trials
run at once (issue 22, item 2). Before, each trial selected in its own ``train``, cached per
process, so two trials on two hosts paid for it twice and one host paid once."""

from __future__ import annotations

import pickle

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.store.db.models import TaskResult
from services.store.runs import records
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

from .conftest import tiny_manifest

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]


def _run(runner: StreamRunner, stream: str, concurrent: int) -> tuple[list[float], dict, bool]:
    budget = RunBudget(trials=2, steps=2, checkpoint_fractions=(1.0,), max_concurrent=concurrent)
    run_id = runner.start(RunRequest(stream=stream, learner="ft_d_small", budget=budget))
    with runner.sessions() as session:
        results = session.scalars(
            select(TaskResult).where(TaskResult.submission_id == run_id).order_by(TaskResult.id)
        ).all()
        state = pickle.loads(runner.store.get_bytes(records.last_state_key(session, submission_id=run_id)))
        floored = any(r.flops_floored for r in results)  # a trial's floor or the evaluation's
        return [r.flops for r in results], state, floored


def test_ft_d_costs_the_same_cflop_with_one_or_two_trials_at_once(runner, tmp_path):
    stream = str(tiny_manifest(tmp_path / "two.json", tasks=2))
    one, state_one, floored_one = _run(runner, stream, 1)
    two, state_two, floored_two = _run(runner, stream, 2)
    assert len(one) == len(two) == 2
    assert state_one[2]["chosen"] == state_two[2]["chosen"] == 1  # the same selection, made once
    assert state_one[2]["knn_error"] == state_two[2]["knn_error"]
    # Two 2-step trials on 16-px images stay far below the floor's CPU allowance: a floor here
    # would mean the learner's own count was not believed, and the comparison would prove nothing.
    assert not (floored_one or floored_two), "a CPU-time floor was charged: the counts are not the learner's"
    assert one == two, (one, two)
    assert sum(one) == sum(two)
