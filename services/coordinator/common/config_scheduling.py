"""Where and how tasks run: the environment, the backend, and the scheduler's slots, deadlines
and retry policy (``NEVIS_*`` variables; one group of :class:`~services.coordinator.common.config.CoordinatorSettings`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from services.coordinator.common.backend_registry import BACKENDS
from services.core.errors import unknown_name_message


class SchedulingSettings(BaseModel):
    """The environment, the backend and the scheduler's knobs (the checks across groups are the
    composed settings')."""

    environment: Literal["development", "production"] = Field(
        default="development", description="production refuses unsafe defaults."
    )
    backend: str = Field(default="local", description="Where tasks run: a name in BACKENDS.")
    streams_dir: Path | None = Field(
        default=None, description="Extra stream manifests (<name>.json) submitters may name."
    )
    # scheduler
    scheduler_slots: int = Field(default=2, ge=1, le=1000, description="Tasks one coordinator replica runs at once.")
    poll_interval_s: float = Field(default=1.0, gt=0, le=60)
    heartbeat_interval_s: float = Field(default=10.0, gt=0, le=600)
    heartbeat_timeout_s: float = Field(default=60.0, gt=0, le=86_400)
    start_timeout_s: float = Field(
        default=600.0, gt=0, le=86_400, description="A launched task must start within this."
    )
    task_deadline_s: float = Field(default=6 * 3600.0, gt=0, le=30 * 86_400)
    worker_max_tasks: int = Field(
        default=16,
        ge=1,
        le=10_000,
        description="Tasks of one submission a worker process runs in a row, its actors and "
        "learner hosts warm, while no other submission waits (1: a process per task).",
    )
    max_attempts: int = Field(default=3, ge=1, le=20, description="Launches per task.")
    backoff_base_s: float = Field(default=10.0, ge=0, le=3600)
    backoff_max_s: float = Field(default=600.0, ge=0, le=86_400)
    max_launch_failures: int = Field(
        default=20,
        ge=1,
        le=1000,
        description="Consecutive refused launches of one task (backend outage) before its "
        "submission fails; they back off like retries and spend none of NEVIS_MAX_ATTEMPTS.",
    )
    replica_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=60,
        pattern=r"^[^:\s]+$",
        description="This replica's stable name (default: the host name): its leases, and so "
        "its NEVIS_SCHEDULER_SLOTS, are counted under it, across restarts.",
    )
    cluster_slots: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="Tasks all replicas together run at once (unset: no cluster-wide cap).",
    )
    node_cpus: float | None = Field(
        default=None,
        gt=0,
        le=4096,
        description="CPUs of the cluster's largest worker node: a learner registered for more per task "
        "(its ranks run on one node) is refused, naming it (unset: not checked at registration).",
    )
    node_gpus: int | None = Field(
        default=None,
        ge=0,
        le=64,
        description="GPUs of the cluster's largest worker node, as NEVIS_NODE_CPUS (unset: not checked).",
    )

    @field_validator("backend")
    @classmethod
    def _check_backend(cls, value: str) -> str:
        if value not in BACKENDS:
            raise ValueError(
                unknown_name_message("backend", value, BACKENDS.names()) + " Set NEVIS_BACKEND to one of them."
            )
        return value


__all__ = ["SchedulingSettings"]
