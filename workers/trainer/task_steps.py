"""Two steps of one task of a run: what every trial gets (the task's data, the learner's state,
the past, the harness told of the task), and the chosen predictor's evaluation.

Apart from :class:`~workers.trainer.stream_runner.StreamRunner`, which orders the steps and
commits what they give; they take the runner as :class:`~workers.trainer.run_parts.RunParts`.
"""

from __future__ import annotations

import numpy as np
import ray

from services.core.metrics import task_error
from services.core.predictions import encode as encode_predictions
from services.store import key_layout
from services.store.runs import records, run_keys
from services.store.runs.outcomes import TrialOutcome
from workers.sandbox.client import HostSpec
from workers.sandbox.declaration import LearnerDeclaration
from workers.stream.task_data import TaskData
from workers.stream.task_info import task_info
from workers.trainer import searchers
from workers.trainer.consistency import Consistency, judge, plan_check
from workers.trainer.host_usage import EvaluationCost
from workers.trainer.run_parts import RunParts
from workers.trainer.run_plan import Attempt
from workers.trainer.trial import TrialSpec


def trial_spec(
    runner: RunParts, attempt: Attempt, host: HostSpec, learner: LearnerDeclaration, data: TaskData
) -> TrialSpec:
    """What every trial of the attempt gets: the task's data, the learner's state, the past."""
    plan, task, size = attempt.plan, attempt.task, attempt.plan.image_size
    with runner.sessions() as session:
        state_key = records.last_state_key(session, submission_id=plan.submission_id)
        predictors = run_keys.committed_predictor_keys(session, submission_id=plan.submission_id)
    state = (
        runner.store.get_bytes(state_key, max_bytes=runner.settings.host_state_mb << 20)  # sized before read
        if state_key
        else learner.init_state
    )
    past = {t.order: t for t in plan.tasks if t.order < task.order}
    harness = runner.actors.harness(size)
    stopping = searchers.stopping_rule(plan.budget.scheduler, plan.budget.steps)
    streamed = "train" not in data.splits  # too large to send whole: the host asks for its shards
    ray.get(
        harness.begin_task.remote(
            past=past,
            current_order=task.order,
            key_prefix=attempt.key_prefix,
            past_predictors={o: k for o, k in predictors.items() if o in past},
            pretrained_key=plan.pretrained_key,
            stopping=stopping,
            streamed=data.index if streamed else None,
            flop_cap=plan.rules.task_flop_cap,
        )
    )
    return TrialSpec(
        host=host,
        info=task_info(task, data.index, size),
        past=tuple(task_info(t, runner.data.index(t, size), size) for t in past.values()),
        stream_length=len(plan.manifest.tasks),
        steps=plan.budget.steps,
        checkpoint_fractions=plan.budget.checkpoint_fractions,
        state=state,
        train=None if streamed else data.labelled("train"),
        dev=data.labelled("dev"),
        key_prefix=attempt.key_prefix,
        harness=harness,
        rungs=stopping.rungs,
        rung_proxy=stopping.proxy,
        train_shards=tuple(s.num_examples for s in data.index.shards["train"]) if streamed else (),
        rules=plan.rules,
    )


def evaluate(
    runner: RunParts,
    attempt: Attempt,
    host: HostSpec,
    learner: LearnerDeclaration,
    data: TaskData,
    best: TrialOutcome,
    images: np.ndarray,
    labels: np.ndarray,
) -> tuple[float, EvaluationCost, bytes, Consistency]:
    """The chosen predictor's error on the evaluation split, its cost, predictions and, in
    meta-test, the consistency check (:mod:`.consistency`); ``predict`` sees images only."""
    plan = attempt.plan
    check = plan_check(images, enabled=plan.phase == "meta_test")
    scores, flops = runner.actors.score(
        host,
        learner.resources,
        plan.budget,
        task_info(attempt.task, data.index, plan.image_size),
        check.images,
        seed=best.seed,
        predictor=runner.store.get_bytes(best.predictor.key),
        log_to=(runner.actors.harness(plan.image_size), key_layout.predict_log_key(attempt.key_prefix)),
    )
    consistency, scores, kind = judge(check, scores, labels), check.originals(scores), attempt.task.kind
    return (
        task_error(scores, labels, kind),
        EvaluationCost.of(flops),
        encode_predictions(scores, labels, kind),
        consistency,
    )


__all__ = ["evaluate", "trial_spec"]
