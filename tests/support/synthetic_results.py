"""Synthetic committed results, for load tests, benchmarks and read-model tests only.

Test support, outside the product's packages: the service never calls this. It writes, with bulk inserts and every constraint honoured, a
stream version of ``tasks`` tasks and ``submissions`` finished submissions of a few learner
families, each task with one attempt, one trial and one result, so the read models (the
leaderboard, a submission's page) can be measured on a database the size of a busy
service's (1,000 submissions × 106 tasks) in seconds rather than days of training.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from services.store.db.models import Learner, StreamTask, StreamVersion, Submission, TaskResult, TaskRun, Trial
from services.store.db.types import utcnow
from services.store.runs.scores import rescore

FAMILIES = (("indep", "indep", 0.45), ("ft_prev", "ft_prev", 0.40), ("contrib", "contrib.learner:make", 0.42))
"""(name, entry point, typical error) of the synthetic learner families; built-in names
(no ``module:factory``) make baselines."""


@dataclass(frozen=True)
class SyntheticStream:
    stream: str
    version: str
    submission_ids: tuple[int, ...]


def seed_results(
    session: Session,
    *,
    submissions: int,
    tasks: int,
    seed: int = 0,
    stream: str = "synthetic",
    version: str = "v1",
    meta_test_from: int | None = None,
    batch: int = 5000,
) -> SyntheticStream:
    """Write the synthetic stream and its submissions; the caller commits."""
    rng = random.Random(seed)
    meta_test_from = meta_test_from or max(1, tasks - max(1, tasks // 5) + 1)
    manifest = {"name": stream, "version": version, "synthetic": True, "tasks": tasks}
    text = json.dumps(manifest, sort_keys=True)
    version_id = session.scalar(
        insert(StreamVersion)
        .returning(StreamVersion.id)
        .values(
            name=stream, version=version, manifest=manifest, manifest_sha256=hashlib.sha256(text.encode()).hexdigest()
        )
    )
    domains = ("objects", "scenes", "medical", "text", "faces", "shapes")
    session.execute(
        insert(StreamTask),
        [
            {
                "stream_version_id": version_id,
                "order": order,
                "year": 1990 + order // 4,
                "dataset": f"dataset_{order}",
                "phase": "meta_test" if order >= meta_test_from else "meta_train",
                "kind": "multi" if order % 17 == 0 else "single",
                "num_classes": 2 + order % 50,
                "domain": domains[order % len(domains)],
                "split_rule": {"kind": "random"},
            }
            for order in range(1, tasks + 1)
        ],
    )
    task_rows = session.execute(
        select(StreamTask.id, StreamTask.order, StreamTask.kind)
        .where(StreamTask.stream_version_id == version_id)
        .order_by(StreamTask.order)
    ).all()
    learner_ids = {}
    for name, entrypoint, _ in FAMILIES:
        learner_name = f"{name}-{stream}-{version}"
        learner_ids[name] = session.scalar(select(Learner.id).where(Learner.name == learner_name)) or session.scalar(
            insert(Learner).returning(Learner.id).values(name=learner_name, entrypoint=entrypoint, resources={})
        )
    start = utcnow() - timedelta(days=30)
    ids: list[int] = []
    for index in range(submissions):
        family, _, base_error = FAMILIES[index % len(FAMILIES)]
        created = start + timedelta(minutes=index)
        ids.append(
            session.scalar(
                insert(Submission)
                .returning(Submission.id)
                .values(
                    learner_id=learner_ids[family],
                    stream_version_id=version_id,
                    phase="meta_test",
                    status="succeeded",
                    budget={"trials": 1, "steps": 1, "seed": index},
                    image_size=32,
                    cursor=tasks + 1,
                    created_at=created,
                    finished_at=created + timedelta(hours=5),
                )
            )
        )
    runs, scores = [], []
    for index, submission_id in enumerate(ids):
        family, _, base_error = FAMILIES[index % len(FAMILIES)]
        skill = rng.gauss(0.0, 0.03)
        flops_scale = rng.lognormvariate(0.0, 0.8)
        for task_id, order, kind in task_rows:
            error = min(1.0, max(0.0, base_error + skill + rng.gauss(0.0, 0.08)))
            flops = 1e12 * flops_scale * (1.0 + (order % 7))
            runs.append(
                {
                    "submission_id": submission_id,
                    "stream_task_id": task_id,
                    "attempt": 1,
                    "status": "succeeded",
                    "flops": flops,
                    "wall_time_s": 60.0 + order,
                }
            )
            scores.append((error, "map" if kind == "multi" else "accuracy", order))
    for i in range(0, len(runs), batch):
        chunk = runs[i : i + batch]
        run_ids = session.scalars(insert(TaskRun).returning(TaskRun.id, sort_by_parameter_order=True), chunk).all()
        trial_ids = session.scalars(
            insert(Trial).returning(Trial.id, sort_by_parameter_order=True),
            [
                {
                    "task_run_id": run_id,
                    "trial_index": 0,
                    "seed": order,
                    "config": {},
                    "status": "succeeded",
                    "flops": run["flops"],
                    "flops_source": "measured",
                    "dev_error": error,
                }
                for run_id, run, (error, _, order) in zip(run_ids, chunk, scores[i : i + batch], strict=True)
            ],
        ).all()
        session.execute(
            insert(TaskResult),
            [
                {
                    "submission_id": run["submission_id"],
                    "stream_task_id": run["stream_task_id"],
                    "task_run_id": run_id,
                    "best_trial_id": trial_id,
                    "error": error,
                    "split": "test",
                    "metric": metric,
                    "flops": run["flops"],
                }
                for run_id, trial_id, run, (error, metric, _) in zip(
                    run_ids, trial_ids, chunk, scores[i : i + batch], strict=True
                )
            ],
        )
    rescore(session, submission_ids=ids)  # the leaderboard's summary rows, as commits keep them
    return SyntheticStream(stream, version, tuple(ids))


__all__ = ["FAMILIES", "SyntheticStream", "seed_results"]
