"""The probe-job queue on SQLite and PostgreSQL: one taker per job, leases, retries, order,
idempotent results, and a worker killed mid-job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import func, select

from services.store.db import make_engine, session_factory, transaction
from services.store.db.models_probe import ProbeCheckpointResult, ProbeFitRow, ProbeJob
from services.store.db.types import utcnow
from services.store.probes import queue
from workers.probe.fits.fit_common import FoldScores
from workers.probe.runtime.checkpoint_jobs import write_checkpoint_measures
from workers.probe.runtime.measure import CheckpointMeasures, TargetFit
from workers.probe.runtime.planner import enqueue_submission


def _claim(sessions, owner, **kwargs):
    with transaction(sessions) as session:
        return queue.claim(session, owner=owner, **kwargs)


def _status(sessions, job_id):
    with sessions() as session:
        return session.get(ProbeJob, job_id)


def test_planning_queues_one_job_per_checkpoint_trial_and_submission(sessions, seeded) -> None:
    with sessions() as session:
        kinds = session.execute(select(ProbeJob.kind, func.count()).group_by(ProbeJob.kind)).all()
    assert dict(kinds) == {"checkpoint": 6, "trial": 2, "summary": 1}
    with transaction(sessions) as session:  # planning again adds nothing
        assert enqueue_submission(session, submission_id=seeded.submission_id, settings=seeded.settings) == 0


def test_concurrent_workers_never_take_the_same_job(database_url, seeded) -> None:
    claimed: list[tuple[str, int]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def work(name: str) -> None:
        engine = make_engine(database_url)
        sessions = session_factory(engine)
        try:
            barrier.wait()
            while (job := _claim(sessions, name)) is not None:
                claimed.append((name, job.id))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    ids = [job_id for _, job_id in claimed]
    assert len(ids) == len(set(ids)) == 6  # every checkpoint job once; trial jobs still wait


def test_trial_and_summary_jobs_wait_for_their_inputs(sessions, seeded) -> None:
    def drain() -> list:
        jobs = []
        while (job := _claim(sessions, "w")) is not None:
            jobs.append(job)
        return jobs

    def finish(jobs) -> None:
        with transaction(sessions) as session:
            for job in jobs:
                queue.complete(session, job)

    checkpoints = drain()
    assert [j.kind for j in checkpoints] == ["checkpoint"] * 6  # trials wait while these run
    finish(checkpoints[:3])  # trial 1's checkpoints
    trials = drain()
    assert [(j.kind, j.trial_id) for j in trials] == [("trial", seeded.trial_ids[0])]
    finish(checkpoints[3:] + trials)
    trials = drain()
    assert [(j.kind, j.trial_id) for j in trials] == [("trial", seeded.trial_ids[1])]
    finish(trials)
    assert [j.kind for j in drain()] == ["summary"]


def test_an_expired_lease_is_taken_over_and_fences_the_first_worker(sessions, seeded) -> None:
    t0 = utcnow()
    first = _claim(sessions, "a", lease_s=10, now=t0)
    other = _claim(sessions, "b", lease_s=10, now=t0 + timedelta(seconds=5))
    assert other.id != first.id
    # b releases its job; at t0 + 11 a's lease has expired and b takes a's job again.
    with transaction(sessions) as session:
        queue.complete(session, other)
    retaken = _claim(sessions, "b", lease_s=10, now=t0 + timedelta(seconds=11))
    assert (retaken.id, retaken.attempt) == (first.id, 2)
    with transaction(sessions) as session:
        assert not queue.heartbeat(session, first)  # a learns it lost the lease
    with pytest.raises(queue.LeaseLostError, match="lost its lease"):
        with transaction(sessions) as session:
            queue.complete(session, first)
    with transaction(sessions) as session:
        queue.complete(session, retaken)
    row = _status(sessions, first.id)
    assert (row.status, row.attempts, row.lease_owner) == ("done", 2, None)


def test_a_heartbeat_keeps_the_job_from_being_taken(sessions, seeded) -> None:
    t0 = utcnow()
    job = _claim(sessions, "a", lease_s=10, now=t0)
    with transaction(sessions) as session:
        assert queue.heartbeat(session, job, lease_s=10, now=t0 + timedelta(seconds=8))
    later = _claim(sessions, "b", lease_s=10, now=t0 + timedelta(seconds=12))
    assert later.id != job.id


def test_retries_are_bounded(sessions, seeded) -> None:
    t0 = utcnow()
    job = _claim(sessions, "a", now=t0)
    with transaction(sessions) as session:
        assert queue.fail(session, job, reason="flaky disk", retry=True) == "queued"
    again = _claim(sessions, "a", now=t0)
    assert (again.id, again.attempt) == (job.id, 2)
    with transaction(sessions) as session:
        assert queue.fail(session, again, reason="bad checkpoint", retry=False) == "failed"
    row = _status(sessions, job.id)
    assert (row.status, row.error) == ("failed", "bad checkpoint")
    # A job whose worker dies on every attempt ends failed, not claimable forever.
    victim = _claim(sessions, "c", lease_s=1, now=t0)
    for attempt in range(2, 4):
        victim = _claim(sessions, "c", lease_s=1, now=t0 + timedelta(seconds=2 * attempt))
        assert victim.attempt == attempt
    with transaction(sessions) as session:
        queue.reap_expired(session, now=t0 + timedelta(seconds=60))
    row = _status(sessions, victim.id)
    assert row.status == "failed" and "lease expired on every attempt" in row.error


def test_failed_jobs_can_be_queued_again_with_their_trial(sessions, seeded) -> None:
    first = [_claim(sessions, "a") for _ in range(3)]  # trial 1's three checkpoints
    with transaction(sessions) as session:
        queue.fail(session, first[0], reason="gone", retry=False)
        for job in first[1:]:
            queue.complete(session, job)
    trial = _claim(sessions, "a", submission_id=seeded.submission_id)
    assert trial.kind == "trial"  # computed from the two checkpoints left
    with transaction(sessions) as session:
        queue.complete(session, trial)
        enqueue_submission(session, submission_id=seeded.submission_id, settings=seeded.settings, retry_failed=True)
    row = _status(sessions, first[0].id)
    assert (row.status, row.attempts, row.error) == ("queued", 0, None)
    assert _status(sessions, trial.id).status == "queued"  # recomputed once the checkpoint is back


def _measures(error: float) -> CheckpointMeasures:
    scores = FoldScores(losses=np.array([1.0, 2.0]), errors=np.array([error, error]))
    return CheckpointMeasures(
        lidar=2.0,
        rankme=3.0,
        pretext_error=0.5,
        feature_dim=4,
        lidar_n=2,
        lidar_q=2,
        rankme_n=8,
        fits=(TargetFit(1, "linear", scores, 8, 2),),
        details={"x": float("inf")},
    )


def test_results_are_written_once_however_often_a_job_runs(sessions, seeded) -> None:
    ckpt = seeded.checkpoint_ids[0]
    for error in (0.25, 0.5):  # a job that ran twice: the second write replaces the first
        with transaction(sessions) as session:
            write_checkpoint_measures(
                session,
                checkpoint_id=ckpt,
                trial_id=seeded.trial_ids[0],
                step=0,
                settings_hash=seeded.settings.settings_hash,
                measures=_measures(error),
            )
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(ProbeCheckpointResult)) == 1
        fits = session.scalars(select(ProbeFitRow)).all()
        assert len(fits) == 1 and fits[0].error == 0.5 and fits[0].fold_losses == [1.0, 2.0]
        assert session.scalars(select(ProbeCheckpointResult)).one().details == {"x": "inf"}


_KILLED_WORKER = """
import sys, time
from services.store.db import sessions_on, transaction
from services.store.probes import queue
sessions = sessions_on(sys.argv[1])
with transaction(sessions) as session:
    job = queue.claim(session, owner="doomed", lease_s=1.0)
print(job.id, flush=True)
time.sleep(600)
"""


def test_a_worker_killed_mid_job_loses_nothing(database_url, sessions, seeded) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WORKER, database_url], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    try:
        job_id = int(process.stdout.readline())
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert _status(sessions, job_id).lease_owner == "doomed"
    time.sleep(1.2)  # the lease runs out; no heartbeat renews it
    taken = [_claim(sessions, "survivor") for _ in range(6)]
    again = next(j for j in taken if j.id == job_id)
    assert again.attempt == 2
    with transaction(sessions) as session:
        queue.complete(session, again)
    row = _status(sessions, job_id)
    assert (row.status, row.attempts) == ("done", 2)


def test_the_heartbeat_thread_keeps_a_long_job_leased(database_url, sessions, seeded, tmp_path) -> None:
    from workers.probe.runtime.pool import LeaseHeartbeat, ProbeWorker, WorkerConfig

    worker = ProbeWorker(WorkerConfig(database_url=database_url, store_url=(tmp_path / "store").as_uri(), lease_s=0.3))
    job = _claim(worker.sessions, worker.owner, lease_s=0.3)
    with LeaseHeartbeat(worker, job) as beat:
        time.sleep(1.0)  # three leases long: only the heartbeats keep it
        other = _claim(sessions, "thief", lease_s=0.3)
        assert other is not None and other.id != job.id
    assert not beat.lost
    row = _status(sessions, job.id)
    assert row.heartbeat_at > row.started_at and row.lease_owner == worker.owner


def test_watch_mode_queues_each_committed_task_once(sessions, seed) -> None:
    from services.store.probes.settings import ProbeSettings
    from workers.probe.runtime.planner import enqueue_committed

    seed(tasks=2, trials=1, checkpoints=2)
    settings = ProbeSettings.ci()
    with transaction(sessions) as session:
        assert enqueue_committed(session, settings=settings) == 2 * (2 + 1) + 1
    with transaction(sessions) as session:
        assert enqueue_committed(session, settings=settings) == 0
        assert enqueue_committed(session, settings=settings.with_changes(folds=4)) == 7


def test_the_standard_preset_probes_the_chosen_trial_and_one_other_and_all_on_request(sessions, seed) -> None:
    from services.store.db.models import TaskResult
    from services.store.probes.settings import ProbeSettings

    submission_id, trial_ids, _ = seed(tasks=1, trials=4, checkpoints=2)
    with transaction(sessions) as session:  # the search chose the third trial
        session.scalars(select(TaskResult)).one().best_trial_id = trial_ids[2]
    standard = ProbeSettings.standard()
    with transaction(sessions) as session:
        assert enqueue_submission(session, submission_id=submission_id, settings=standard) == 2 * (2 + 1) + 1
    with sessions() as session:
        probed = set(session.scalars(select(ProbeJob.trial_id).where(ProbeJob.kind == "checkpoint")))
    assert probed == {trial_ids[2], trial_ids[0]}  # chosen + the lowest-index other
    everything = standard.with_changes(other_trials=None)
    with transaction(sessions) as session:
        assert enqueue_submission(session, submission_id=submission_id, settings=everything) == 4 * (2 + 1) + 1


def test_the_standard_preset_probes_the_other_trial_at_its_first_and_last_checkpoints(sessions, seed) -> None:
    from services.store.db.models import Checkpoint, TaskResult
    from services.store.probes.settings import ProbeSettings

    submission_id, trial_ids, _ = seed(tasks=1, trials=3, checkpoints=6)
    with transaction(sessions) as session:  # the search chose the second trial
        session.scalars(select(TaskResult)).one().best_trial_id = trial_ids[1]
    standard = ProbeSettings.standard()
    with transaction(sessions) as session:  # 6 + 2 checkpoint jobs, 2 trial jobs, 1 summary
        assert enqueue_submission(session, submission_id=submission_id, settings=standard) == 6 + 2 + 2 + 1

    def probed(settings_hash: str) -> dict[int, list[int]]:
        with sessions() as session:
            rows = session.execute(
                select(ProbeJob.trial_id, Checkpoint.step)
                .join(Checkpoint, Checkpoint.id == ProbeJob.checkpoint_id)
                .where(ProbeJob.kind == "checkpoint", ProbeJob.settings_hash == settings_hash)
            ).all()
        out: dict[int, list[int]] = {}
        for trial_id, step in rows:
            out.setdefault(trial_id, []).append(step)
        return {t: sorted(s) for t, s in out.items()}

    # The chosen trial at every checkpoint, the lowest-index other one at its first and last.
    assert probed(standard.settings_hash) == {trial_ids[1]: [0, 1, 2, 3, 4, 5], trial_ids[0]: [0, 5]}
    three = standard.with_changes(other_checkpoints=3)
    with transaction(sessions) as session:
        enqueue_submission(session, submission_id=submission_id, settings=three)
    assert probed(three.settings_hash)[trial_ids[0]] == [0, 2, 5]
    everything = standard.with_changes(other_trials=None, other_checkpoints=None)  # --all-trials
    with transaction(sessions) as session:
        assert enqueue_submission(session, submission_id=submission_id, settings=everything) == 3 * (6 + 1) + 1
    assert probed(everything.settings_hash) == {t: [0, 1, 2, 3, 4, 5] for t in trial_ids}
