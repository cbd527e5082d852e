"""Benchmark refreshes on a real database (SQLite and PostgreSQL): what a refresh queues, that
it is idempotent and starts once under concurrency, the per-version leaderboard snapshot,
the schedule run by the scheduler, the admin routes, the CLI and the dashboard's selector."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from services.coordinator.refresh.start import start_refresh
from services.coordinator.refresh.timer import RefreshTimer
from services.coordinator.scheduler.loop import Scheduler
from services.core.budget import RunBudget
from services.dashboard.server import create_server_app
from services.store.db import declare_writer, make_engine, session_factory, transaction
from services.store.db.models import StreamTask, StreamVersion, Submission
from services.store.db.models_refresh import Refresh
from services.store.db.types import utcnow
from services.store.runs import records
from services.store.runs.outcomes import TaskOutcome, TrialOutcome
from workers.stream.manifest_files import load_stream
from workers.stream.versions import ensure_stream_version

ENTRYPOINT = "nevis_test_learners:nearest_mean"
ON_VERSION = """
    SELECT l.name, u.name, s.phase, s.budget, s.visibility, s.pinned, s.status
    FROM submissions s JOIN stream_versions v ON v.id = s.stream_version_id
    JOIN learners l ON l.id = s.learner_id
    LEFT JOIN scheduled_submissions o ON o.submission_id = s.id LEFT JOIN users u ON u.id = o.user_id
    WHERE v.name = :name AND v.version = :version ORDER BY s.id"""


@pytest.fixture
def sessions(coord_settings):
    engine = make_engine(coord_settings.database_url)
    yield session_factory(engine)
    engine.dispose()


class SilentBackend:
    """Accepts launches and runs nothing."""

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


def bump(streams_dir: Path, name: str, version: str) -> None:
    """A new version of stream ``name``: what an operator does when the stream changes."""
    path = streams_dir / f"{name}.json"
    doc = json.loads(path.read_text())
    doc["version"] = version
    doc["description"] = f"coordinator tests, version {version}"
    path.write_text(json.dumps(doc))


def learner(client, tokens, who: str) -> int:
    made = client.post("/v1/learners", json={"name": f"{who}-nm", "entrypoint": ENTRYPOINT}, headers=tokens.auth(who))
    assert made.status_code == 201, made.text
    return made.json()["id"]


def submit(client, tokens, who: str, learner_id: int, **body) -> int:
    made = client.post(
        "/v1/submissions",
        headers=tokens.auth(who),
        json={"learner_id": learner_id, "stream": "tiny2", "budget": {"trials": 1, "steps": 2}, **body},
    )
    assert made.status_code == 201, made.text
    return made.json()["id"]


def refresh(sessions, settings, stream: str = "tiny2", trigger: str = "cli"):
    with transaction(sessions) as session:
        return start_refresh(session, settings=settings, stream=stream, trigger=trigger)


def finish(sessions, submission_id: int, error: float) -> None:
    """Commit every task of a submission with ``error``, as a worker would."""
    with transaction(sessions) as session:
        sub = session.get(Submission, submission_id)
        tasks = [
            t
            for t in session.scalars(
                select(StreamTask)
                .where(StreamTask.stream_version_id == sub.stream_version_id)
                .order_by(StreamTask.order)
            )
            if sub.phase == "meta_test" or t.phase == "meta_train"
        ]
        for i, task in enumerate(tasks):
            run = records.start_task_run(session, submission=sub, task=task)
            trial = records.record_trial(
                session,
                task_run_id=run.id,
                outcome=TrialOutcome(trial_index=0, seed=0, status="ok", flops_measured=100, dev_error=error),
            )
            records.commit_task(
                session,
                submission=sub,
                run=run,
                best_trial=trial,
                outcome=TaskOutcome(
                    order=task.order,
                    best_trial_index=0,
                    error=error,
                    split="test" if sub.phase == "meta_test" else "dev_test",
                    metric="accuracy" if task.kind == "single" else "map",
                    flops=100.0,
                    wall_time_s=1.0,
                    peak_memory_bytes=0,
                    state_key="state",
                ),
                next_order=tasks[i + 1].order if i + 1 < len(tasks) else None,
            )


def count_on(kit, settings, version: str, name: str = "tiny2") -> int:
    return len(kit.query(settings.database_url, ON_VERSION, name=name, version=version))


# --- what a refresh queues, and only once ----------------------------------------------------


def test_a_refresh_queues_the_baselines_and_the_pinned_submissions_only(client, tokens, kit, coord_settings, sessions):
    alice, bob = learner(client, tokens, "alice"), learner(client, tokens, "bob")
    pinned = submit(
        client,
        tokens,
        "alice",
        alice,
        phase="meta_train",
        pinned=True,
        visibility="private",
        code_url="https://github.com/alice/nm",
    )
    submit(client, tokens, "alice", alice)  # not pinned: not re-run
    later = submit(client, tokens, "bob", bob)
    other_stream = submit(client, tokens, "bob", bob, stream="tiny3", pinned=True)
    assert (
        client.post(f"/v1/submissions/{later}/pin", json={"pinned": "yes"}, headers=tokens.auth("bob")).status_code
        == 422
    )
    assert (
        client.post(f"/v1/submissions/{later}/pin", json={"pinned": True}, headers=tokens.auth("alice")).status_code
        == 404
    )  # not alice's
    pinned_later = client.post(f"/v1/submissions/{later}/pin", json={"pinned": True}, headers=tokens.auth("bob"))
    assert pinned_later.status_code == 200 and pinned_later.json()["pinned"] is True
    assert client.get(f"/v1/submissions/{other_stream}", headers=tokens.auth("bob")).json()["pinned"] is True

    bump(coord_settings.streams_dir, "tiny2", "test-2")
    outcome = refresh(sessions, coord_settings)
    assert outcome.created and len(outcome.queued) == 3
    rows = kit.query(coord_settings.database_url, ON_VERSION, name="tiny2", version="test-2")
    default_trials = 4
    assert sorted(
        (
            r[0],
            r[1],
            r[2],
            json.loads(r[3])["trials"] if isinstance(r[3], str) else r[3]["trials"],
            r[4],
            bool(r[5]),
            r[6],
        )
        for r in rows
    ) == [
        ("alice-nm", "alice", "meta_train", 1, "private", False, "queued"),
        ("bob-nm", "bob", "meta_test", 1, "public", False, "queued"),
        ("indep", "refresh", "meta_test", default_trials, "public", False, "queued"),
    ]
    runs = kit.query(
        coord_settings.database_url,
        "SELECT kind, source_submission_id FROM refresh_runs WHERE refresh_id = :r ORDER BY submission_id",
        r=outcome.refresh.id,
    )
    assert sorted(runs, key=str) == sorted([("baseline", None), ("pinned", pinned), ("pinned", later)], key=str)
    events = kit.query(
        coord_settings.database_url,
        "SELECT payload FROM events WHERE kind = 'submission.queued' AND submission_id = :s",
        s=outcome.queued[0],
    )
    assert len(events) == 1
    copied = kit.query(
        coord_settings.database_url,
        "SELECT s.code_url FROM refresh_runs r JOIN submissions s "
        "ON s.id = r.submission_id WHERE r.source_submission_id = :p",
        p=pinned,
    )
    assert copied == [("https://github.com/alice/nm",)]  # where the pinned learner's code is public, copied

    again = refresh(sessions, coord_settings, trigger="admin")
    assert (again.created, again.refresh.id, again.queued) == (False, outcome.refresh.id, ())
    assert count_on(kit, coord_settings, "test-2") == 3
    assert kit.query(coord_settings.database_url, "SELECT trigger, status FROM refreshes") == [("cli", "running")]


def test_a_refresh_skips_runs_the_version_already_has(client, tokens, kit, coord_settings, sessions):
    """A baseline (any owner) or a pinned run (same owner) already queued on the version is not
    queued again; a user's learner named like a baseline is no baseline."""
    bob = learner(client, tokens, "bob")
    client.post(
        f"/v1/submissions/{submit(client, tokens, 'bob', bob)}/pin", json={"pinned": True}, headers=tokens.auth("bob")
    )
    bump(coord_settings.streams_dir, "tiny2", "test-2")
    submit(client, tokens, "bob", bob)  # bob already runs his learner on test-2
    made = client.post("/v1/learners", json={"name": "ft_prev", "entrypoint": ENTRYPOINT}, headers=tokens.auth("alice"))
    assert made.status_code == 201
    with sessions() as session:
        version = ensure_stream_version(session, manifest=load_stream(str(coord_settings.streams_dir / "tiny2.json")))
        session.commit()
        indep = records.ensure_learner(session, spec="indep", resources={})
        records.create_submission(
            session,
            learner=indep,
            stream_version=version,
            phase="meta_test",
            budget=RunBudget(),
            image_size=16,
            first_order=1,
            status="succeeded",
        )
        session.commit()
    settings = kit.make_settings(
        coord_settings.database_url,
        coord_settings.data_dir,
        coord_settings.streams_dir,
        refresh_baselines="indep,ft_prev",
    )
    outcome = refresh(sessions, settings)
    assert outcome.created and outcome.queued == ()
    assert outcome.refresh.status == "finished" and outcome.refresh.snapshot["version"] == "test-2"
    assert "ft_prev" in outcome.refresh.note and "registered learner" in outcome.refresh.note


def test_through_the_admin_api_a_second_refresh_launches_nothing(client, tokens, kit, coord_settings, sessions):
    first = client.post("/v1/admin/refreshes", json={"stream": "tiny2"}, headers=tokens.auth("admin"))
    assert first.status_code == 201, first.text
    body = first.json()
    assert (body["stream"], body["version"], body["trigger"], body["status"], body["requested_by"]) == (
        "tiny2",
        "test-1",
        "admin",
        "running",
        "root",
    )
    assert [(r["kind"], r["status"]) for r in body["runs"]] == [("baseline", "queued")]
    assert first.headers["location"] == f"/v1/admin/refreshes/{body['id']}"
    second = client.post("/v1/admin/refreshes", json={"stream": "tiny2"}, headers=tokens.auth("admin"))
    assert second.status_code == 200 and second.json()["id"] == body["id"]
    assert count_on(kit, coord_settings, "test-1") == 1
    listed = client.get("/v1/admin/refreshes", headers=tokens.auth("admin")).json()
    assert listed["total"] == 1 and listed["items"][0]["id"] == body["id"]
    assert (
        client.get("/v1/admin/refreshes", params={"stream": "tiny3"}, headers=tokens.auth("admin")).json()["total"] == 0
    )
    detail = client.get(f"/v1/admin/refreshes/{body['id']}", headers=tokens.auth("admin")).json()
    assert detail["snapshot"] is None
    cancelled = client.post(f"/v1/submissions/{body['runs'][0]['submission_id']}/cancel", headers=tokens.auth("admin"))
    assert cancelled.status_code == 200
    assert RefreshTimer(coord_settings, sessions).settle() == [body["id"]]
    detail = client.get(f"/v1/admin/refreshes/{body['id']}", headers=tokens.auth("admin")).json()
    assert detail["status"] == "finished" and detail["finished_at"]
    assert detail["snapshot"]["total"] == 1 and detail["snapshot"]["rows"][0]["status"] == "cancelled"


# --- concurrency: the lock ------------------------------------------------------------------


def test_two_concurrent_refreshes_start_it_once(kit, coord_settings, sessions):
    settings = kit.make_settings(
        coord_settings.database_url,
        coord_settings.data_dir,
        coord_settings.streams_dir,
        refresh_baselines="indep,ft_prev",
    )
    barrier, created, errors = threading.Barrier(4), [], []

    def race() -> None:
        try:
            barrier.wait(timeout=30)
            created.append(refresh(sessions, settings).created)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=race) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == [] and sorted(created) == [False, False, False, True]
    assert count_on(kit, settings, "test-1") == 2
    assert kit.query(settings.database_url, "SELECT count(*) FROM refreshes") == [(1,)]


def test_a_second_refresh_waits_for_the_first_and_then_starts_nothing(kit, coord_settings, sessions):
    """The first holds its transaction open (the lock: an advisory lock on PostgreSQL, the
    write lock on SQLite); the second waits, then finds its refresh and queues nothing."""
    holder = sessions()
    declare_writer(holder)
    first = start_refresh(holder, settings=coord_settings, stream="tiny2", trigger="admin")
    second: list = []
    thread = threading.Thread(target=lambda: second.append(refresh(sessions, coord_settings)))
    thread.start()
    try:
        thread.join(timeout=1.5)
        assert thread.is_alive() and second == []  # waiting on the lock
    finally:
        holder.commit()
        holder.close()
    thread.join(timeout=60)
    assert first.created and second[0].created is False and second[0].refresh.id == first.refresh.id
    assert count_on(kit, coord_settings, "test-1") == len(first.queued) == 1


# --- the snapshot per version, and the dashboard's version selector --------------------------


def test_each_version_keeps_its_snapshot_after_another_version_s_runs(client, tokens, coord_settings, sessions):
    admin = tokens.auth("admin")
    one = client.post("/v1/admin/refreshes", json={"stream": "tiny2"}, headers=admin).json()
    timer = RefreshTimer(coord_settings, sessions)
    assert timer.settle() == []  # its baseline is still queued
    finish(sessions, one["runs"][0]["submission_id"], 0.3)
    assert timer.settle() == [one["id"]]
    kept = client.get(f"/v1/admin/refreshes/{one['id']}", headers=admin).json()["snapshot"]
    assert (kept["stream"], kept["version"], kept["phase"], kept["total"]) == ("tiny2", "test-1", "meta_test", 1)
    (row,) = kept["rows"]
    assert (row["learner"], row["rank"], row["baseline"], row["mean_error"], row["status"]) == (
        "indep",
        1,
        True,
        pytest.approx(0.3),
        "succeeded",
    )
    with TestClient(create_server_app(coord_settings)) as dashboard:
        assert 'id="version-select"' not in dashboard.get("/", params={"stream": "tiny2"}).text

    bump(coord_settings.streams_dir, "tiny2", "test-2")
    two = client.post("/v1/admin/refreshes", json={"stream": "tiny2"}, headers=admin).json()
    assert (two["version"], len(two["runs"])) == ("test-2", 1) and two["id"] != one["id"]
    finish(sessions, two["runs"][0]["submission_id"], 0.2)
    assert timer.settle() == [two["id"]]
    newer = client.get(f"/v1/admin/refreshes/{two['id']}", headers=admin).json()["snapshot"]
    assert newer["version"] == "test-2" and newer["rows"][0]["mean_error"] == pytest.approx(0.2)
    assert client.get(f"/v1/admin/refreshes/{one['id']}", headers=admin).json()["snapshot"] == kept

    with TestClient(create_server_app(coord_settings)) as dashboard:
        page = dashboard.get("/", params={"stream": "tiny2", "version": "test-1"}).text
        assert 'id="version-select"' in page
        assert '<option value="test-1" selected>test-1</option>' in page
        assert '<option value="test-2" >test-2</option>' in page
        newest = dashboard.get("/", params={"stream": "tiny2", "version": "test-2"}).text
        assert '<option value="test-2" selected>test-2</option>' in newest


# --- the schedule -----------------------------------------------------------------------------


def test_a_due_refresh_is_started_by_one_scheduler_pass_and_not_the_next(kit, coord_settings, sessions):
    settings = kit.make_settings(
        coord_settings.database_url, coord_settings.data_dir, coord_settings.streams_dir, refresh_cron="0 3 * * *"
    )
    with transaction(sessions) as session:  # tiny2 has run here (a stored version); tiny3 has not
        ensure_stream_version(session, manifest=load_stream(str(settings.streams_dir / "tiny2.json")))
    bump(settings.streams_dir, "tiny2", "test-2")
    scheduler = Scheduler(settings, backend=SilentBackend(), sessions=sessions)
    first = scheduler.tick()
    with sessions() as session:
        (made,) = session.scalars(select(Refresh)).all()
        assert (made.stream_version.name, made.stream_version.version, made.trigger) == ("tiny2", "test-2", "schedule")
    assert first.refreshes == [made.id] and len(first.launched) == 1  # its baseline, launched at once
    second = scheduler.tick()
    assert second.refreshes == []
    assert not scheduler.refresh_timer.due(utcnow())
    assert scheduler.refresh_timer.due(utcnow() + timedelta(days=1))
    bump(settings.streams_dir, "tiny2", "test-3")  # a new version: still waits for the next fire
    assert scheduler.tick().refreshes == []
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Refresh)) == 1
        assert session.scalar(select(func.count()).select_from(StreamVersion)) == 2


def test_without_a_cron_the_scheduler_starts_no_refresh(kit, coord_settings, sessions):
    with transaction(sessions) as session:
        ensure_stream_version(session, manifest=load_stream(str(coord_settings.streams_dir / "tiny2.json")))
    scheduler = Scheduler(coord_settings, backend=SilentBackend(), sessions=sessions)
    assert scheduler.tick().refreshes == [] and not scheduler.refresh_timer.due(utcnow())
    assert kit.query(coord_settings.database_url, "SELECT count(*) FROM refreshes") == [(0,)]


def test_the_cli_refreshes_pending_streams_once(kit, coord_settings):
    env = {
        **os.environ,
        "NEVIS_DATABASE_URL": coord_settings.database_url,
        "NEVIS_DATA_DIR": str(coord_settings.data_dir),
        "NEVIS_STREAMS_DIR": str(coord_settings.streams_dir),
    }
    env.pop("NEVIS_REFRESH_STREAMS", None)
    run = subprocess.run(
        [str(kit.nevis), "refresh", "run", "--stream", "tiny3"], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert "of tiny3 test-1: queued 1 submission(s)" in run.stdout
    again = subprocess.run([str(kit.nevis), "refresh", "run"], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "nothing to refresh" in again.stdout, again.stdout + again.stderr
    bad = subprocess.run(
        [str(kit.nevis), "refresh", "run", "--stream", "nope"], env=env, capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 1 and "'nope' was not refreshed" in bad.stderr


# --- the admin routes refuse --------------------------------------------------------------------


def test_the_admin_routes_are_admin_only(shared_api):
    client, tokens = shared_api.client, shared_api.tokens
    for who in ("alice", "bob"):
        assert client.post("/v1/admin/refreshes", json={"stream": "tiny2"}, headers=tokens.auth(who)).status_code == 403
        assert client.get("/v1/admin/refreshes", headers=tokens.auth(who)).status_code == 403
        assert client.get("/v1/admin/refreshes/1", headers=tokens.auth(who)).status_code == 403
    assert client.post("/v1/admin/refreshes", json={"stream": "tiny2"}).status_code == 401
    assert client.get("/v1/admin/refreshes").status_code == 401


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "stream"),
        ({"stream": 5}, "stream"),
        ({"stream": None}, "stream"),
        ({"stream": "nope"}, "stream"),
        ({"stream": "../../etc/passwd"}, "stream"),
        ({"stream": "x" * 5000}, "stream"),
        ({"stream": "tiny2", "version": "9"}, "version"),
        ([], None),
    ],
)
def test_bad_refresh_bodies_are_422(shared_api, body, field):
    response = shared_api.client.post("/v1/admin/refreshes", json=body, headers=shared_api.tokens.auth("admin"))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    if field is not None:
        assert response.json()["field"] == field


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/v1/admin/refreshes?limit=0", 422),
        ("/v1/admin/refreshes?offset=-1", 422),
        ("/v1/admin/refreshes?stream=%00", 422),
        ("/v1/admin/refreshes?stream=a%20b", 422),
        ("/v1/admin/refreshes/abc", 422),
        ("/v1/admin/refreshes/0", 422),
        ("/v1/admin/refreshes/99999", 404),
    ],
)
def test_bad_refresh_reads_are_4xx(shared_api, path, code):
    assert shared_api.client.get(path, headers=shared_api.tokens.auth("admin")).status_code == code
    malformed = shared_api.client.post(
        "/v1/admin/refreshes",
        content=b"{not json",
        headers={**shared_api.tokens.auth("admin"), "content-type": "application/json"},
    )
    assert malformed.status_code == 422
