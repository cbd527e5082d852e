"""A run's budget picks its search strategy: ``gp_ucb`` on a real local Ray, one task.

Checks what the unit tests cannot: Tune takes the GP searcher as the runner wires it (the
trial index given by the searcher, not a grid; as many trials as the budget says; each
stored with its index, seed and a config of the declared values), and failed trials, which
report no ``dev_error``, neither stop Tune nor the search.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.core.errors import TaskFailedError
from services.store.db.models import Trial
from services.store.runs.summary import load_summary
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

# The strategy does not touch the database: SQLite only (test_run_stream covers both dialects).
pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]


@pytest.fixture
def one_task_stream(tiny_stream: Path) -> Path:
    """The tiny stream cut to its first task: one Tune experiment per test."""
    doc = json.loads(tiny_stream.read_text())
    doc["tasks"] = doc["tasks"][:1]
    tiny_stream.write_text(json.dumps(doc))
    return tiny_stream


def _trials(runner: StreamRunner) -> list[Trial]:
    with runner.sessions() as session:
        return list(session.scalars(select(Trial).order_by(Trial.trial_index)))


def test_gp_ucb_runs_the_budgeted_trials_of_a_task(runner: StreamRunner, one_task_stream: Path) -> None:
    budget = RunBudget(trials=3, steps=2, checkpoint_fractions=(1.0,), search="gp_ucb")
    run_id = runner.start(
        RunRequest(stream=str(one_task_stream), learner="nevis_test_learners:nearest_mean", budget=budget)
    )
    trials = _trials(runner)
    assert [t.trial_index for t in trials] == [0, 1, 2]
    assert all(t.status == "succeeded" and t.dev_error is not None for t in trials)
    assert all(t.config["shrink"] in (0.0, 0.5) for t in trials)  # the declared Choice
    assert len({t.seed for t in trials}) == 3
    with runner.sessions() as session:
        assert load_summary(session, submission_id=run_id).status == "succeeded"


def test_failed_trials_under_gp_ucb_fail_the_task_with_their_error(runner: StreamRunner, one_task_stream: Path) -> None:
    budget = RunBudget(trials=2, steps=1, search="gp_ucb", scheduler="asha")
    with pytest.raises(TaskFailedError, match=r"all 2 trials failed; first error: RuntimeError: boom on task 1"):
        runner.start(RunRequest(stream=str(one_task_stream), learner="nevis_test_learners:crasher", budget=budget))
    assert [(t.trial_index, t.status) for t in _trials(runner)] == [(0, "failed"), (1, "failed")]
