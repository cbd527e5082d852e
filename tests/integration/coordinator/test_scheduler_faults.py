"""The scheduler under faults: backend outages, restarts with leases in flight, and the local
backend shared by replicas of different hosts. Both dialects (``coord_settings``).

Backends here are fakes that record launches; a launch is finished (or not) by the test,
doing to the database what a worker does.
"""

from __future__ import annotations

import subprocess

import pytest
from sqlalchemy import select

from services.coordinator.backends.base import JobState, JobStatus
from services.coordinator.backends.local import LocalBackend, start_ticks
from services.coordinator.common.validation import ResourceRequest
from services.coordinator.crud import learners, submission_create, users
from services.coordinator.scheduler import lease_endings, lease_running, leases, slots
from services.coordinator.scheduler.loop import Scheduler, instance_id, owned_by
from services.core.budget import RunBudget
from services.core.errors import ConfigError
from services.store.db import make_engine, session_factory, transaction
from services.store.db.models import Event, Submission
from services.store.db.models_coordinator import LearnerOwner, ScheduledSubmission, TaskLease, User


@pytest.fixture
def sessions(coord_settings):
    engine = make_engine(coord_settings.database_url)
    yield session_factory(engine)
    engine.dispose()


def submit(sessions, settings, owner: str = "alice", *, stream: str = "tiny2", count: int = 1) -> list[int]:
    with transaction(sessions) as session:
        user = session.scalar(select(User).where(User.name == owner)) or users.create_user(
            session, name=owner, role="submitter", max_concurrent=100
        )
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
        return [
            submission_create.create_submission(
                session,
                settings=settings,
                user=user,
                request=submission_create.SubmissionRequest(
                    learner_id=learner_id, stream=stream, phase="meta_test", budget=RunBudget(trials=1, steps=1)
                ),
            )[0].id
            for _ in range(count)
        ]


class FakeBackend:
    """Refuses a launch while ``fails`` (a list of booleans, one per launch call; empty:
    accept) says so; accepted launches are kept in ``launched`` for the test to finish."""

    def __init__(self, name: str = "fake", fails: list[bool] | None = None, always_fail: bool = False):
        self.name = name
        self.fails = list(fails or [])
        self.always_fail = always_fail
        self.calls = 0
        self.launched: list = []

    def launch(self, spec) -> str:
        self.calls += 1
        if self.always_fail or (self.fails and self.fails.pop(0)):
            raise RuntimeError("cluster unreachable")
        self.launched.append(spec)
        return f"fake:{spec.lease_id}"

    def status(self, job_id):
        return JobStatus(JobState.UNKNOWN)

    def cancel(self, job_id) -> None:
        pass

    def reap(self) -> None:
        pass


def finish(sessions, spec, *, last_order: int = 2) -> None:
    """What a worker does: start the lease, commit the task (the last one ends the run)."""
    with transaction(sessions) as session:
        assert lease_running.start_lease(
            session, lease_id=spec.lease_id, submission_id=spec.submission_id, task_deadline_s=60
        ).run
    with transaction(sessions) as session:
        sub = session.get(Submission, spec.submission_id)
        if sub.cursor == last_order:
            sub.status = "succeeded"
        else:
            sub.cursor += 1
    with transaction(sessions) as session:
        lease_running.finish_success(session, lease_id=spec.lease_id)


def unblock(sessions, sub: int) -> None:
    """Skip the back-off (the delays are checked from the events instead)."""
    with transaction(sessions) as session:
        session.get(ScheduledSubmission, sub).next_launch_at = None


def lease_rows(sessions, sub: int):
    with sessions() as session:
        return session.execute(
            select(TaskLease.task_order, TaskLease.attempt, TaskLease.status)
            .where(TaskLease.submission_id == sub)
            .order_by(TaskLease.id)
        ).all()


def payloads(sessions, sub: int, kind: str) -> list[dict]:
    with sessions() as session:
        return list(
            session.scalars(
                select(Event.payload).where(Event.submission_id == sub, Event.kind == kind).order_by(Event.id)
            )
        )


def test_refused_launches_back_off_without_spending_attempts(sessions, coord_settings):
    settings = coord_settings.model_copy(
        update={"max_attempts": 2, "max_launch_failures": 20, "backoff_base_s": 1.0, "backoff_max_s": 4.0}
    )
    (sub,) = submit(sessions, settings)
    backend = FakeBackend(fails=[True] * 5)
    scheduler = Scheduler(settings, backend=backend, sessions=sessions)
    for tries in range(1, 6):
        assert scheduler.tick().launched == []
        assert scheduler.tick().launched == []  # backing off: not claimed again yet
        with sessions() as session:
            submission = session.get(Submission, sub)
            assert submission.status == "running"
            assert submission.error.startswith(f"the fake backend could not launch task 1 ({tries} tr")
            assert "cluster unreachable" in submission.error
        unblock(sessions, sub)
    assert [p["delay_s"] for p in payloads(sessions, sub, "submission.launch_retry_scheduled")] == [1, 2, 4, 4, 4]
    assert scheduler.tick().launched  # the sixth launch goes through
    assert backend.calls == 6
    (spec,) = backend.launched
    assert (spec.task_order, spec.attempt) == (1, 1)  # five refused launches spent no attempt
    finish(sessions, spec)
    assert scheduler.tick().launched
    finish(sessions, backend.launched[1])
    with sessions() as session:
        submission = session.get(Submission, sub)
        assert submission.status == "succeeded" and submission.error is None
    assert lease_rows(sessions, sub) == [(1, 1, "launch_failed")] * 5 + [(1, 1, "succeeded"), (2, 1, "succeeded")]


def test_a_backend_that_never_launches_fails_the_submission_after_the_launch_budget(sessions, coord_settings):
    settings = coord_settings.model_copy(update={"max_attempts": 2, "max_launch_failures": 4, "backoff_base_s": 0.0})
    (sub,) = submit(sessions, settings)
    backend = FakeBackend(always_fail=True)
    scheduler = Scheduler(settings, backend=backend, sessions=sessions)
    for _ in range(6):
        scheduler.tick()
    assert backend.calls == 4
    with sessions() as session:
        submission = session.get(Submission, sub)
        assert submission.status == "failed" and submission.finished_at is not None
        assert submission.error == "the fake backend could not launch task 1 after 4 tries: cluster unreachable"
        assert session.get(ScheduledSubmission, sub).active_lease_id is None
    # more refusals than NEVIS_MAX_ATTEMPTS, and still no attempt of the task was spent
    assert lease_rows(sessions, sub) == [(1, 1, "launch_failed")] * 4
    assert payloads(sessions, sub, "submission.failed") == [
        {"order": 1, "launch_failures": 4, "reason": "cluster unreachable"}
    ]


def test_the_launch_budget_counts_consecutive_refusals_only(sessions, coord_settings):
    settings = coord_settings.model_copy(update={"max_launch_failures": 3, "backoff_base_s": 0.0})
    (sub,) = submit(sessions, settings)
    backend = FakeBackend(fails=[True, True, False, True, True, False])
    scheduler = Scheduler(settings, backend=backend, sessions=sessions)
    for _ in range(3):
        scheduler.tick()
    finish(sessions, backend.launched[0])
    for _ in range(3):
        scheduler.tick()
    finish(sessions, backend.launched[1])
    with sessions() as session:
        assert session.get(Submission, sub).status == "succeeded"
    assert [r.status for r in lease_rows(sessions, sub)] == [
        "launch_failed",
        "launch_failed",
        "succeeded",
        "launch_failed",
        "launch_failed",
        "succeeded",
    ]


def test_a_real_failure_after_refused_launches_is_attempt_one(sessions, coord_settings):
    settings = coord_settings.model_copy(update={"max_attempts": 2, "backoff_base_s": 0.0})
    (sub,) = submit(sessions, settings)
    backend = FakeBackend(fails=[True, True])
    scheduler = Scheduler(settings, backend=backend, sessions=sessions)
    for _ in range(3):
        scheduler.tick()
    (spec,) = backend.launched
    with transaction(sessions) as session:  # the worker dies: the reaper's way of ending it
        lease = session.get(TaskLease, spec.lease_id)
        lease_endings.settle_failure(
            session, lease=lease, status="expired", reason="worker died", policy=scheduler.retry_policy
        )
    scheduler.tick()
    assert [s.attempt for s in backend.launched] == [1, 2]
    with sessions() as session:
        assert session.get(Submission, sub).status == "running"


def test_slots_survive_a_coordinator_restart(sessions, coord_settings):
    settings = coord_settings.model_copy(update={"scheduler_slots": 2, "replica_name": "node-a"})
    subs = submit(sessions, settings, count=5)
    first = Scheduler(settings, backend=FakeBackend(), sessions=sessions)
    assert len(first.tick().launched) == 2
    # the process restarts: a new instance (a new owner) of the same replica
    restarted = Scheduler(settings, backend=FakeBackend(), sessions=sessions)
    assert restarted.owner != first.owner and owned_by(restarted.owner, "node-a")
    assert restarted.tick().launched == []
    with sessions() as session:
        assert slots.count_replica(session, replica="node-a") == 2
        assert slots.count_owned(session, owner=restarted.owner) == 0  # what it used to count
    # another replica has its own slots
    other = Scheduler(settings.model_copy(update={"replica_name": "node-b"}), backend=FakeBackend(), sessions=sessions)
    assert len(other.tick().launched) == 2
    with sessions() as session:
        assert slots.count_active(session) == 4
        assert {s for s in session.scalars(select(TaskLease.submission_id))} <= set(subs)


def test_cluster_slots_cap_every_replica_together(sessions, coord_settings):
    settings = coord_settings.model_copy(update={"scheduler_slots": 3, "cluster_slots": 4})
    submit(sessions, settings, count=8)
    a = Scheduler(settings.model_copy(update={"replica_name": "node-a"}), backend=FakeBackend(), sessions=sessions)
    b = Scheduler(settings.model_copy(update={"replica_name": "node-b"}), backend=FakeBackend(), sessions=sessions)
    assert len(a.tick().launched) == 3
    assert len(b.tick().launched) == 1
    assert a.tick().launched == [] and b.tick().launched == []


def test_instance_names_carry_the_replica():
    assert instance_id("node-a").startswith("node-a:")
    assert owned_by("node-a:12:abcd", "node-a") and owned_by("node-a", "node-a")
    assert not owned_by("node-ab:12:abcd", "node-a")
    with pytest.raises(ValueError, match="not an instance of the replica"):
        Scheduler.__init__(object.__new__(Scheduler), None, backend=None, sessions=None, owner="a:1:x", replica="b")


def _foreign_local_lease(sessions, settings, *, owner: str, job_id: str) -> int:
    (sub,) = submit(sessions, settings, "carol")
    with transaction(sessions) as session:
        lease = leases.claim_next(session, owner=owner, backend="local", start_timeout_s=600)
        leases.mark_launched(session, lease_id=lease.id, job_id=job_id)
        return lease.id


def test_the_local_backend_refuses_another_hosts_leases(sessions, coord_settings):
    ended = subprocess.Popen(["true"])
    ended.wait()  # a pid that means nothing here: judged by it, the lease would look dead
    lease_id = _foreign_local_lease(
        sessions, coord_settings, owner="host-b:4242:abcd1234", job_id=f"local:{ended.pid}:123456"
    )
    settings = coord_settings.model_copy(update={"replica_name": "host-a", "worker_command": "true"})
    submit(sessions, settings, "alice")
    scheduler = Scheduler(settings, backend=LocalBackend(settings), sessions=sessions)
    with pytest.raises(
        ConfigError,
        match=r"another coordinator replica has local tasks in flight "
        r"\(lease \d+ of 'host-b:4242:abcd1234'\).*'host-a'",
    ):
        scheduler.start()
    assert not scheduler.running
    with pytest.raises(ConfigError, match="NEVIS_BACKEND=local"):
        scheduler.tick()  # nor does a running one launch
    with sessions() as session:
        lease = session.get(TaskLease, lease_id)
        assert lease.status == "launched"  # not judged (nor stopped) by another host's pid
        assert session.scalar(select(TaskLease.id).where(TaskLease.owner.startswith("host-a"))) is None


def test_the_local_backend_takes_back_its_own_hosts_leases_after_a_restart(sessions, coord_settings):
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        _foreign_local_lease(
            sessions,
            coord_settings,
            owner="host-a:4242:abcd1234",
            job_id=f"local:{sleeper.pid}:{start_ticks(sleeper.pid)}",
        )
        settings = coord_settings.model_copy(update={"replica_name": "host-a"})
        scheduler = Scheduler(settings, backend=LocalBackend(settings), sessions=sessions)
        scheduler.check_local_hosts()  # its own earlier process: no refusal
        assert scheduler.tick().expired == []  # still running, seen by its pid
        # another backend does not care whose local leases are in flight
        Scheduler(
            coord_settings.model_copy(update={"replica_name": "host-b"}), backend=FakeBackend(), sessions=sessions
        ).check_local_hosts()
    finally:
        sleeper.kill()
        sleeper.wait()
