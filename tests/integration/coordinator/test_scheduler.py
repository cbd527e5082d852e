"""The scheduler on a real database: fairness, exclusive claims, the reaper, cancellation.

Launches here go through the real ``local`` backend with stand-in worker commands (``true``,
``false``, ``sleep``), i.e. real processes that end (or hang) the way a crashed or stuck
worker would. Runs of the real worker are in test_local_e2e.py and test_ray_jobs.py.
"""

from __future__ import annotations

import subprocess
import time
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from services.coordinator.backends.local import LocalBackend, parse_job_id, start_ticks
from services.coordinator.common.validation import ResourceRequest
from services.coordinator.crud import learners, submission_create, submissions, users
from services.coordinator.scheduler import lease_running, leases
from services.coordinator.scheduler.loop import Scheduler
from services.coordinator.worker import run_task
from services.core.budget import RunBudget
from services.store.db import make_engine, session_factory, sessions_on, transaction
from services.store.db.models import Event, Submission, TaskRun
from services.store.db.models_coordinator import LearnerOwner, ScheduledSubmission, TaskLease, User
from services.store.db.types import utcnow
from services.store.runs import records


@pytest.fixture
def sessions(coord_settings):
    engine = make_engine(coord_settings.database_url)
    yield session_factory(engine)
    engine.dispose()


def submit(sessions, settings, owner: str, *, stream: str = "tiny2", count: int = 1) -> list[int]:
    """``count`` queued submissions of ``owner`` (made on first use) on ``stream``."""
    with transaction(sessions) as session:
        found = session.scalar(select(User).where(User.name == owner))
        user = found or users.create_user(session, name=owner, role="submitter", max_concurrent=100)
        learner_id = session.scalar(select(LearnerOwner.learner_id).where(LearnerOwner.user_id == user.id))
        if learner_id is None:
            learner_id = learners.create_learner(
                session,
                owner=user,
                name=f"{owner}-nm",
                entrypoint="nevis_test_learners:nearest_mean",
                image=None,
                resources=ResourceRequest(),
            ).learner.id
        made = []
        for _ in range(count):
            request = submission_create.SubmissionRequest(
                learner_id=learner_id, stream=stream, phase="meta_test", budget=RunBudget(trials=1, steps=1)
            )
            made.append(
                submission_create.create_submission(session, settings=settings, user=user, request=request)[0].id
            )
    return made


def claim(sessions, owner: str = "s1") -> TaskLease | None:
    with transaction(sessions) as session:
        return leases.claim_next(session, owner=owner, backend="local", start_timeout_s=60)


def events(sessions, submission_id: int) -> list[str]:
    with sessions() as session:
        return list(session.scalars(select(Event.kind).where(Event.submission_id == submission_id).order_by(Event.id)))


def run_ticks(scheduler: Scheduler, until, *, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        scheduler.tick()
        if until():
            return
        time.sleep(0.2)
    pytest.fail("the scheduler did not reach the expected state in time")


def test_claims_take_turns_between_users(sessions, coord_settings):
    a1, a2 = submit(sessions, coord_settings, "alice", count=2)
    (b1,) = submit(sessions, coord_settings, "bob")
    order = [claim(sessions).submission_id for _ in range(3)]
    assert order == [a1, b1, a2]  # bob's only submission goes before alice's second
    assert claim(sessions) is None  # one task in flight per submission


def test_a_user_who_just_launched_waits_for_the_others(sessions, coord_settings):
    (a1,) = submit(sessions, coord_settings, "alice", stream="tiny3")
    first = claim(sessions)
    with transaction(sessions) as session:
        leases.end_lease(session, lease=session.get(TaskLease, first.id), status="failed", error="x")
    (b1,) = submit(sessions, coord_settings, "bob")
    assert claim(sessions).submission_id == b1
    assert claim(sessions).submission_id == a1


def test_the_database_refuses_a_second_active_lease(sessions, coord_settings):
    (sub,) = submit(sessions, coord_settings, "alice")
    assert claim(sessions) is not None
    now = utcnow()
    with pytest.raises(IntegrityError):
        with transaction(sessions) as session:
            session.add(
                TaskLease(
                    submission_id=sub,
                    task_order=1,
                    attempt=2,
                    status="running",
                    backend="local",
                    owner="rogue",
                    heartbeat_at=now,
                    deadline_at=now,
                )
            )


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_skip_locked_lets_a_second_scheduler_pass_a_row_being_claimed(sessions, coord_settings):
    first, second = submit(sessions, coord_settings, "alice", count=2)
    holder = sessions()
    holder.begin()
    held = leases.claim_next(holder, owner="a", backend="local", start_timeout_s=60)
    try:
        with transaction(sessions) as session:
            session.execute(select(1).where(False))  # start the transaction
            session.connection().exec_driver_sql("SET LOCAL lock_timeout = '2s'")
            other = leases.claim_next(session, owner="b", backend="local", start_timeout_s=60)
        assert (held.submission_id, other.submission_id) == (first, second)
    finally:
        holder.commit()
        holder.close()


class SilentBackend:
    """Accepts launches and runs nothing (the leases stay launched)."""

    name = "silent"

    def launch(self, spec) -> str:
        return f"silent:{spec.lease_id}"

    def status(self, job_id):
        from services.coordinator.backends.base import JobState, JobStatus

        return JobStatus(JobState.UNKNOWN)

    def cancel(self, job_id) -> None:
        pass

    def reap(self) -> None:
        pass


class RecordingBackend(SilentBackend):
    """Runs each launch on a thread that does what a worker does to the database: start the
    lease, advance the cursor as a committed task would, end the lease. Records every launch.
    Not named ``local``: replicas on the local backend refuse each other's leases."""

    name = "recording"

    def __init__(self, sessions, launches: list, lock) -> None:
        self.sessions, self.launches, self.lock = sessions, launches, lock

    def launch(self, spec) -> str:
        with self.lock:
            self.launches.append((spec.submission_id, spec.task_order))
        import threading

        threading.Thread(target=self._work, args=(spec,)).start()
        return f"thread:{spec.lease_id}"

    def _work(self, spec) -> None:
        time.sleep(0.05)
        with transaction(self.sessions) as session:
            if not lease_running.start_lease(
                session, lease_id=spec.lease_id, submission_id=spec.submission_id, task_deadline_s=60
            ).run:
                return
        with transaction(self.sessions) as session:
            sub = session.get(Submission, spec.submission_id)
            if sub.cursor == 3:
                sub.status = "succeeded"
            else:
                sub.cursor += 1
        with transaction(self.sessions) as session:
            lease_running.finish_success(session, lease_id=spec.lease_id)


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_concurrent_schedulers_never_launch_the_same_task(sessions, coord_settings):
    import threading

    ids = [
        s for who in ("alice", "bob", "carol") for s in submit(sessions, coord_settings, who, stream="tiny3", count=4)
    ]
    launches: list[tuple[int, int]] = []
    lock = threading.Lock()
    settings = coord_settings.model_copy(update={"scheduler_slots": 3, "poll_interval_s": 0.01})
    schedulers = []
    for i in range(4):
        own = sessions_on(coord_settings.database_url)
        schedulers.append(
            Scheduler(settings, backend=RecordingBackend(own, launches, lock), sessions=own, owner=f"replica-{i}")
        )
    for scheduler in schedulers:
        scheduler.start()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with sessions() as session:
                if all(session.get(Submission, i).status == "succeeded" for i in ids):
                    break
                session.expire_all()
            time.sleep(0.2)
    finally:
        for scheduler in schedulers:
            scheduler.stop()
    assert sorted(launches) == sorted((s, order) for s in ids for order in (1, 2, 3))
    with sessions() as session:
        rows = session.execute(
            select(TaskLease.submission_id, TaskLease.task_order, TaskLease.status, TaskLease.owner)
        ).all()
    assert len(rows) == len(ids) * 3 and {r.status for r in rows} == {"succeeded"}
    assert len({r.owner for r in rows}) > 1  # the replicas really shared the work


def test_a_worker_that_never_reports_is_retried_then_fails_with_the_reason(sessions, coord_settings):
    settings = coord_settings.model_copy(update={"worker_command": "true", "max_attempts": 2, "backoff_base_s": 1.0})
    (sub,) = submit(sessions, settings, "alice")
    scheduler = Scheduler(settings, backend=LocalBackend(settings), sessions=sessions)

    def settled() -> bool:
        with sessions() as session:
            return session.get(Submission, sub).status == "failed"

    run_ticks(scheduler, settled)
    with sessions() as session:
        submission = session.get(Submission, sub)
        rows = session.execute(
            select(TaskLease.attempt, TaskLease.status, TaskLease.created_at).order_by(TaskLease.id)
        ).all()
        assert session.get(ScheduledSubmission, sub).active_lease_id is None
    assert [(r.attempt, r.status) for r in rows] == [(1, "expired"), (2, "expired")]
    assert (rows[1].created_at - rows[0].created_at) >= timedelta(seconds=1.0)  # the back-off
    assert "task 1 failed after 2 attempts" in submission.error
    assert "without the worker reporting" in submission.error
    assert submission.finished_at is not None
    kinds = events(sessions, sub)
    assert kinds.count("lease.claimed") == 2 and "submission.retry_scheduled" in kinds
    assert kinds[-1] == "submission.failed"


def test_a_backend_that_cannot_launch_fails_the_submission(sessions, coord_settings):
    settings = coord_settings.model_copy(
        update={
            "worker_command": "/nonexistent/nevis",
            "max_attempts": 1,
            "max_launch_failures": 2,
            "backoff_base_s": 0.0,
        }
    )
    (sub,) = submit(sessions, settings, "alice")
    scheduler = Scheduler(settings, backend=LocalBackend(settings), sessions=sessions)
    scheduler.tick()
    scheduler.tick()
    with sessions() as session:
        submission = session.get(Submission, sub)
        assert submission.status == "failed"
        assert "could not launch" in submission.error and "NEVIS_WORKER_COMMAND" in submission.error


@pytest.mark.parametrize(
    ("age", "field", "run_status", "words"),
    [
        ("heartbeat", "heartbeat_at", "failed", "no heartbeat"),
        ("deadline", "deadline_at", "timed_out", "past its deadline"),
    ],
)
def test_the_reaper_expires_silent_or_late_leases(sessions, coord_settings, age, field, run_status, words):
    (sub,) = submit(sessions, coord_settings, "alice")
    lease = claim(sessions)
    with transaction(sessions) as session:
        assert lease_running.start_lease(session, lease_id=lease.id, submission_id=sub, task_deadline_s=600).run
        submission = session.get(Submission, sub)
        task = records.stream_task(session, stream_version_id=submission.stream_version_id, order=1)
        run_id = records.start_task_run(session, submission=submission, task=task).id
        session.execute(
            update(TaskLease)
            .where(TaskLease.id == lease.id)
            .values({field: utcnow() - timedelta(seconds=coord_settings.heartbeat_timeout_s + 5)})
        )
    report = Scheduler(coord_settings, backend=LocalBackend(coord_settings), sessions=sessions).tick()
    assert report.expired == [lease.id]
    with sessions() as session:
        expired = session.get(TaskLease, lease.id)
        assert expired.status == "expired" and words in expired.error
        assert session.get(TaskRun, run_id).status == run_status
        submission = session.get(Submission, sub)
        assert submission.status == "running" and "retrying" in submission.error
        assert session.get(ScheduledSubmission, sub).next_launch_at > utcnow() - timedelta(seconds=1)


def test_cancelling_stops_the_running_job(sessions, coord_settings):
    settings = coord_settings.model_copy(update={"worker_command": "sh -c 'sleep 60'"})
    (sub,) = submit(sessions, settings, "alice")
    backend = LocalBackend(settings)
    scheduler = Scheduler(settings, backend=backend, sessions=sessions)
    assert scheduler.tick().launched
    with sessions() as session:
        job_id = session.scalar(select(TaskLease.job_id))
    pid, ticks = parse_job_id(job_id)
    assert start_ticks(pid) == ticks
    with transaction(sessions) as session:
        alice = session.scalar(select(User).where(User.name == "alice"))
        submissions.cancel_submission(session, user=alice, submission_id=sub)
    assert scheduler.tick().cancelled
    assert start_ticks(pid) == ""  # the process group is gone
    with sessions() as session:
        assert session.scalar(select(TaskLease.status)) == "cancelled"
        assert session.get(Submission, sub).status == "cancelled"
        assert session.get(ScheduledSubmission, sub).active_lease_id is None


@pytest.mark.parametrize("situation", ["expired", "cancelled", "committed"])
def test_the_worker_does_not_run_a_lease_that_is_no_longer_its(sessions, coord_settings, situation):
    (sub,) = submit(sessions, coord_settings, "alice", stream="tiny3")
    lease = claim(sessions)
    with transaction(sessions) as session:
        if situation == "expired":
            leases.end_lease(session, lease=session.get(TaskLease, lease.id), status="expired", error="x")
        elif situation == "cancelled":
            session.get(ScheduledSubmission, sub).cancel_requested_at = utcnow()
            session.get(Submission, sub).status = "cancelled"
        else:
            session.get(Submission, sub).cursor = 2
    assert run_task(coord_settings, submission_id=sub, lease_id=lease.id) == 0
    expected = {"expired": "expired", "cancelled": "cancelled", "committed": "succeeded"}[situation]
    with sessions() as session:
        assert session.get(TaskLease, lease.id).status == expected
        assert session.scalar(select(TaskRun.id)) is None  # nothing ran


def test_a_local_job_launched_by_an_earlier_coordinator_is_still_seen(coord_settings):
    orphan = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        job_id = f"local:{orphan.pid}:{start_ticks(orphan.pid)}"
        fresh = LocalBackend(coord_settings)  # knows nothing of the process
        assert fresh.status(job_id).state.value == "running"
        fresh.cancel(job_id)
        assert orphan.wait(timeout=10) != 0
    finally:
        orphan.kill()
    gone = fresh.status(job_id)
    assert gone.state.ended and "gone" in gone.message


def test_a_late_worker_cannot_revive_a_cancelled_submission(sessions, coord_settings):
    (sub,) = submit(sessions, coord_settings, "alice")
    lease = claim(sessions)
    with transaction(sessions) as session:
        alice = session.scalar(select(User).where(User.name == "alice"))
        submissions.cancel_submission(session, user=alice, submission_id=sub)
    scheduler = Scheduler(coord_settings, backend=LocalBackend(coord_settings), sessions=sessions)
    assert scheduler.tick().cancelled == [lease.id]
    with transaction(sessions) as session:  # what run_next_task does when it starts a task
        session.get(Submission, sub).status = "running"
    report = scheduler.tick()
    assert report.launched == []
    with sessions() as session:
        assert session.get(Submission, sub).status == "cancelled"


def test_the_heartbeat_refreshes_a_live_lease_and_reports_a_lost_one(sessions, coord_settings):
    import threading

    from services.coordinator.worker import Heartbeat

    (sub,) = submit(sessions, coord_settings, "alice")
    lease = claim(sessions)
    with transaction(sessions) as session:
        lease_running.start_lease(session, lease_id=lease.id, submission_id=sub, task_deadline_s=600)
        session.execute(update(TaskLease).values(heartbeat_at=utcnow() - timedelta(seconds=30)))
    lost = threading.Event()
    beat = Heartbeat(sessions, lease_id=lease.id, interval=0.1, on_lost=lost.set)
    beat.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with sessions() as session:
                if utcnow() - session.get(TaskLease, lease.id).heartbeat_at < timedelta(seconds=5):
                    break
            time.sleep(0.1)
        else:
            pytest.fail("the heartbeat never refreshed the lease")
        assert not lost.is_set()
        with transaction(sessions) as session:  # the reaper takes the lease away
            leases.end_lease(session, lease=session.get(TaskLease, lease.id), status="expired", error="x")
        assert lost.wait(10)
    finally:
        beat.stop()


def test_a_backlog_is_launched_in_batches_with_the_reaper_between(sessions, coord_settings, monkeypatch):
    from services.coordinator.scheduler import loop

    monkeypatch.setattr(loop, "LAUNCHES_PER_PASS", 2)
    submit(sessions, coord_settings, "alice", count=5)
    scheduler = Scheduler(
        coord_settings.model_copy(update={"scheduler_slots": 10}), backend=SilentBackend(), sessions=sessions
    )
    reports = [scheduler.tick() for _ in range(3)]
    assert [len(r.launched) for r in reports] == [2, 2, 1]
    assert [r.cut_short for r in reports] == [True, True, False]
