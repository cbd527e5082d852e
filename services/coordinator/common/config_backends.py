"""The backends' knobs: the worker command, the ray secrets path and the kuberay namespace,
images, Secret, template and outbox (one group of
:class:`~services.coordinator.common.config.CoordinatorSettings`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, model_validator


class BackendSettings(BaseModel):
    """How the ray and kuberay backends reach their clusters (the local backend needs none)."""

    worker_command: str | None = Field(
        default=None,
        description="Override of the worker's nevis command. Unset: local runs "
        "this installation's own (the server's interpreter); ray and kuberay run `nevis`.",
    )
    ray_secrets_path: str | None = Field(
        default=None,
        max_length=4096,
        description="ray: path on the Ray head node of the worker harness's credentials (a "
        "NAME=value file, or a folder with one file per name as a mounted Secret). Jobs carry "
        "this path, never a credential: a job's runtime env is visible to the whole cluster.",
    )
    kuberay_namespace: str = Field(default="nevis")
    kuberay_worker_image: str = Field(
        default="ghcr.io/nevis-service/nevis-worker:0.1.0",
        description="kuberay: the image every learner pod runs (the service's worker image); a "
        "learner image is never a pod's image, only a read-only image volume of the learner pods.",
    )
    kuberay_harness_image: str = Field(
        default="ghcr.io/nevis-service/nevis-worker:0.1.0",
        description="kuberay: the service's own image, run by the head pod (the worker harness, "
        "which holds the credentials); learner images are never mounted there.",
    )
    kuberay_secret_name: str = Field(
        default="nevis-worker-env",
        description="kuberay: existing Secret with the harness's NEVIS_* credentials, mounted "
        "as files into head pods only.",
    )
    kuberay_operator_namespace: str = Field(
        default="kuberay-system",
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        max_length=63,
        description="kuberay: namespace of the KubeRay operator, the one allowed to reach a "
        "head's dashboard besides the job's submitter.",
    )
    kuberay_rayjob_template: Path | None = Field(
        default=None,
        description="kuberay: folder with the chart's RayJob template (rayjob.yaml, gpu.yaml), "
        "as the chart mounts it; default the chart's default rendering, shipped with the service.",
    )
    kuberay_outbox: Path | None = Field(
        default=None, description="kuberay: folder for rendered RayJobs (default data_dir)."
    )
    kubectl: str | None = Field(default=None, description="kuberay: kubectl to apply RayJobs.")

    @model_validator(mode="before")
    @classmethod
    def _remote_worker_command(cls, data: object) -> object:
        """ray and kuberay run ``nevis`` on their nodes unless NEVIS_WORKER_COMMAND says else."""
        if isinstance(data, dict) and data.get("backend", "local") != "local" and not data.get("worker_command"):
            return {**data, "worker_command": "nevis"}
        return data


__all__ = ["BackendSettings"]
