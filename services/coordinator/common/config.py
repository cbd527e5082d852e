"""The coordinator's settings: the core settings plus the knobs of the API and scheduler.

One object per process, built by the cached :func:`get_coordinator_settings` (never at
import time, so tests can swap it). Every knob is an ``NEVIS_*`` environment variable next to
its default here. Outside development (``NEVIS_ENVIRONMENT=production``) unsafe defaults are
refused: SQLite (one writer, no row locks for several replicas).

The knobs come in groups, one module each (scheduling, limits, refresh, images, backends);
:class:`CoordinatorSettings` composes them with the core settings and checks across groups here.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import model_validator

from services.coordinator.common.config_backends import BackendSettings
from services.coordinator.common.config_images import ImageSettings
from services.coordinator.common.config_limits import LimitSettings
from services.coordinator.common.config_refresh import RefreshSettings, refresh_budget_of
from services.coordinator.common.config_scheduling import SchedulingSettings
from services.coordinator.common.validation import ImagePolicy
from services.core.config import Settings, load_settings

# Variables the worker harness needs to reach the database and store; the backends pass
# them to the worker process (never to learner code: the runner blanks them there).
WORKER_SECRET_VARS = (
    "NEVIS_DATABASE_URL",
    "NEVIS_STORE_URL",
    "NEVIS_S3_ENDPOINT_URL",
    "NEVIS_DATA_DIR",
    "NEVIS_OFFLINE_DATA_DIR",
    "NEVIS_IMAGE_SIZE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "PGPASSWORD",
    "NEVIS_SPLIT_SALT",
)
# Coordinator knobs the worker reads (heartbeat, deadlines, retry policy, streams folder).
WORKER_KNOB_VARS = (
    "NEVIS_HEARTBEAT_INTERVAL_S",
    "NEVIS_HEARTBEAT_TIMEOUT_S",
    "NEVIS_TASK_DEADLINE_S",
    "NEVIS_MAX_ATTEMPTS",
    "NEVIS_BACKOFF_BASE_S",
    "NEVIS_BACKOFF_MAX_S",
    "NEVIS_STREAMS_DIR",
    "NEVIS_ENVIRONMENT",
    "NEVIS_BUNDLE_MAX_BYTES",
    "NEVIS_SANDBOX",
    "NEVIS_LEARNER_NODE_RESOURCE",  # learner actors on the learner nodes only (workers/trainer/learner_nodes.py)
    "NEVIS_WORKER_MAX_TASKS",
    # the learner hosts' caps and deadlines: a remote job's hosts keep this coordinator's
    "NEVIS_HOST_TMPFS_MB",
    "NEVIS_HOST_MEMORY_MB",
    "NEVIS_HOST_PIDS",
    "NEVIS_HOST_DECLARE_DEADLINE_S",
    "NEVIS_HOST_SILENCE_DEADLINE_S",
    # how a worker gets an image learner's files (workers/sandbox/images), and their caps
    "NEVIS_IMAGE_LEARNERS",
    "NEVIS_IMAGE_MAX_LAYERS",
    "NEVIS_IMAGE_MAX_BYTES",
    "NEVIS_IMAGE_MAX_FILES",
)


# Groups are listed last to first: pydantic orders the fields by the reversed MRO, so the core
# settings come first, then scheduling, limits, refresh, images and backends.
class CoordinatorSettings(BackendSettings, ImageSettings, RefreshSettings, LimitSettings, SchedulingSettings, Settings):
    """Core settings plus the coordinator's; see docs/coordinator.md for each variable."""

    @model_validator(mode="after")
    def _check_coordinator(self) -> CoordinatorSettings:
        if self.heartbeat_timeout_s < 2 * self.heartbeat_interval_s:
            raise ValueError(
                "NEVIS_HEARTBEAT_TIMEOUT_S must be at least twice NEVIS_HEARTBEAT_INTERVAL_S "
                f"({self.heartbeat_interval_s}); got {self.heartbeat_timeout_s}"
            )
        if self.environment == "production" and self.database_url.startswith("sqlite"):
            raise ValueError(
                "NEVIS_ENVIRONMENT=production needs PostgreSQL: set NEVIS_DATABASE_URL to "
                "postgresql+psycopg://... (SQLite has one writer and no row locks)"
            )
        if self.environment == "production" and self.sandbox != "bwrap":
            raise ValueError(
                "NEVIS_ENVIRONMENT=production needs NEVIS_SANDBOX=bwrap, spelled out: submitted "
                f"learners must run in bubblewrap, never by a default that can fall back (got {self.sandbox!r})"
            )
        if self.backoff_max_s < self.backoff_base_s:
            raise ValueError("NEVIS_BACKOFF_MAX_S must be >= NEVIS_BACKOFF_BASE_S")
        budget = refresh_budget_of(self.refresh_budget)
        if budget.trials > self.max_trials or budget.steps > self.max_steps:
            raise ValueError(
                "NEVIS_REFRESH_BUDGET must stay within NEVIS_MAX_TRIALS "
                f"({self.max_trials}) and NEVIS_MAX_STEPS ({self.max_steps})"
            )
        return self

    @property
    def image_policy(self) -> ImagePolicy:
        """Which learner images registrations may name."""
        registries = tuple(r.strip() for r in self.image_registries.split(",") if r.strip())
        digest, production = self.require_image_digest, self.environment == "production"
        return ImagePolicy(registries=registries, require_digest=production if digest is None else digest)

    @property
    def outbox(self) -> Path:
        """Where the kuberay backend writes rendered RayJob manifests."""
        return self.kuberay_outbox or self.data_dir / "kuberay"


@lru_cache(maxsize=1)
def get_coordinator_settings() -> CoordinatorSettings:
    """Read and validate the coordinator settings once per process.

    Raises:
        ConfigError: naming each bad variable and why.
    """
    return load_settings(CoordinatorSettings)


__all__ = ["WORKER_KNOB_VARS", "WORKER_SECRET_VARS", "CoordinatorSettings", "get_coordinator_settings"]
