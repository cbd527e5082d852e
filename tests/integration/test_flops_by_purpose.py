"""cFLOP and cFLOP (paper) against a hand count: a linear learner whose every pass is known.

NEVIS'22 counts the training updates of every trial; the headline cFLOP (METRICS.md) also
counts validation, the harness's dev scoring and the evaluation's prediction. Both are stored
per trial and task and read back by the run summary (what ``nevis results``, the API and the
dashboard show). SQLite only: the subject is the accounting, not the dialect.
"""

from __future__ import annotations

import math

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.store.db.models import TaskResult, Trial
from services.store.runs.summary import load_summary
from workers.stream.task_data import load_task_data
from workers.trainer.run_plan import RunRequest

pytestmark = [pytest.mark.usefixtures("ray_local"),
              pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

TRIALS, STEPS = 2, 5


def test_cflop_and_the_papers_count_agree_with_a_hand_count(runner, tiny_stream):
    from nevis_test_learners import HandCountedLinear  # noqa: PLC0415
    from tests.integration.conftest import tiny_manifest  # noqa: PLC0415

    stream = str(tiny_manifest(tiny_stream.parent / "one.json", tasks=1))
    budget = RunBudget(trials=TRIALS, steps=STEPS, checkpoint_fractions=(1.0,), max_concurrent=1)
    run = runner.start(RunRequest(stream=stream, learner="nevis_test_learners:hand_counted_linear", budget=budget))

    plan = runner.plan(run)
    data = load_task_data(runner.store, plan.tasks[0], image_size=plan.image_size, splits=("dev", "test"))
    dev, test = data.splits["dev"][0], data.splits["test"][0]
    pixels, classes = math.prod(dev.shape[1:]), plan.tasks[0].num_classes
    per_example = 2 * pixels * classes  # one forward of one example; its weight gradient costs the same
    updates = STEPS * 2 * HandCountedLinear.batch * per_example
    validation = 2 * len(dev) * per_example  # the learner's own pass and the harness's dev scoring
    prediction = len(test) * per_example

    with runner.sessions() as session:
        trials = session.scalars(select(Trial)).all()
        result = session.scalars(select(TaskResult).where(TaskResult.submission_id == run)).one()
        summary = load_summary(session, submission_id=run)
    assert len(trials) == TRIALS and all(t.flops_source == "measured" for t in trials), \
        [(t.flops_source, t.cpu_seconds) for t in trials]  # a floored trial would not be the learner's count
    assert [t.flops_paper for t in trials] == [updates] * TRIALS
    assert [t.flops for t in trials] == [updates + validation] * TRIALS
    assert result.flops_paper == TRIALS * updates
    assert result.flops_prediction == prediction
    assert result.flops == TRIALS * (updates + validation) + prediction

    row = summary.tasks[0]
    assert (row.flops_paper, row.flops_validation, row.flops_prediction) == (
        TRIALS * updates, TRIALS * validation, prediction)
    assert summary.cflop_paper == TRIALS * updates < summary.cflop == result.flops
    shown = summary.to_dict()  # what `nevis results --json` prints
    assert shown["cflop_paper"] == TRIALS * updates and shown["tasks"][0]["flops_validation"] == TRIALS * validation
