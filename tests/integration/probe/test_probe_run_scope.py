"""``nevis probe run`` drains the jobs it queued and no other job of the shared queue: not
another run's, not its own run's under other settings (the pool's watch), and it does not wait
forever for another task's jobs that its summary needs."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.store.db import transaction
from services.store.db.models import Submission
from services.store.db.models_probe import ProbeJob
from services.store.probes import queue, queue_plans
from services.store.probes.queue_plans import JobSpec
from services.store.probes.settings import ProbeSettings
from workers.probe.runtime.planner import enqueue_submission, queue_submission, summary_key

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def _jobs(sessions, **where) -> list[ProbeJob]:
    with sessions() as session:
        query = select(ProbeJob).filter_by(**where).order_by(ProbeJob.id)
        return list(session.scalars(query))


def test_a_worker_given_job_ids_claims_only_those(sessions, seeded) -> None:
    jobs = _jobs(sessions, submission_id=seeded.submission_id)
    mine = tuple(j.id for j in jobs if j.kind == "checkpoint")[:2]
    with transaction(sessions) as session:
        assert queue.claim(session, owner="w", job_ids=()) is None
        assert not queue.has_work(session, job_ids=())
        taken = [queue.claim(session, owner="w", job_ids=mine) for _ in range(3)]
        assert sorted(j.id for j in taken[:2]) == list(mine) and taken[2] is None
        assert queue.has_work(session, job_ids=mine)  # running: its worker still waits for them
        for job in taken[:2]:
            queue.complete(session, job)
        assert not queue.has_work(session, job_ids=mine)
        assert queue.has_work(session, submission_id=seeded.submission_id)  # the others are still there
        # The summary waits for jobs outside this selection: nothing to wait for here.
        summary = next(j.id for j in jobs if j.kind == "summary")
        assert not queue.has_work(session, job_ids=(summary,))
        assert queue_plans.status_counts(session, submission_id=seeded.submission_id, job_ids=mine) == {"done": 2}


def test_queue_submission_names_every_job_of_its_plan(sessions, seeded) -> None:
    everything = {j.id for j in _jobs(sessions, submission_id=seeded.submission_id)}
    with transaction(sessions) as session:  # planned before: nothing new, the same jobs
        queued = queue_submission(session, submission_id=seeded.submission_id, settings=seeded.settings)
    assert queued.added == 0 and set(queued.job_ids) == everything


def _probe_run(*args: str) -> str:
    """``nevis probe run`` in a thread, so a worker that never stops fails the test instead of
    hanging it."""
    result: list = []
    thread = threading.Thread(
        target=lambda: result.append(CliRunner().invoke(app, ["probe", "run", *args])), daemon=True
    )
    thread.start()
    thread.join(timeout=180)
    assert result, "nevis probe run did not finish: it waits for jobs it did not queue"
    assert result[0].exit_code == 0, result[0].output
    return result[0].output


@pytest.fixture
def cli_database(settings_env, database_url, monkeypatch) -> str:
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    monkeypatch.setenv("COLUMNS", "200")
    get_settings.cache_clear()
    return database_url


@SQLITE_ONLY
def test_probe_run_leaves_other_runs_and_other_settings_queued(cli_database, sessions, seed) -> None:
    mine, _, _ = seed(tasks=1, trials=1, checkpoints=1)
    watch = ProbeSettings.preset("standard")  # the pool's watch, on the same run
    with transaction(sessions) as session:
        row = session.get(Submission, mine)
        other = Submission(
            learner_id=row.learner_id,
            stream_version_id=row.stream_version_id,
            phase="meta_test",
            status="succeeded",
            budget={},
            image_size=8,
        )
        session.add(other)
        session.flush()
        ci_hash = queue_plans.ensure_settings(session, ProbeSettings.ci())
        queue_plans.enqueue(session, [JobSpec(summary_key(other.id, ci_hash), "summary", other.id, 0, ci_hash)])
        assert enqueue_submission(session, submission_id=mine, settings=watch) == 3
        other_id = other.id
    _probe_run("--submission", str(mine), "--preset", "ci")
    foreign = _jobs(sessions, submission_id=other_id) + _jobs(sessions, settings_hash=watch.settings_hash)
    assert len(foreign) == 4
    assert all((j.status, j.attempts) == ("queued", 0) for j in foreign)
    drained = _jobs(sessions, submission_id=mine, settings_hash=ci_hash)
    assert len(drained) == 3 and all(j.status in ("done", "failed") for j in drained)


@SQLITE_ONLY
def test_probe_run_of_one_task_does_not_wait_for_other_tasks_jobs(cli_database, sessions, seed) -> None:
    mine, _, _ = seed(tasks=2, trials=1, checkpoints=1)
    settings = ProbeSettings.ci()
    with transaction(sessions) as session:  # task 2's jobs, queued by someone else
        assert enqueue_submission(session, submission_id=mine, settings=settings, task_order=2) == 3
    output = _probe_run("--submission", str(mine), "--task", "1", "--preset", "ci")
    assert "1 of its job(s) still wait for jobs this command did not queue" in output
    assert "probe jobs finished: 2 of 3, 1 failed (2 workers)" in output  # the default: a worker per core
    jobs = {(j.kind, j.task_order): j for j in _jobs(sessions, submission_id=mine)}
    assert all(jobs[kind, 1].status in ("done", "failed") for kind in ("checkpoint", "trial"))
    # Task 2's jobs were not taken, so the summary that needs them still waits for them.
    assert all(
        (jobs[key].status, jobs[key].attempts) == ("queued", 0)
        for key in (("checkpoint", 2), ("trial", 2), ("summary", 0))
    )
