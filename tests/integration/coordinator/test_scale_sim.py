"""The scale simulation (bench/scale_sim.py) at a small size: 3 scheduler replicas (OS
processes) on one PostgreSQL database, simulated workers that take the real harness path.

The script is run as CI would run it, keeping its database so that this test checks the
database itself as well as the script's report: every task committed exactly once, no two
leases of a submission in flight at once, no slot over-subscription (per replica and
cluster-wide). A few simulated workers die after starting, so the reaper's relaunches are
part of the run. Nothing here is timed: speed figures belong to the script's output.

The two races the simulation found in the scheduler are reproduced here step by step too:
recording a launch after the worker had started its lease (it used to put the lease back to
``launched``, so the worker's next heartbeat lost it), and two replicas filling the last
``NEVIS_CLUSTER_SLOTS`` slot at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from services.coordinator.common.validation import ResourceRequest
from services.coordinator.crud import learners, submission_create, users
from services.coordinator.scheduler import lease_running, leases, slots
from services.core.budget import RunBudget
from services.store.db import make_engine, session_factory, transaction
from services.store.db.models_coordinator import TaskLease

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "scale_sim.py"
SUBMISSIONS, TASKS, REPLICAS, SLOTS, CLUSTER_SLOTS = 20, 10, 3, 3, 7

pytestmark = pytest.mark.postgres

# The most leases in flight at the instant any lease was claimed, over [claimed, ended).
PEAK_IN_FLIGHT = """
    SELECT coalesce(max(n), 0) FROM (
        SELECT (SELECT count(*) FROM task_leases b
                WHERE {same} b.created_at <= a.created_at
                  AND (b.finished_at IS NULL OR b.finished_at > a.created_at)) AS n
        FROM task_leases a) AS peaks
"""
SAME_REPLICA = "split_part(b.owner, ':', 1) = split_part(a.owner, ':', 1) AND"
OVERLAPPING = """
    SELECT count(*) FROM task_leases a JOIN task_leases b
      ON a.submission_id = b.submission_id AND a.id < b.id
     AND b.created_at < coalesce(a.finished_at, 'infinity')
     AND a.created_at < coalesce(b.finished_at, 'infinity')
"""


def _drop(admin_url: str, name: str) -> None:
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with engine.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    finally:
        engine.dispose()


def test_three_replicas_launch_and_commit_every_task_exactly_once(postgres_admin_url, tmp_path, kit):
    report_path = tmp_path / "report.json"
    command = [
        sys.executable,
        str(SCRIPT),
        "--submissions",
        str(SUBMISSIONS),
        "--tasks",
        str(TASKS),
        "--replicas",
        str(REPLICAS),
        "--slots",
        str(SLOTS),
        "--cluster-slots",
        str(CLUSTER_SLOTS),
        "--users",
        "5",
        "--poll-s",
        "0.1",
        "--crash-rate",
        "0.03",
        "--seed",
        "1",
        "--max-minutes",
        "5",
        "--postgres-url",
        postgres_admin_url,
        "--keep-db",
        "--quiet",
        "--json",
        str(report_path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=540)
    output = f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    assert report_path.exists(), output
    report = json.loads(report_path.read_text())
    database = report["database"]
    assert database and database.startswith("nevis_scale_"), output
    url = make_url(postgres_admin_url).set(database=database).render_as_string(hide_password=False)
    try:
        assert done.returncode == 0, output
        assert report["finished"], output
        assert report["double_launches"]["total"] == 0, output
        assert report["over_subscription"]["total"] == 0, output
        assert report["errors"]["total"] == 0, output
        assert report["transitions"]["tasks_committed"] == SUBMISSIONS * TASKS
        # launch delays apart: task 1 of each user's first submission, of their later ones, the rest
        delays = report["scheduling_delay_s"]
        assert delays["first_submission"]["n"] == 5 and delays["later_submissions"]["n"] == SUBMISSIONS - 5
        assert delays["next_tasks"]["n"] == SUBMISSIONS * (TASKS - 1)
        assert 0 <= delays["first_submission"]["p50"] <= delays["first_submission"]["max"]
        assert "a user's first submission" in done.stdout

        # the database itself: every task committed exactly once
        results = kit.query(
            url,
            "SELECT submission_id, stream_task_id, count(*) FROM task_results GROUP BY submission_id, stream_task_id",
        )
        assert len(results) == SUBMISSIONS * TASKS and {n for *_, n in results} == {1}
        assert kit.query(url, "SELECT count(*) FROM task_runs WHERE status = 'succeeded'") == [(SUBMISSIONS * TASKS,)]
        assert kit.query(url, "SELECT status, count(*) FROM submissions GROUP BY status") == [
            ("succeeded", SUBMISSIONS)
        ]
        # one committing lease per task; the others (relaunches after a worker died) expired
        leases = kit.query(
            url,
            "SELECT submission_id, task_order, "
            "count(*) FILTER (WHERE status = 'succeeded'), "
            "count(*) FILTER (WHERE status NOT IN ('succeeded', 'expired')) "
            "FROM task_leases GROUP BY submission_id, task_order",
        )
        assert len(leases) == SUBMISSIONS * TASKS
        assert all(succeeded == 1 and other == 0 for *_, succeeded, other in leases)
        # no two leases of one submission in flight at once, and none left in flight
        assert kit.query(url, OVERLAPPING) == [(0,)]
        assert kit.query(url, "SELECT count(*) FROM task_leases WHERE finished_at IS NULL") == [(0,)]
        # slots: per replica and cluster-wide, and every replica took part
        assert kit.query(url, PEAK_IN_FLIGHT.format(same=SAME_REPLICA))[0][0] <= SLOTS
        assert kit.query(url, PEAK_IN_FLIGHT.format(same=""))[0][0] <= CLUSTER_SLOTS
        owners = kit.query(url, "SELECT DISTINCT split_part(owner, ':', 1) FROM task_leases")
        assert len(owners) == REPLICAS
    finally:
        _drop(postgres_admin_url, database)


# --- the races the simulation found, one step at a time ------------------------------------


@pytest.fixture
def sessions(coord_settings):
    engine = make_engine(coord_settings.database_url)
    yield session_factory(engine)
    engine.dispose()


def _submit(sessions, settings, count: int) -> list[int]:
    with transaction(sessions) as session:
        user = users.create_user(session, name="alice", role="submitter", max_concurrent=100)
        learner = learners.create_learner(
            session,
            owner=user,
            name="alice-nm",
            entrypoint="nevis_test_learners:nearest_mean",
            image=None,
            resources=ResourceRequest(),
        ).learner
        request = submission_create.SubmissionRequest(
            learner_id=learner.id, stream="tiny3", phase="meta_test", budget=RunBudget(trials=1, steps=1)
        )
        return [
            submission_create.create_submission(session, settings=settings, user=user, request=request)[0].id
            for _ in range(count)
        ]


def _in_thread(target) -> threading.Thread:
    """Run ``target`` on a thread and give it time to block on the lock the test holds."""
    thread = threading.Thread(target=target)
    thread.start()
    time.sleep(0.5)
    return thread


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_recording_a_launch_keeps_a_lease_its_worker_started_running(sessions, coord_settings):
    (sub,) = _submit(sessions, coord_settings, 1)
    with transaction(sessions) as session:
        lease_id = leases.claim_next(session, owner="sim-a:1:x", backend="sim", start_timeout_s=60).id
    worker = sessions()
    worker.begin()  # the worker starts its lease; its transaction has not committed yet
    assert lease_running.start_lease(worker, lease_id=lease_id, submission_id=sub, task_deadline_s=60).run

    def record_launch() -> None:
        with transaction(sessions) as session:
            leases.mark_launched(session, lease_id=lease_id, job_id="job-1")

    scheduler = _in_thread(record_launch)
    worker.commit()
    worker.close()
    scheduler.join(30)
    with sessions() as session:
        lease = session.get(TaskLease, lease_id)
        assert (lease.status, lease.job_id) == ("running", "job-1")
    with transaction(sessions) as session:  # so the worker's heartbeat still holds it
        assert lease_running.heartbeat(session, lease_id=lease_id)


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_two_replicas_cannot_both_take_the_last_cluster_slot(sessions, coord_settings):
    _submit(sessions, coord_settings, 2)
    cap = 1
    first = sessions()
    first.begin()  # replica a: counts a free slot and claims it, not yet committed
    slots.lock_claims(first)
    assert slots.count_active(first) < cap
    assert leases.claim_next(first, owner="sim-a:1:x", backend="sim", start_timeout_s=60)
    seen: list[int] = []

    def replica_b() -> None:
        with transaction(sessions) as session:
            slots.lock_claims(session)
            seen.append(slots.count_active(session))

    other = _in_thread(replica_b)
    assert seen == []  # waiting for replica a's claim to commit
    first.commit()
    first.close()
    other.join(30)
    assert seen == [1]  # so it sees the slot taken
    with sessions() as session:
        assert session.scalar(select(TaskLease.id).where(TaskLease.owner.startswith("sim-b"))) is None
