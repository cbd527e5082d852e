"""A worker whose task committed goes on with its submission's next task (warm actors and
learner hosts) under a new lease, only while nobody else waits for the slot; on a real
database, and once through the scheduler with real worker processes."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from sqlalchemy import select

from services.coordinator.backends.local import LocalBackend
from services.coordinator.scheduler import lease_running, leases
from services.coordinator.scheduler.continuation import continue_after
from services.coordinator.scheduler.loop import Scheduler
from services.store.db import make_engine, session_factory, transaction
from services.store.db.models import Event, Submission
from services.store.db.models_coordinator import ScheduledSubmission, TaskLease
from services.store.db.types import utcnow
from services.store.runs import records
from tests.integration.coordinator.conftest import FIXTURE_LEARNERS
from tests.integration.coordinator.test_scheduler import claim, events, submit

JOB = "local:4242:777"


@pytest.fixture
def sessions(coord_settings):
    engine = make_engine(coord_settings.database_url)
    yield session_factory(engine)
    engine.dispose()


def launched(sessions, job_id: str | None = JOB) -> TaskLease:
    """Alice's 3-task submission claimed, launched (its job id recorded) and started."""
    lease = claim(sessions, owner="replica-a:1:abc")
    with transaction(sessions) as session:
        if job_id is not None:
            leases.mark_launched(session, lease_id=lease.id, job_id=job_id)
        assert lease_running.start_lease(
            session, lease_id=lease.id, submission_id=lease.submission_id, task_deadline_s=60
        ).run
    return lease


def commit_task(sessions, submission_id: int) -> None:
    """What the runner's commit does to the submission: the cursor moves on."""
    with transaction(sessions) as session:
        session.get(Submission, submission_id).cursor += 1


def finish(sessions, lease: TaskLease, *, deadline_s: float = 60) -> int | None:
    """The worker's end of a task: the lease ends and, maybe, the next one starts."""
    with transaction(sessions) as session:
        ended = lease_running.finish_success(session, lease_id=lease.id)
        taken = continue_after(session, ended=ended, task_deadline_s=deadline_s)
        return None if taken is None else taken.id


def test_a_worker_alone_goes_on_with_the_next_task_under_a_lease_of_its_own(sessions, coord_settings):
    (sub,) = submit(sessions, coord_settings, "alice", stream="tiny3")
    first = launched(sessions)
    commit_task(sessions, sub)
    before = utcnow()
    next_id = finish(sessions, first, deadline_s=3600)
    assert next_id is not None
    with sessions() as session:
        old, new = session.get(TaskLease, first.id), session.get(TaskLease, next_id)
        assert old.status == "succeeded"
        assert (new.task_order, new.attempt, new.status) == (2, 1, "running")
        assert (new.owner, new.backend, new.job_id) == (old.owner, old.backend, JOB)  # same slot, same process
        assert new.started_at >= before and new.deadline_at >= before + timedelta(seconds=3599)
        assert session.get(ScheduledSubmission, sub).active_lease_id == next_id
        claimed = session.scalars(
            select(Event.payload).where(Event.submission_id == sub, Event.kind == "lease.claimed").order_by(Event.id)
        ).all()
    assert claimed[-1]["continues"] == first.id and claimed[-1]["lease_id"] == next_id
    assert events(sessions, sub)[-2:] == ["lease.claimed", "lease.started"]
    assert claim(sessions) is None  # the scheduler sees it in flight: no second launch of task 2
    # the continued lease is a lease like any other: its worker heartbeats it and ends it
    with transaction(sessions) as session:
        assert lease_running.heartbeat(session, lease_id=next_id)


def test_a_waiting_submission_gets_the_slot_back(sessions, coord_settings):
    (sub,) = submit(sessions, coord_settings, "alice", stream="tiny3")
    first = launched(sessions)
    (bob,) = submit(sessions, coord_settings, "bob")
    commit_task(sessions, sub)
    assert finish(sessions, first) is None
    with sessions() as session:
        assert session.get(ScheduledSubmission, sub).active_lease_id is None
    # the scheduler's round-robin decides, as it would have without continuation
    assert [claim(sessions).submission_id for _ in range(2)] == [bob, sub]


def test_a_submission_backing_off_does_not_count_as_waiting(sessions, coord_settings):
    (sub,) = submit(sessions, coord_settings, "alice", stream="tiny3")
    first = launched(sessions)
    (bob,) = submit(sessions, coord_settings, "bob")
    with transaction(sessions) as session:
        session.get(ScheduledSubmission, bob).next_launch_at = utcnow() + timedelta(minutes=5)
    commit_task(sessions, sub)
    assert finish(sessions, first) is not None


@pytest.mark.parametrize("situation", ["cancelled", "stopped", "not_committed", "unrecorded_launch", "last_task"])
def test_the_worker_ends_instead(sessions, coord_settings, situation):
    (sub,) = submit(sessions, coord_settings, "alice", stream="tiny3")
    first = launched(sessions, job_id=None if situation == "unrecorded_launch" else JOB)
    if situation != "not_committed":
        commit_task(sessions, sub)
    with transaction(sessions) as session:
        submission = session.get(Submission, sub)
        if situation == "cancelled":
            session.get(ScheduledSubmission, sub).cancel_requested_at = utcnow()
        elif situation == "stopped":
            records.stop_submission(session, submission=submission, reason="FLOP cap 1 reached")
        elif situation == "last_task":
            submission.status = "succeeded"
    assert finish(sessions, first) is None
    with sessions() as session:
        assert session.scalar(select(TaskLease.id).where(TaskLease.id != first.id)) is None
        assert session.get(ScheduledSubmission, sub).active_lease_id is None
        status = session.get(Submission, sub).status
    assert status == {"cancelled": "cancelled", "stopped": "stopped", "last_task": "succeeded"}.get(
        situation, "running"
    )


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_real_workers_run_a_stream_in_runs_of_at_most_max_tasks(sessions, coord_settings, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(FIXTURE_LEARNERS))  # the workers' learner, installed
    settings = coord_settings.model_copy(update={"worker_max_tasks": 2})
    (sub,) = submit(sessions, settings, "alice", stream="tiny3")
    scheduler = Scheduler(settings, backend=LocalBackend(settings), sessions=sessions)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        scheduler.tick()
        with sessions() as session:  # the task commits, then its lease ends: wait for both
            finished = session.get(Submission, sub).status not in ("queued", "running")
            if finished and session.get(ScheduledSubmission, sub).active_lease_id is None:
                break
        time.sleep(0.3)
    with sessions() as session:
        submission = session.get(Submission, sub)
        rows = session.execute(
            select(TaskLease.task_order, TaskLease.status, TaskLease.job_id).order_by(TaskLease.id)
        ).all()
    assert submission.status == "succeeded", submission.error
    assert [(r.task_order, r.status) for r in rows] == [(1, "succeeded"), (2, "succeeded"), (3, "succeeded")]
    first_job, continued_job, second_job = (r.job_id for r in rows)
    assert first_job == continued_job != second_job  # task 2 in task 1's process; then max tasks
    assert events(sessions, sub).count("lease.launched") == 2  # the scheduler launched twice
