"""Fixtures of the probe integration tests: seeded queue rows, and a probe test learner.

``learners/`` is put on ``PYTHONPATH`` when this file is imported (at collection, before the
session's Ray starts), so Ray workers can import ``nevis_probe_learners:growing``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from services.store.db import make_engine, session_factory, transaction
from services.store.db.models import (
    Checkpoint,
    Learner,
    StreamTask,
    StreamVersion,
    Submission,
    TaskResult,
    TaskRun,
    Trial,
)
from services.store.probes.settings import ProbeSettings
from workers.probe.runtime.planner import enqueue_submission

LEARNERS = Path(__file__).parent / "learners"
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(LEARNERS), os.environ.get("PYTHONPATH", "")) if p)
sys.path.insert(0, str(LEARNERS))


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(database_url)
    yield session_factory(engine)
    engine.dispose()


@dataclass(frozen=True)
class Seeded:
    """A submission with committed tasks, trials and checkpoint rows (no objects behind them)."""

    submission_id: int
    trial_ids: tuple[int, ...]
    checkpoint_ids: tuple[int, ...]
    settings: ProbeSettings


def seed_rows(
    sessions: sessionmaker[Session], *, tasks: int = 1, trials: int = 2, checkpoints: int = 3
) -> tuple[int, list[int], list[int]]:
    """Insert a committed submission; returns (submission id, trial ids, checkpoint ids)."""
    sha = hashlib.sha256(b"x").hexdigest()
    trial_ids, checkpoint_ids = [], []
    with transaction(sessions) as session:
        version = StreamVersion(name="seed", version="1", manifest_sha256=sha, manifest={})
        learner = Learner(name="seed-learner", entrypoint="seed:learner")
        session.add_all([version, learner])
        session.flush()
        submission = Submission(
            learner_id=learner.id,
            stream_version_id=version.id,
            phase="meta_test",
            status="succeeded",
            budget={},
            image_size=8,
        )
        session.add(submission)
        session.flush()
        for order in range(1, tasks + 1):
            task = StreamTask(
                stream_version_id=version.id,
                order=order,
                year=2000 + order,
                dataset=f"d{order}",
                phase="meta_test",
                kind="single",
                num_classes=2,
                split_rule={},
            )
            session.add(task)
            session.flush()
            run = TaskRun(submission_id=submission.id, stream_task_id=task.id, status="succeeded")
            session.add(run)
            session.flush()
            rows = [Trial(task_run_id=run.id, trial_index=i, seed=i, status="succeeded") for i in range(trials)]
            session.add_all(rows)
            session.flush()
            for trial in rows:
                trial_ids.append(trial.id)
                for step in range(checkpoints):
                    ckpt = Checkpoint(
                        trial_id=trial.id, step=step, object_key=f"k/{trial.id}/{step}", size_bytes=1, sha256=sha
                    )
                    session.add(ckpt)
                    session.flush()
                    checkpoint_ids.append(ckpt.id)
            session.add(
                TaskResult(
                    submission_id=submission.id,
                    stream_task_id=task.id,
                    task_run_id=run.id,
                    best_trial_id=rows[0].id,
                    error=0.5,
                    split="test",
                    metric="accuracy",
                    flops=1.0,
                )
            )
        return submission.id, trial_ids, checkpoint_ids


@pytest.fixture
def seed(sessions: sessionmaker[Session]):
    """:func:`seed_rows` bound to the test's database."""
    return lambda **sizes: seed_rows(sessions, **sizes)


@pytest.fixture
def seeded(sessions: sessionmaker[Session]) -> Seeded:
    """One committed task, two trials of three checkpoints each, with their jobs queued."""
    submission_id, trial_ids, checkpoint_ids = seed_rows(sessions)
    settings = ProbeSettings.ci()
    with transaction(sessions) as session:
        enqueue_submission(session, submission_id=submission_id, settings=settings)
    return Seeded(submission_id, tuple(trial_ids), tuple(checkpoint_ids), settings)
