"""Runs stopped by their own FLOP or wall-time cap (``budget.flop_cap``, ``budget.wall_cap_s``).

The commit of the task that reaches a cap stops the run in the same transaction, so the
scheduler never launches another job for it; ``stopped`` is terminal (never relaunched,
expired nor turned failed by a late lease end), listed by ``?status=stopped``, counted by the
metrics, shown as stopped by the dashboard, and kept by benchmark refreshes. On SQLite and
PostgreSQL (the worker's steps are taken here, as in test_scheduler.py); the last test runs
real worker processes on a real Ray head (PostgreSQL), as test_local_e2e.py does.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from services.coordinator.backends.local import LocalBackend
from services.coordinator.common.validation import ResourceRequest
from services.coordinator.crud import learners, submission_create, users
from services.coordinator.refresh.start import start_refresh
from services.coordinator.scheduler import lease_running, leases
from services.coordinator.scheduler.loop import Scheduler
from services.coordinator.worker import run_task
from services.core.budget import RunBudget
from services.dashboard.server import create_server_app
from services.store.db import make_engine, session_factory, transaction
from services.store.db.models import Event, Submission, TaskRun
from services.store.db.models_coordinator import LearnerOwner, ScheduledSubmission, TaskLease, User
from services.store.db.types import utcnow
from services.store.objects import open_store
from services.store.runs import records
from services.store.runs.outcomes import TaskOutcome, TrialOutcome
from workers.stream.manifest_files import load_stream
from workers.stream.versions import ensure_stream_version

ENTRYPOINT = "nevis_test_learners:nearest_mean"
CAPPED = RunBudget(trials=1, steps=1, flop_cap=150.0)


@pytest.fixture
def sessions(coord_settings):
    engine = make_engine(coord_settings.database_url)
    yield session_factory(engine)
    engine.dispose()


@pytest.fixture
def scheduler(coord_settings, sessions):
    """A scheduler whose launches would start a worker that reports nothing (``true``)."""
    settings = coord_settings.model_copy(update={"worker_command": "true"})
    return Scheduler(settings, backend=LocalBackend(settings), sessions=sessions)


def submit(sessions, settings, *, budget: RunBudget = CAPPED, stream: str = "tiny3") -> int:
    """A queued meta-test submission of alice's nearest-mean learner (both made on first use)."""
    with transaction(sessions) as session:
        user = session.scalar(select(User).where(User.name == "alice")) or users.create_user(
            session, name="alice", role="submitter"
        )
        learner = session.scalar(select(LearnerOwner.learner_id).where(LearnerOwner.user_id == user.id))
        if learner is None:
            learner = learners.create_learner(
                session, owner=user, name="alice-nm", entrypoint=ENTRYPOINT, image=None, resources=ResourceRequest()
            ).learner.id
        request = submission_create.SubmissionRequest(
            learner_id=learner, stream=stream, phase="meta_test", budget=budget
        )
        return submission_create.create_submission(session, settings=settings, user=user, request=request)[0].id


def claim(sessions) -> TaskLease | None:
    with transaction(sessions) as session:
        return leases.claim_next(session, owner="s1", backend="local", start_timeout_s=60)


def run_task_as_a_worker(sessions, lease: TaskLease, *, flops: float, finish: bool = True) -> None:
    """What the worker harness does for ``lease``: start it, run and commit its task
    (``StreamRunner.run_next_task``, with ``flops`` spent), end it (unless it dies first)."""
    with transaction(sessions) as session:
        assert lease_running.start_lease(
            session, lease_id=lease.id, submission_id=lease.submission_id, task_deadline_s=600
        ).run
    with transaction(sessions) as session:
        submission = session.get(Submission, lease.submission_id)
        tasks = submission.stream_version.tasks
        task = next(t for t in tasks if t.order == lease.task_order)
        run = records.start_task_run(session, submission=submission, task=task)
        trial = records.record_trial(
            session,
            task_run_id=run.id,
            outcome=TrialOutcome(trial_index=0, seed=0, status="ok", flops_measured=int(flops), dev_error=0.5),
        )
        later = [t.order for t in tasks if t.order > task.order]
        records.commit_task(
            session,
            submission=submission,
            run=run,
            best_trial=trial,
            outcome=TaskOutcome(
                order=task.order,
                best_trial_index=0,
                error=0.5,
                split="test",
                metric="accuracy",
                flops=flops,
                wall_time_s=1.0,
                peak_memory_bytes=0,
                state_key="state",
            ),
            next_order=later[0] if later else None,
        )
    if finish:
        with transaction(sessions) as session:
            lease_running.finish_success(session, lease_id=lease.id)


def kinds(sessions, submission_id: int) -> list[str]:
    with sessions() as session:
        return list(session.scalars(select(Event.kind).where(Event.submission_id == submission_id).order_by(Event.id)))


# --- the scheduler -----------------------------------------------------------------------


def test_the_commit_reaching_the_cap_stops_the_run_and_nothing_is_launched_again(sessions, coord_settings, scheduler):
    sub = submit(sessions, coord_settings)
    run_task_as_a_worker(sessions, claim(sessions), flops=100.0)  # under the cap: go on
    with sessions() as session:
        assert (session.get(Submission, sub).status, session.get(Submission, sub).cursor) == ("running", 2)
    run_task_as_a_worker(sessions, claim(sessions), flops=100.0)  # 200 >= 150: stopped
    with sessions() as session:
        submission = session.get(Submission, sub)
        assert submission.status == "stopped" and submission.finished_at is not None
        assert submission.error == "FLOP cap 150 reached (200 spent)"
        assert session.get(ScheduledSubmission, sub).active_lease_id is None
    assert claim(sessions) is None
    for _ in range(3):
        assert scheduler.tick().launched == []
    with sessions() as session:
        rows = session.execute(select(TaskLease.task_order, TaskLease.status).order_by(TaskLease.id)).all()
        assert [tuple(r) for r in rows] == [(1, "succeeded"), (2, "succeeded")]
        assert len(session.scalars(select(TaskRun.id)).all()) == 2  # tasks 1 and 2; task 3 never tried
    events = kinds(sessions, sub)
    assert events.count("lease.claimed") == 2
    assert events[events.index("submission.stopped") - 1] == "task.committed"


def test_a_cap_reached_by_the_last_task_is_a_success(sessions, coord_settings):
    sub = submit(sessions, coord_settings, stream="tiny2")
    run_task_as_a_worker(sessions, claim(sessions), flops=10.0)
    run_task_as_a_worker(sessions, claim(sessions), flops=500.0)
    with sessions() as session:
        submission = session.get(Submission, sub)
        assert (submission.status, submission.error) == ("succeeded", None)
    assert "submission.stopped" not in kinds(sessions, sub)


def test_a_stopped_run_is_never_expired_nor_failed_by_its_lease_ending_late(sessions, coord_settings, scheduler):
    """The worker committed the capped task and died before ending its lease: the reaper
    expires the lease (freeing the submission's slot) and leaves the run stopped, unretried."""
    sub = submit(sessions, coord_settings)
    lease = claim(sessions)
    run_task_as_a_worker(sessions, lease, flops=1000.0, finish=False)
    with transaction(sessions) as session:
        session.execute(
            update(TaskLease)
            .where(TaskLease.id == lease.id)
            .values(heartbeat_at=utcnow() - timedelta(seconds=coord_settings.heartbeat_timeout_s + 5))
        )
    report = scheduler.tick()
    assert report.expired == [lease.id] and report.launched == []
    with sessions() as session:
        submission, schedule = session.get(Submission, sub), session.get(ScheduledSubmission, sub)
        assert submission.status == "stopped" and submission.error.startswith("FLOP cap 150 reached")
        assert schedule.active_lease_id is None and schedule.next_launch_at is None
    assert scheduler.tick().launched == [] and "submission.failed" not in kinds(sessions, sub)


def test_the_worker_does_not_run_a_lease_of_a_stopped_run(sessions, coord_settings):
    sub = submit(sessions, coord_settings)
    lease = claim(sessions)
    with transaction(sessions) as session:  # stopped after the claim (a cap lowered meanwhile)
        records.stop_submission(session, submission=session.get(Submission, sub), reason="FLOP cap 1 reached")
    assert run_task(coord_settings, submission_id=sub, lease_id=lease.id) == 0
    with sessions() as session:
        ended = session.get(TaskLease, lease.id)
        assert (ended.status, ended.error) == ("cancelled", "submission is stopped")
        assert session.scalar(select(TaskRun.id)) is None  # nothing ran
        assert session.get(Submission, sub).status == "stopped"


# --- the API, the metrics and the dashboard ----------------------------------------------


def test_the_api_lists_reads_and_counts_stopped_runs(client, tokens, coord_settings, sessions):
    alice = tokens.auth("alice")
    made = client.post("/v1/learners", json={"name": "nm", "entrypoint": ENTRYPOINT}, headers=alice)
    assert made.status_code == 201, made.text
    body = {"learner_id": made.json()["id"], "stream": "tiny3", "budget": {"trials": 1, "steps": 1, "flop_cap": 150}}
    capped, other = (client.post("/v1/submissions", json=body, headers=alice).json()["id"] for _ in range(2))
    run_task_as_a_worker(sessions, claim(sessions), flops=200.0)  # the fairest claim: the older one
    listed = client.get("/v1/submissions?status=stopped", headers=alice).json()
    assert [s["id"] for s in listed["items"]] == [capped] and listed["total"] == 1
    assert [s["id"] for s in client.get("/v1/submissions?status=queued", headers=alice).json()["items"]] == [other]
    assert client.get("/v1/submissions?status=failed", headers=alice).json()["total"] == 0
    read = client.get(f"/v1/submissions/{capped}", headers=alice).json()
    assert (read["status"], read["error"]) == ("stopped", "FLOP cap 150 reached (200 spent)")
    assert read["finished_at"] is not None and read["current_task"] is None
    assert [t["status"] for t in read["tasks"]] == ["committed", "pending", "pending"]
    refused = client.post(f"/v1/submissions/{capped}/cancel", headers=alice)
    assert refused.status_code == 409 and "is stopped" in refused.json()["detail"]
    assert 'nevis_submissions{status="stopped"} 1.0' in client.get("/metrics").text

    with TestClient(create_server_app(coord_settings)) as dashboard:
        page = dashboard.get(f"/submissions/{capped}").text
        assert '<span class="status status-stopped" id="status" title="ended at its own FLOP' in page
        assert "FLOP cap 150 reached (200 spent)" in page
        board = dashboard.get("/", params={"stream": "tiny3", "version": "test-1"}).text
        assert 'class="status status-stopped"' in board and "status-failed" not in board


# --- refreshes -----------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "queued"), [("stopped", 0), ("failed", 1)])
def test_a_refresh_keeps_a_stopped_baseline_run(kit, coord_settings, sessions, status, queued):
    """A stopped run did its budget's work (a rerun would stop at the same cap); a failed one
    is queued again."""
    with transaction(sessions) as session:
        version = ensure_stream_version(session, manifest=load_stream(str(coord_settings.streams_dir / "tiny2.json")))
        indep = records.ensure_learner(session, spec="indep", resources={})
        records.create_submission(
            session,
            learner=indep,
            stream_version=version,
            phase="meta_test",
            budget=RunBudget(flop_cap=1.0),
            image_size=16,
            first_order=1,
            status=status,
        )
    settings = kit.make_settings(
        coord_settings.database_url, coord_settings.data_dir, coord_settings.streams_dir, refresh_baselines="indep"
    )
    with transaction(sessions) as session:
        outcome = start_refresh(session, settings=settings, stream="tiny2", trigger="cli")
    assert outcome.created and len(outcome.queued) == queued


# --- end to end: real workers on a real Ray head ------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_real_workers_launch_a_capped_run_once_and_it_ends_stopped(
    coord_settings, sessions, ray_head, kit, tmp_path, monkeypatch
):
    """``nevis worker run-task`` processes (the local backend) joining a Ray head: task 1's
    commit reaches the cap, the run is stopped, and the scheduler launches nothing more."""
    monkeypatch.setenv("NEVIS_RAY_ADDRESS", ray_head.gcs_address)  # the workers inherit it
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    store = open_store(coord_settings.store_url)
    bundle = kit.learner_bundle(tmp_path)
    info = store.put_file(f"learners/bundles/test/{bundle.name}", bundle)
    with transaction(sessions) as session:
        user = users.create_user(session, name="alice", role="submitter")
        owned = learners.create_learner(
            session,
            owner=user,
            name="nm",
            entrypoint=ENTRYPOINT,
            image=None,
            resources=ResourceRequest(),
            bundle_key=info.key,
            bundle_sha256=info.sha256,
            bundle_size_bytes=info.size,
        )
        request = submission_create.SubmissionRequest(
            learner_id=owned.learner.id,
            stream="tiny3",
            phase="meta_test",
            budget=RunBudget(trials=1, steps=1, checkpoint_fractions=(1.0,), flop_cap=1.0),
        )
        sub = submission_create.create_submission(session, settings=coord_settings, user=user, request=request)[0].id
    backend = LocalBackend(coord_settings)
    scheduler = Scheduler(coord_settings, backend=backend, sessions=sessions)

    def ended() -> bool:
        scheduler.tick()
        with sessions() as session:
            return (
                session.get(Submission, sub).status not in leases.OPEN_STATUSES
                and session.get(ScheduledSubmission, sub).active_lease_id is None
            )

    try:
        kit.wait_for(ended, timeout_s=400, what="the capped submission to end", interval_s=0.5)
        time.sleep(1.0)
        assert [scheduler.tick().launched for _ in range(3)] == [[], [], []]
    finally:
        for (job_id,) in kit.query(
            coord_settings.database_url, "SELECT job_id FROM task_leases WHERE job_id IS NOT NULL"
        ):
            try:
                os.killpg(int(job_id.split(":")[1]), signal.SIGKILL)
            except ProcessLookupError:
                pass
    logs = "".join(p.read_text()[-3000:] for p in backend.log_dir.glob("*.log"))
    with sessions() as session:
        submission = session.get(Submission, sub)
        assert submission.status == "stopped", (submission.status, submission.error, logs)
        assert submission.error.startswith("FLOP cap 1 reached (") and submission.cursor == 2
    rows = kit.query(coord_settings.database_url, "SELECT task_order, attempt, status FROM task_leases ORDER BY id")
    assert rows == [(1, 1, "succeeded")], logs  # one launch: task 2 was never launched
    runs = kit.query(
        coord_settings.database_url,
        'SELECT s."order", r.status FROM task_runs r JOIN stream_tasks s ON s.id = r.stream_task_id',
    )
    assert runs == [(1, "succeeded")]
    events = kinds(sessions, sub)
    assert events.count("lease.claimed") == 1 and events.count("submission.stopped") == 1
