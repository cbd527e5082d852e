"""Integration fixtures: a real local Ray (2 CPUs) and a tiny stream manifest.

The test learners in ``learner_fixtures/`` are put on ``PYTHONPATH`` before Ray starts, so
its worker processes can import them as ``nevis_test_learners:factory``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURE_LEARNERS = Path(__file__).parent / "learner_fixtures"


@pytest.fixture(scope="session")
def learner_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder on the workers' import path where a test may write a learner module."""
    return tmp_path_factory.mktemp("learners")


@pytest.fixture(scope="session")
def ray_local(learner_dir: Path) -> Iterator[None]:
    """One local Ray instance for the session, started the way the runner starts it."""
    import ray

    from workers.trainer.ray_env import start_local_ray

    paths = (str(FIXTURE_LEARNERS), str(learner_dir), os.environ.get("PYTHONPATH", ""))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    sys.path[:0] = [str(FIXTURE_LEARNERS), str(learner_dir)]
    start_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def close_runners(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Stop the warm actors of every runner a test made when it ends: the session's one Ray
    instance would otherwise keep each run's executors and learner hosts (about 0.6 GB each)
    alive until their handles are collected, and a suite of runs runs out of memory."""
    from workers.trainer.stream_runner import StreamRunner

    made: list[StreamRunner] = []
    original = StreamRunner.__init__

    def init(self: StreamRunner, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(StreamRunner, "__init__", init)
    yield
    for runner in made:
        runner.close()


@pytest.fixture
def runner(settings_env: Path, database_url: str, monkeypatch: pytest.MonkeyPatch):
    """A StreamRunner on the test's own data folder and database (closed by close_runners)."""
    from services.core.config import get_settings
    from workers.trainer.stream_runner import StreamRunner

    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    return StreamRunner(get_settings())


def tiny_manifest(path: Path, *, tasks: int = 3, image_size: int = 16) -> Path:
    """A stream of procedurally generated shapes tasks (2 meta-train, 1+ meta-test)."""
    rule = {"kind": "random", "fractions": {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2}, "seed": 0}
    catalogue = [
        (2004, "shapes:shape", "single", 4),
        (2012, "shapes:hue", "single", 6),
        (2020, "shapes:multi", "multi", 4),
        (2021, "shapes:scale", "single", 4),
    ]
    doc = {
        "format": 1,
        "name": "tiny",
        "version": "test-1",
        "description": "test stream",
        "source": "tests",
        "meta_test_from_year": 2019,
        "image_size": image_size,
        "tasks": [
            {
                "order": i + 1,
                "year": year,
                "dataset": key,
                "title": key,
                "domain": "shape",
                "kind": kind,
                "num_classes": k,
                "split": rule,
            }
            for i, (year, key, kind, k) in enumerate(catalogue[:tasks])
        ],
    }
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def tiny_stream(tmp_path: Path) -> Path:
    return tiny_manifest(tmp_path / "tiny.json")


@pytest.fixture
def measured_run():
    """``measured_run(session, cpu={order: (cpu_seconds, floored)}, stream=, version=, learner=)``
    → the id of a finished meta-test run written as the runner writes one (``records``), each
    task with the harness-measured CPU seconds and floor ``cpu`` gives it (absent: not
    measured). With ``submission_id=`` it commits that submission's remaining tasks instead."""
    from sqlalchemy import select

    from services.core.budget import RunBudget
    from services.store.db.models import StreamVersion, Submission
    from services.store.runs import records
    from services.store.runs.outcomes import TaskOutcome, TrialOutcome

    def commit(session, submission: Submission, cpu: dict[int, tuple[float | None, bool]], error: float) -> None:
        tasks = [
            t
            for t in sorted(submission.stream_version.tasks, key=lambda t: t.order)
            if t.order >= submission.cursor and (submission.phase == "meta_test" or t.phase == "meta_train")
        ]
        for position, task in enumerate(tasks):
            seconds, floored = cpu.get(task.order, (None, False))
            counted = 1_000_000 * task.order
            run = records.start_task_run(session, submission=submission, task=task)
            trial = records.record_trial(
                session,
                task_run_id=run.id,
                outcome=TrialOutcome(
                    trial_index=0,
                    seed=0,
                    status="ok",
                    flops_measured=counted,
                    dev_error=error,
                    cpu_seconds=seconds,
                    flops_floor=counted * 10 if floored else 0,
                ),
            )
            records.commit_task(
                session,
                submission=submission,
                run=run,
                best_trial=trial,
                outcome=TaskOutcome(
                    order=task.order,
                    best_trial_index=0,
                    error=error,
                    split="test",
                    metric="accuracy",
                    flops=float(trial.flops),
                    wall_time_s=1.0,
                    peak_memory_bytes=0,
                    state_key=f"state-{task.order}",
                    cpu_seconds=seconds,
                    flops_floored=floored,
                ),
                next_order=tasks[position + 1].order if position + 1 < len(tasks) else None,
            )

    def record(
        session,
        *,
        cpu: dict[int, tuple[float | None, bool]],
        submission_id: int | None = None,
        stream: str | None = None,
        version: str | None = None,
        learner: str = "measured",
        error: float = 0.3,
    ) -> int:
        if submission_id is None:
            found = session.scalars(
                select(StreamVersion).where(StreamVersion.name == stream, StreamVersion.version == version)
            ).one()
            submission = records.create_submission(
                session,
                learner=records.ensure_learner(session, spec=learner, resources={}),
                stream_version=found,
                phase="meta_test",
                budget=RunBudget(),
                image_size=32,
                first_order=min(t.order for t in found.tasks),
            )
        else:
            submission = session.get(Submission, submission_id)
        commit(session, submission, cpu, error)
        session.flush()
        return submission.id

    return record
