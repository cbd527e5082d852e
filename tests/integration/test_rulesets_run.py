"""Rulesets enforced by the harness in a real run (issue 50): ``budget-<X>`` stops a learner
that ignores its budget at the cap and commits the best trial within it; ``self-tuning`` runs
one trial with the learner's defaults whatever search space it declares."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.store.db.models import Event, Submission, TaskResult, Trial
from services.store.runs.summary import load_summary
from workers.trainer.run_plan import RunRequest

# What is tested is the harness (trials, the task harness actor), not the database dialect.
pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

CAP = 25 * 10**9  # two and a half trials of ten 1e9-FLOP steps (the learner checks its view shows it)


def one_task_stream(tiny_stream):
    from tests.integration.conftest import tiny_manifest

    return str(tiny_manifest(tiny_stream.parent / "one.json", tasks=1))


def test_a_learner_that_ignores_its_budget_is_stopped_at_the_cap(runner, tiny_stream):
    from nevis_ruleset_learners import STEP_FLOPS

    budget = RunBudget(trials=4, steps=10, max_concurrent=1, checkpoint_fractions=(1.0,))
    submission_id = runner.start(
        RunRequest(
            stream=one_task_stream(tiny_stream),
            budget=budget,
            learner="nevis_ruleset_learners:budget_ignorer",
            ruleset=f"budget-{CAP:.1e}",
        )
    )
    with runner.sessions() as session:
        submission = session.get(Submission, submission_id)
        trials = session.scalars(select(Trial).order_by(Trial.trial_index)).all()
        result = session.scalars(select(TaskResult)).one()
        best = session.get(Trial, result.best_trial_id)
        assert submission.status == "succeeded" and submission.ruleset == "budget-2.5e+10"
        assert [t.status for t in trials] == ["succeeded", "succeeded", "stopped", "stopped"]
        assert "cap of 2.5e+10 cFLOP is reached" in trials[2].error_text
        assert trials[3].error_text.startswith("not started") and trials[3].flops == 0
        spent = sum(t.flops for t in trials)
        assert CAP <= spent <= CAP + STEP_FLOPS
        assert result.flops - (result.flops_prediction or 0) <= CAP + STEP_FLOPS
        assert best.status == "succeeded" and best.trial_index in (0, 1)
        assert load_summary(session, submission_id=submission_id).tasks[0].capped_trials == 2  # the row is marked


def test_the_cap_counts_the_tasks_preparation_before_any_trial(runner, tiny_stream):
    """FT-d's prepare_task is charged to the task once; under ``budget-X`` the trials get what
    it left (issue 50: a task's charge, preparation included, stays within the cap + one step)."""
    from nevis_ruleset_learners import PREPARATION_FLOPS, STEP_FLOPS

    budget = RunBudget(trials=4, steps=10, max_concurrent=1, checkpoint_fractions=(1.0,))
    submission_id = runner.start(
        RunRequest(
            stream=one_task_stream(tiny_stream),
            budget=budget,
            learner="nevis_ruleset_learners:preparing_ignorer",
            ruleset=f"budget-{CAP:.1e}",
        )
    )
    with runner.sessions() as session:
        assert session.get(Submission, submission_id).status == "succeeded"
        trials = session.scalars(select(Trial).order_by(Trial.trial_index)).all()
        result = session.scalars(select(TaskResult)).one()
        # 1e10 of preparation leaves 1.5e10: one whole trial, the second stopped at the cap
        assert [t.status for t in trials] == ["succeeded", "stopped", "stopped", "stopped"]
        spent = sum(t.flops for t in trials)
        assert CAP <= PREPARATION_FLOPS + spent <= CAP + STEP_FLOPS
        assert result.flops - (result.flops_prediction or 0) <= CAP + STEP_FLOPS


def test_self_tuning_runs_one_trial_with_the_learners_defaults(runner, tiny_stream):
    submission_id = runner.start(
        RunRequest(
            stream=one_task_stream(tiny_stream),
            learner="nevis_ruleset_learners:config_recorder",
            budget=RunBudget(steps=2, checkpoint_fractions=(1.0,)),
            ruleset="self-tuning",
        )
    )
    with runner.sessions() as session:
        trials = session.scalars(select(Trial)).all()
        created = session.scalars(select(Event).where(Event.kind == "submission.created")).one()
        assert session.get(Submission, submission_id).budget["trials"] == 1
        assert len(trials) == 1 and trials[0].status == "succeeded"
        assert "shrink" not in trials[0].config  # no search space: the learner's own defaults
        assert created.payload["ruleset_note"].startswith("search collapsed from 4 trials to 1")
