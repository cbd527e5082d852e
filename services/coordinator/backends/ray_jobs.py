"""The ``ray`` backend: each task's worker is a Ray job on an existing cluster.

Jobs go through the Ray Jobs API (``JobSubmissionClient``) at ``NEVIS_RAY_ADDRESS`` (the
dashboard address, e.g. ``http://head:8265``). A job's runtime environment is cluster
metadata (the dashboard and ``ray list jobs`` show it), so it carries no credential: only the
coordinator's knobs, ``NEVIS_SECRETS_PATH`` (where the head node keeps the harness's database
and store settings, ``NEVIS_RAY_SECRETS_PATH``). A learner's container image is never the job's
``image_uri``: the harness runs in the service's own installation and unpacks the image as files
for its sandboxed learner hosts (:mod:`workers.sandbox.images`). The job's driver, the worker harness, runs on the head node (Ray runs
job entrypoints there) and reads that path; learner code runs in sandboxes that do not mount
it, and the run's storage actor is pinned to the driver's node.
``RAY_OVERRIDE_JOB_RUNTIME_ENV=1`` lets the runner's narrower environment win over the job's.
"""

from __future__ import annotations

import shlex
from typing import Any

from services.coordinator.backends.base import JobState, JobStatus, LaunchSpec, worker_settings_env
from services.coordinator.common.config import CoordinatorSettings
from services.core.credentials import SECRETS_PATH_VAR
from services.core.errors import ConfigError

_STATES = {
    "PENDING": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "SUCCEEDED": JobState.SUCCEEDED,
    "FAILED": JobState.FAILED,
    "STOPPED": JobState.FAILED,
}


class RayJobsBackend:
    """Ray jobs on the cluster whose dashboard is at ``NEVIS_RAY_ADDRESS``."""

    name = "ray"

    def __init__(self, settings: CoordinatorSettings) -> None:
        address = settings.ray_address or ""
        if not address.startswith(("http://", "https://")):
            raise ConfigError(
                "NEVIS_BACKEND=ray needs NEVIS_RAY_ADDRESS set to the Ray dashboard (Jobs API) "
                f"address, e.g. http://ray-head:8265. Got {address!r} instead."
            )
        if not settings.ray_secrets_path:
            raise ConfigError(
                "NEVIS_BACKEND=ray needs NEVIS_RAY_SECRETS_PATH: the path, on the Ray head node, "
                "of a NAME=value file (or a folder of one file per name) with the worker's "
                "NEVIS_DATABASE_URL and store settings. Jobs carry the path, never a credential."
            )
        self.settings = settings
        self.address = address
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            from ray.job_submission import JobSubmissionClient  # noqa: PLC0415 - heavy import

            self._client = JobSubmissionClient(self.address)
        return self._client

    def runtime_env(self, spec: LaunchSpec) -> dict[str, Any]:
        env = {
            **worker_settings_env(self.settings),
            "NEVIS_RAY_ADDRESS": "",
            "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1",
            SECRETS_PATH_VAR: str(self.settings.ray_secrets_path),
        }
        return {"env_vars": env}  # never image_uri: a learner image is files, not a Ray member

    def entrypoint(self, spec: LaunchSpec) -> str:
        return shlex.join([*shlex.split(self.settings.worker_command), *spec.worker_args()])

    def launch(self, spec: LaunchSpec) -> str:
        return self.client.submit_job(
            entrypoint=self.entrypoint(spec),
            submission_id=spec.job_name,
            runtime_env=self.runtime_env(spec),
            metadata={
                "nevis.submission": str(spec.submission_id),
                "nevis.task_order": str(spec.task_order),
                "nevis.lease": str(spec.lease_id),
                "nevis.learner": spec.learner_name,
            },
        )

    def status(self, job_id: str) -> JobStatus:
        try:
            info = self.client.get_job_info(job_id)
        except Exception as exc:  # noqa: BLE001 - an unreachable cluster is not a verdict
            return JobStatus(JobState.UNKNOWN, f"cannot ask the Ray Jobs API: {exc}")
        state = _STATES.get(str(getattr(info.status, "value", info.status)), JobState.UNKNOWN)
        return JobStatus(state, info.message or "")

    def reap(self) -> None:
        """Nothing to release here: the cluster cleans up its own jobs."""

    def cancel(self, job_id: str) -> None:
        try:
            self.client.stop_job(job_id)
        except Exception:  # noqa: BLE001 - ended or unknown jobs need no stopping
            pass


__all__ = ["RayJobsBackend"]
