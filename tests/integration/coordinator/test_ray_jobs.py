"""The ``ray`` backend against a real local Ray head: each task is a Ray job submitted through
the Jobs API; the worker harness inside it reaches the database, learner code does not."""

from __future__ import annotations

import json
import pickle
import re
import time

import pytest
from ray.job_submission import JobSubmissionClient
from sqlalchemy import select

from services.coordinator.backends.ray_jobs import RayJobsBackend
from services.coordinator.common.validation import ResourceRequest
from services.coordinator.crud import learners, submission_create, users
from services.coordinator.scheduler.loop import Scheduler
from services.core.budget import RunBudget
from services.core.errors import ConfigError
from services.store.db import sessions_on, transaction
from services.store.db.models import Submission, TaskRun
from services.store.db.models_coordinator import TaskLease
from services.store.objects import open_store

pytestmark = [pytest.mark.postgres, pytest.mark.parametrize("database_url", ["postgres"], indirect=True)]


def test_a_submission_runs_as_ray_jobs_and_learners_never_see_credentials(coord_settings, ray_head, kit, tmp_path):
    kit.write_stream(coord_settings.streams_dir, "tiny1", tasks=1)
    secrets = tmp_path / "worker-secrets"  # as a mounted Secret: one file per name
    secrets.mkdir()
    for name, value in {
        "NEVIS_DATABASE_URL": coord_settings.database_url,
        "NEVIS_STORE_URL": coord_settings.store_url,
        "NEVIS_DATA_DIR": str(coord_settings.data_dir),
    }.items():
        (secrets / name).write_text(value + "\n")
    settings = coord_settings.model_copy(
        update={"backend": "ray", "ray_address": ray_head.dashboard_url, "ray_secrets_path": str(secrets)}
    )
    backend = RayJobsBackend(settings)
    sessions = sessions_on(settings.database_url)
    store = open_store(settings.store_url)
    bundle = kit.learner_bundle(tmp_path)
    info = store.put_file(f"learners/bundles/test/{bundle.name}", bundle)
    with transaction(sessions) as session:
        user = users.create_user(session, name="alice", role="submitter")
        owned = learners.create_learner(
            session,
            owner=user,
            name="cheater",
            entrypoint="nevis_test_learners:cheater",
            image=None,
            resources=ResourceRequest(),
            bundle_key=info.key,
            bundle_sha256=info.sha256,
            bundle_size_bytes=info.size,
        )
        request = submission_create.SubmissionRequest(
            learner_id=owned.learner.id, stream="tiny1", phase="meta_test", budget=RunBudget(trials=1, steps=1)
        )
        sub_id = submission_create.create_submission(session, settings=settings, user=user, request=request)[0].id

    scheduler = Scheduler(settings, backend=backend, sessions=sessions)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        scheduler.tick()
        with sessions() as session:
            done = session.get(Submission, sub_id).status not in ("queued", "running") and not session.scalar(
                select(TaskLease.id).where(TaskLease.status.in_(("launching", "launched", "running")))
            )
        if done:
            break
        time.sleep(1)
    with sessions() as session:
        submission = session.get(Submission, sub_id)
        lease = session.scalar(select(TaskLease))
        state_key = session.scalar(select(TaskRun.learner_state_key))
    client = JobSubmissionClient(ray_head.dashboard_url)
    kit.wait_for(
        lambda: client.get_job_status(lease.job_id).is_terminal(),
        timeout_s=60,
        what="the job's driver to exit after ending its lease",
    )
    job = client.get_job_info(lease.job_id)
    assert submission.status == "succeeded", (submission.error, client.get_job_logs(lease.job_id)[-3000:])
    assert (lease.status, lease.backend) == ("succeeded", "ray")
    assert re.fullmatch(rf"nevis-s{sub_id}-t1-a1-l{lease.id}-[0-9a-f]{{6}}", lease.job_id)
    assert (
        str(job.status) in ("SUCCEEDED", "JobStatus.SUCCEEDED")
        and backend.status(lease.job_id).state.value == "succeeded"
    )
    assert job.metadata["nevis.submission"] == str(sub_id)
    shown = json.dumps(job.runtime_env)  # cluster metadata: no credential, only where they are
    assert job.runtime_env["env_vars"]["NEVIS_SECRETS_PATH"] == str(secrets)
    assert settings.database_url not in shown and "NEVIS_DATABASE_URL" not in shown
    assert str(settings.data_dir) not in shown.replace(str(secrets), "")
    cheats = pickle.loads(store.get_bytes(state_key))["cheats"]
    seen = " ".join(cheats[0]["creds"].values())
    assert settings.database_url not in seen and str(settings.data_dir) not in seen
    assert cheats[0]["creds"] == {"NEVIS_DATABASE_URL": "", "NEVIS_STORE_URL": "", "NEVIS_DATA_DIR": ""}
    machine = cheats[0]["machine"]  # the learner host ran sandboxed on the cluster's node
    assert machine["env_secrets"] == [] and machine["foreign_environs_with_secrets"] == []
    assert machine["visible_pids"] <= 3 and machine["connected"] == []


def test_the_ray_backend_needs_a_jobs_api_address(coord_settings):
    with pytest.raises(ConfigError, match="http://ray-head:8265"):
        RayJobsBackend(coord_settings.model_copy(update={"ray_address": "127.0.0.1:6379", "ray_secrets_path": "/x"}))


def test_the_ray_backend_needs_a_secrets_path_and_sends_no_credential(coord_settings, monkeypatch):
    with pytest.raises(ConfigError, match="NEVIS_RAY_SECRETS_PATH"):
        RayJobsBackend(coord_settings.model_copy(update={"ray_address": "http://head:8265"}))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-value")
    monkeypatch.setenv("PGPASSWORD", "pg-secret-value")
    backend = RayJobsBackend(
        coord_settings.model_copy(
            update={
                "ray_address": "http://head:8265",
                "ray_secrets_path": "/etc/nevis/worker.env",
                "s3_endpoint_url": "http://minio:9000",
            }
        )
    )
    from services.coordinator.backends.base import LaunchSpec

    env = backend.runtime_env(
        LaunchSpec(lease_id=1, submission_id=1, task_order=1, attempt=1, learner_name="x", entrypoint="m:f", image=None)
    )["env_vars"]
    shown = json.dumps(env)
    for secret in ("aws-secret-value", "pg-secret-value", coord_settings.database_url, "minio"):
        assert secret not in shown
    assert env["NEVIS_SECRETS_PATH"] == "/etc/nevis/worker.env"
    assert env["NEVIS_HEARTBEAT_INTERVAL_S"] == str(coord_settings.heartbeat_interval_s)


def test_a_failing_job_is_reported_as_failed(coord_settings, ray_head):
    settings = coord_settings.model_copy(
        update={"ray_address": ray_head.dashboard_url, "ray_secrets_path": "/nonexistent", "worker_command": "false"}
    )
    backend = RayJobsBackend(settings)
    from services.coordinator.backends.base import LaunchSpec

    job_id = backend.launch(
        LaunchSpec(lease_id=1, submission_id=1, task_order=1, attempt=1, learner_name="x", entrypoint="m:f", image=None)
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not backend.status(job_id).state.ended:
        time.sleep(0.5)
    assert backend.status(job_id).state.value == "failed"
    backend.cancel(job_id)  # stopping an ended job is not an error
