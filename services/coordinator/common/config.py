"""The coordinator's settings: the core settings plus the knobs of the API and scheduler.

One object per process, built by the cached :func:`get_coordinator_settings` (never at
import time, so tests can swap it). Every knob is an ``NEVIS_*`` environment variable next to
its default here. Outside development (``NEVIS_ENVIRONMENT=production``) unsafe defaults are
refused: SQLite (one writer, no row locks for several replicas).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from services.coordinator.common.backend_registry import BACKENDS
from services.coordinator.common.cron import CronSchedule, check_cron
from services.coordinator.common.validation import ImagePolicy, parse_rate
from services.core import rulesets
from services.core.budget import RunBudget
from services.core.config import Settings, load_settings
from services.core.errors import BudgetError, UnknownNameError, unknown_name_message
from workers.sandbox.images.limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_FILES, DEFAULT_MAX_LAYERS, ImageLimits

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

BUILTIN_LEARNER = re.compile(r"[a-z][a-z0-9_]{0,99}")
"""A built-in learner's registry name (a refresh baseline; no ``module:factory``)."""


def split_list(value: str) -> list[str]:
    """The items of a comma-separated setting, stripped, empty ones dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]


def refresh_budget_of(value: str) -> RunBudget:
    """The baselines' refresh budget from NEVIS_REFRESH_BUDGET (empty: the default).

    Raises:
        ValueError: not a JSON object, or not a valid budget (naming the key).
    """
    if not value.strip():
        return RunBudget()
    try:
        doc = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"must be a JSON object of budget keys, e.g. '{{\"trials\": 2}}' ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError("must be a JSON object of budget keys, e.g. '{\"trials\": 2}'")  # noqa: TRY004
    try:
        return RunBudget(**doc)
    except BudgetError as exc:
        raise ValueError(f"is not a valid budget: {exc}") from None


class CoordinatorSettings(Settings):
    """Core settings plus the coordinator's; see docs/coordinator.md for each variable."""

    environment: Literal["development", "production"] = Field(
        default="development", description="production refuses unsafe defaults."
    )
    backend: str = Field(default="local", description="Where tasks run: a name in BACKENDS.")
    streams_dir: Path | None = Field(
        default=None, description="Extra stream manifests (<name>.json) submitters may name."
    )
    # Scheduler
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
    # Quotas and limits (per user; a user row may override the quotas)
    quota_concurrent: int = Field(default=2, ge=0, le=10_000)
    quota_daily: int = Field(default=20, ge=0, le=1_000_000)
    meta_test_quota: int = Field(
        default=3,
        ge=0,
        le=1_000_000,
        description="Meta-test submissions one user may make of one learner on one stream "
        "version within NEVIS_META_TEST_QUOTA_DAYS (0: none); one that never started a task "
        "(refused, or cancelled or failed before any ran) does not count. Meta-train is "
        "unlimited here; local `nevis run` is never limited.",
    )
    meta_test_quota_days: float = Field(
        default=30.0,
        gt=0,
        le=3660,
        description="The window of NEVIS_META_TEST_QUOTA, in days: a counted meta-test "
        "submission stops counting this long after it was created.",
    )
    meta_test_ruleset_quota: int = Field(
        default=10,
        ge=0,
        le=1_000_000,
        description="Meta-test submissions one user may make under one ruleset (any learner, any "
        "stream) within NEVIS_META_TEST_RULESET_QUOTA_DAYS (0: none); counted as "
        "NEVIS_META_TEST_QUOTA counts. Meta-train is not limited.",
    )
    meta_test_ruleset_quota_days: float = Field(
        default=7.0, gt=0, le=3660, description="The window of NEVIS_META_TEST_RULESET_QUOTA, in days."
    )
    retired_streams: str = Field(
        default="",
        max_length=10_000,
        description="Retired stream versions (comma-separated name@version) whose test images may "
        "be public: their meta-test prediction-job logs are returned to owners (withheld otherwise).",
    )
    bundle_max_bytes: int = Field(default=50 * 1024 * 1024, ge=1024, le=2 * 1024**3)
    max_json_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="Largest request body outside uploads (JSON); larger ones are a 413.",
    )
    token_default_days: int = Field(
        default=90,
        ge=1,
        le=366,
        description="Lifetime of an API token minted without an expiry (API expires_at, CLI --expires-in-days).",
    )
    max_tokens_per_user: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="Live (unrevoked, unexpired) API tokens one user may hold; minting another "
        "is a 409 naming this cap.",
    )
    write_rate: str = Field(
        default="120/minute;2000/hour",
        max_length=200,
        description="Writes (POST, PUT, PATCH, DELETE) one user may make, per replica, e.g. "
        "'120/minute;2000/hour' (without a valid token: one client address); more are a 429 "
        "with Retry-After.",
    )
    dashboard_public: bool = Field(
        default=True,
        description="The leaderboard and dashboard are readable without a token "
        "(false: every page and the leaderboard API need one).",
    )
    leaderboard_code: Literal["any", "public"] = Field(
        default="any",
        description="What the leaderboard ranks by default: every row (any), or only rows "
        "whose code is public (public: a baseline, or a code_url given; docs/isolation.md, 'Public data'). "
        "Readers may ask for the other with ?code=.",
    )
    # Benchmark refreshes (services/coordinator/refresh; docs/operators.md, "Benchmark refreshes")
    refresh_cron: str = Field(
        default="",
        max_length=200,
        description="When the scheduler starts due refreshes: a 5-field cron expression in UTC "
        "(e.g. '0 3 * * *') or a nickname such as '@daily'; empty: never (refresh with "
        "POST /v1/admin/refreshes, `nevis refresh run` or the chart's CronJob).",
    )
    refresh_baselines: str = Field(
        default="indep",
        max_length=2000,
        description="Comma-separated built-in learners a refresh re-runs on a new stream "
        "version, e.g. 'indep,ft_prev'; empty: none. The default is the paper's Indep (the "
        "ResNet-34, a GPU per trial where the cluster has one): a refresh exists for the paper's "
        "numbers. The '_small' names (e.g. 'indep_small') are fast learners for smoke runs and "
        "tests, not paper baselines; pt and pt_ft need a checkpoint and cannot be refreshed. "
        "'name@ruleset' runs it under that ruleset (docs/rules.md), e.g. "
        "'indep,indep@budget-1e15,indep@self-tuning': a row on each ruleset's board.",
    )
    refresh_budget: str = Field(
        default="",
        max_length=4000,
        description="The baselines' budget in refresh runs, as JSON (e.g. '{\"trials\": 2}'); "
        "empty: the default budget. Pinned submissions keep their own.",
    )
    refresh_streams: str = Field(
        default="",
        max_length=4000,
        description="Comma-separated streams that scheduled refreshes (and `nevis refresh run` "
        "without --stream) look at; empty: every stream that has a stored version here.",
    )
    refresh_owner: str = Field(
        default="refresh",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
        description="The user that owns the baselines' refresh runs (made, role submitter, on first use).",
    )
    # Learner images
    image_registries: str = Field(
        default="",
        max_length=4000,
        description="Comma-separated registries (or registry/path prefixes) learner images may "
        "come from, e.g. 'ghcr.io/my-org,registry.lab:5000'; empty: any.",
    )
    require_image_digest: bool | None = Field(
        default=None, description="Learner images must be pinned by digest (default: in production only)."
    )
    image_learners: Literal["unpack", "installed"] = Field(
        default="unpack",
        description="What a learner image is. 'unpack': files for the learner "
        "sandbox (registration resolves it to a digest with podman, unpacks it under "
        "<data dir>/images and checks the entry point's module is in it; workers unpack that "
        "digest and learner hosts import from its /opt/learner and site-packages). "
        "'installed': a label only, for an operator's own deployments whose nodes run the "
        "learner's installation already (its code comes from the worker's PYTHONPATH).",
    )
    image_max_layers: int = Field(
        default=DEFAULT_MAX_LAYERS, ge=1, le=1000, description="Most layers a learner image may have."
    )
    image_max_bytes: int = Field(
        default=DEFAULT_MAX_BYTES, ge=1, description="Most bytes a learner image may unpack to."
    )
    image_max_files: int = Field(
        default=DEFAULT_MAX_FILES, ge=1, description="Most files (layer entries) a learner image may hold."
    )
    max_trials: int = Field(default=64, ge=1, le=10_000)
    max_steps: int = Field(default=1_000_000, ge=1, le=10_000_000)
    # Backends
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
        description="kuberay: image of learners registered without one.",
    )
    kuberay_harness_image: str = Field(
        default="ghcr.io/nevis-service/nevis-worker:0.1.0",
        description="kuberay: the service's own image, run by the head pod (the worker harness, "
        "which holds the credentials); learner images run in worker pods only.",
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

    @field_validator("write_rate")
    @classmethod
    def _check_write_rate(cls, value: str) -> str:
        parse_rate(value)
        return value

    @field_validator("refresh_cron")
    @classmethod
    def _check_refresh_cron(cls, value: str) -> str:
        return check_cron(value) if value.strip() else ""

    @field_validator("refresh_baselines")
    @classmethod
    def _check_refresh_baselines(cls, value: str) -> str:
        for entry in split_list(value):
            name, _, ruleset = entry.partition("@")
            if not BUILTIN_LEARNER.fullmatch(name):
                raise ValueError(
                    f"must list built-in learner names (lower case, digits, '_'), "
                    f"comma-separated, e.g. 'indep,ft_prev'. Got {name!r} instead."
                )
            if ruleset:
                try:
                    rulesets.ruleset(ruleset)
                except UnknownNameError as exc:
                    raise ValueError(f"names an unknown ruleset in {entry!r}: {exc}") from None
        return value

    @field_validator("refresh_budget")
    @classmethod
    def _check_refresh_budget(cls, value: str) -> str:
        refresh_budget_of(value)
        return value

    @field_validator("backend")
    @classmethod
    def _check_backend(cls, value: str) -> str:
        if value not in BACKENDS:
            raise ValueError(
                unknown_name_message("backend", value, BACKENDS.names()) + " Set NEVIS_BACKEND to one of them."
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _remote_worker_command(cls, data: object) -> object:
        """ray and kuberay run ``nevis`` on their nodes unless NEVIS_WORKER_COMMAND says else."""
        if isinstance(data, dict) and data.get("backend", "local") != "local" and not data.get("worker_command"):
            return {**data, "worker_command": "nevis"}
        return data

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
    def retired_stream_versions(self) -> frozenset[tuple[str, str]]:
        """NEVIS_RETIRED_STREAMS as (name, version) pairs."""
        return frozenset(tuple(item.split("@", 1)) for item in split_list(self.retired_streams) if "@" in item)

    @property
    def image_policy(self) -> ImagePolicy:
        """Which learner images registrations may name."""
        registries = tuple(r.strip() for r in self.image_registries.split(",") if r.strip())
        digest, production = self.require_image_digest, self.environment == "production"
        return ImagePolicy(registries=registries, require_digest=production if digest is None else digest)

    @property
    def image_limits(self) -> ImageLimits:
        """The caps on one learner image (NEVIS_IMAGE_MAX_LAYERS, _BYTES, _FILES)."""
        return ImageLimits(
            max_layers=self.image_max_layers, max_bytes=self.image_max_bytes, max_files=self.image_max_files
        )

    @property
    def refresh_schedule(self) -> CronSchedule | None:
        """The schedule of refreshes (NEVIS_REFRESH_CRON), or None when it is off."""
        return CronSchedule.parse(self.refresh_cron) if self.refresh_cron else None

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


__all__ = [
    "BUILTIN_LEARNER",
    "WORKER_KNOB_VARS",
    "WORKER_SECRET_VARS",
    "CoordinatorSettings",
    "get_coordinator_settings",
    "refresh_budget_of",
    "split_list",
]
