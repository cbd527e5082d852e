"""The one interface every execution backend implements, and what it is given.

A backend starts the worker harness for one lease (``nevis worker run-task --submission S
--lease L``), reports what became of that job, and stops it. The worker itself writes
everything to the database (lease start, heartbeats, the task's commit, the lease's end), so
a backend that cannot see its jobs (``JobState.UNKNOWN``) is still safe: the reaper acts on
missed heartbeats and deadlines.
"""

from __future__ import annotations

import enum
import os
import uuid
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from services.coordinator.common.config import WORKER_KNOB_VARS, WORKER_SECRET_VARS, CoordinatorSettings
from services.coordinator.common.validation import ResourceRequest
from services.core.credentials import CREDENTIAL_VARS


class JobState(enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"  # the backend cannot tell (no cluster access, job forgotten)

    @property
    def ended(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED)


@dataclass(frozen=True)
class JobStatus:
    state: JobState
    message: str = ""


@dataclass(frozen=True)
class LaunchSpec:
    """Everything a backend needs to start the worker of one lease."""

    lease_id: int
    submission_id: int
    task_order: int
    attempt: int
    learner_name: str
    entrypoint: str
    image: str | None
    resources: ResourceRequest = field(default_factory=ResourceRequest)
    # Tells apart launches of coordinators that share a cluster but not a database.
    nonce: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    @property
    def job_name(self) -> str:
        """A name unique per launch, valid as a Ray job id and a Kubernetes name (< 64)."""
        return f"nevis-s{self.submission_id}-t{self.task_order}-a{self.attempt}-l{self.lease_id}-{self.nonce}"

    def worker_args(self) -> list[str]:
        """Arguments after the ``nevis`` command."""
        return ["worker", "run-task", "--submission", str(self.submission_id), "--lease", str(self.lease_id)]


@runtime_checkable
class Backend(Protocol):
    """Where workers run: ``local`` processes, a ``ray`` cluster, or ``kuberay`` RayJobs."""

    name: str

    def launch(self, spec: LaunchSpec) -> str:
        """Start the worker of ``spec``; returns the backend's job id."""
        ...

    def status(self, job_id: str) -> JobStatus:
        """What became of a job this backend (or an earlier instance of it) launched."""
        ...

    def cancel(self, job_id: str) -> None:
        """Stop a job; a job that ended already is not an error."""
        ...

    def reap(self) -> None:
        """Release what ended jobs still hold here (the local backend waits on its ended
        worker processes); called once per scheduler pass."""
        ...


def worker_env(settings: CoordinatorSettings) -> dict[str, str]:
    """The variables the worker harness needs: where the database and store are, and the
    knobs of :func:`worker_settings_env`. For workers on this machine (the ``local``
    backend); the worker moves the credentials out of its environment before it starts
    anything that runs learner code (:func:`workers.trainer.ray_env.hold_secrets`)."""
    env = {name: os.environ[name] for name in WORKER_SECRET_VARS if name in os.environ}
    env.update(
        NEVIS_DATABASE_URL=settings.database_url,
        NEVIS_STORE_URL=settings.store_url,
        NEVIS_DATA_DIR=str(settings.data_dir),
    )
    if settings.s3_endpoint_url:
        env["NEVIS_S3_ENDPOINT_URL"] = settings.s3_endpoint_url
    return {**env, **worker_settings_env(settings)}


def worker_settings_env(settings: CoordinatorSettings) -> dict[str, str]:
    """The coordinator knobs a worker runs with, and nothing secret: what remote backends put
    in a job's runtime environment (which the cluster shows to anyone who asks), beside
    ``NEVIS_SECRETS_PATH``, where the harness's node keeps the credentials."""
    env: dict[str, str] = {}
    for name in WORKER_KNOB_VARS:  # the values this coordinator runs with, not the defaults
        value = getattr(settings, name.removeprefix("NEVIS_").lower())
        if value is not None:
            env[name] = str(value)
    if env.get("NEVIS_SANDBOX") == "auto":  # resolved where the hosts start: never weakens a pod's bwrap
        del env["NEVIS_SANDBOX"]
    if settings.offline_data_dir is not None:
        env["NEVIS_OFFLINE_DATA_DIR"] = str(settings.offline_data_dir)
    if "image_size" in settings.model_fields_set:
        env["NEVIS_IMAGE_SIZE"] = str(settings.image_size)
    if "stored_scale" in settings.model_fields_set:  # workers prepare shards: same originals
        env["NEVIS_STORED_SCALE"] = str(settings.stored_scale)
    return {name: value for name, value in env.items() if name not in CREDENTIAL_VARS}


__all__ = ["Backend", "JobState", "JobStatus", "LaunchSpec", "worker_env", "worker_settings_env"]
