"""cFLOP and cFLOP (paper) against a hand count: a linear learner whose every pass is known.

NEVIS'22 counts the training updates of every trial; the headline cFLOP (METRICS.md) also
counts validation, the harness's dev scoring and the evaluation's prediction. Both are stored
per trial and task and read back by the run summary (what ``nevis results``, the API and the
dashboard show). A learner that validates its final weights through ``ctx.dev_error`` pays one
dev pass for them, not two (the harness reuses those scores), and cannot pass that score on to
other weights. SQLite only: the subject is the accounting, not the dialect.
"""

from __future__ import annotations

import math
import pickle

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.core.metrics import task_error
from services.store.db.models import TaskResult, Trial
from services.store.runs import records, run_keys
from services.store.runs.summary import load_summary
from workers.stream.task_data import load_task_data
from workers.trainer.consistency import MIN_SAMPLE, SAMPLE
from workers.trainer.run_plan import RunRequest

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

TRIALS, STEPS = 2, 5


def test_cflop_and_the_papers_count_agree_with_a_hand_count(runner, tiny_stream):
    from nevis_test_learners import HandCountedLinear

    from tests.integration.conftest import tiny_manifest

    stream = str(tiny_manifest(tiny_stream.parent / "one.json", tasks=1))
    budget = RunBudget(trials=TRIALS, steps=STEPS, checkpoint_fractions=(1.0,), max_concurrent=1)
    run = runner.start(RunRequest(stream=stream, learner="nevis_test_learners:hand_counted_linear", budget=budget))

    plan = runner.plan(run)
    data = load_task_data(runner.store, plan.tasks[0], image_size=plan.image_size, splits=("dev", "test"))
    dev, test = data.splits["dev"][0], data.splits["test"][0]
    pixels, classes = math.prod(dev.shape[1:]), plan.tasks[0].num_classes
    per_example = 2 * pixels * classes  # one forward of one example; its weight gradient costs the same
    updates = STEPS * 2 * HandCountedLinear.batch * per_example
    validation = len(dev) * per_example  # the learner's validation, which is the harness's dev scoring
    checked = min(SAMPLE, len(test)) if len(test) >= MIN_SAMPLE else 0  # the consistency check's copies
    prediction = (len(test) + checked) * per_example

    with runner.sessions() as session:
        trials = session.scalars(select(Trial)).all()
        result = session.scalars(select(TaskResult).where(TaskResult.submission_id == run)).one()
        summary = load_summary(session, submission_id=run)
    assert len(trials) == TRIALS and all(t.flops_source == "measured" for t in trials), [
        (t.flops_source, t.cpu_seconds) for t in trials
    ]  # a floored trial would not be the learner's count
    assert [t.flops_paper for t in trials] == [updates] * TRIALS
    assert [t.flops for t in trials] == [updates + validation] * TRIALS
    assert result.flops_paper == TRIALS * updates
    assert result.flops_prediction == prediction
    assert result.flops == TRIALS * (updates + validation) + prediction

    row = summary.tasks[0]
    assert (row.flops_paper, row.flops_validation, row.flops_prediction) == (
        TRIALS * updates,
        TRIALS * validation,
        prediction,
    )
    assert summary.cflop_paper == TRIALS * updates < summary.cflop == result.flops
    shown = summary.to_dict()  # what `nevis results --json` prints
    assert shown["cflop_paper"] == TRIALS * updates and shown["tasks"][0]["flops_validation"] == TRIALS * validation
    best = next(t for t in trials if t.id == result.best_trial_id)
    assert _committed_state(runner, run)["dev_error_seen"] == best.dev_error  # the learner saw the harness's


def test_a_dev_score_cannot_be_passed_on_to_other_weights(runner, tiny_stream):
    """The swapper has its weights scored through ctx.dev_error, then negates them in place:
    the harness scores the weights it got (a second, charged pass), not the ones it scored."""
    from nevis_test_learners import HandCountedLinear, _flat

    from tests.integration.conftest import tiny_manifest

    stream = str(tiny_manifest(tiny_stream.parent / "one.json", tasks=1))
    budget = RunBudget(trials=1, steps=STEPS, checkpoint_fractions=(1.0,), max_concurrent=1)
    run = runner.start(RunRequest(stream=stream, learner="nevis_hostile_learners:dev_score_swapper", budget=budget))

    plan = runner.plan(run)
    dev = load_task_data(runner.store, plan.tasks[0], image_size=plan.image_size, splits=("dev",)).splits["dev"]
    per_example = 2 * math.prod(dev[0].shape[1:]) * plan.tasks[0].num_classes
    with runner.sessions() as session:
        trial = session.scalars(select(Trial)).one()
        returned = pickle.loads(
            runner.store.get_bytes(run_keys.committed_predictor_keys(session, submission_id=run)[plan.tasks[0].order])
        )
    harness_error = task_error(_flat(dev[0]) @ returned.T, dev[1], plan.tasks[0].kind)
    assert trial.dev_error == pytest.approx(harness_error)  # the returned weights' error, scored anew
    scored_error = task_error(_flat(dev[0]) @ -returned.T, dev[1], plan.tasks[0].kind)  # before the swap
    assert _committed_state(runner, run)["dev_error_seen"] == pytest.approx(scored_error)
    # The two errors may tie on a tiny task; the second, charged dev pass below shows the
    # harness scored the returned weights instead of reusing the score of the others.
    assert trial.flops == STEPS * 2 * HandCountedLinear.batch * per_example + 2 * len(dev[0]) * per_example


def _committed_state(runner, run: int) -> dict:
    with runner.sessions() as session:
        return pickle.loads(runner.store.get_bytes(records.last_state_key(session, submission_id=run)))
