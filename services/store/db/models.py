"""The relational schema: every figure the service reports traces back to rows here.

Contract:
- The schema is created and changed only by the Alembic migrations in
  ``services/store/migrations``; the test suite checks that they match these models.
- Statuses and other closed vocabularies are strings guarded by CHECK constraints; the
  allowed values are the tuples below, which the rest of the code imports.
- Timestamps are aware UTC datetimes (:class:`~services.store.db.types.UTCDateTime`).
- ``task_results`` holds at most one row per (submission, stream task), and that row must
  point at a task run and a trial of the same submission and task, so a result can never
  be counted twice nor borrowed from elsewhere.
- ``events`` is append-only; database triggers refuse UPDATE and DELETE.
- Deleting a stream version or dataset removes its tasks or shards; deleting a submission
  removes its runs, trials, checkpoints and results, but is refused while it has events
  (the audit trail wins). Learners and stream versions in use cannot be deleted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from services.store.db.base import (
    KEY_LENGTH,
    NOW,
    Base,
    created_column,
    named_check,
    non_negative,
    one_of,
    sha256_check,
)
from services.store.db.models_streams import PHASES, SHARD_SPLITS, TASK_KINDS, Dataset, Shard, StreamTask, StreamVersion
from services.store.db.types import JSONDoc, UTCDateTime, utcnow

# "stopped": ended by its own FLOP or wall-time cap (budget.flop_cap, budget.wall_cap_s) after
# the task that reached it, as asked; terminal like succeeded, and no failure.
SUBMISSION_STATUSES: tuple[str, ...] = ("queued", "running", "succeeded", "failed", "stopped", "cancelled")
# Who may read a submission's row and details: everyone, or its owner and admins only.
VISIBILITIES: tuple[str, ...] = ("public", "private")
CODE_URL_MAX = 500  # submissions.code_url: an https URL where the learner's code is public
TASK_RUN_STATUSES: tuple[str, ...] = ("pending", "running", "succeeded", "failed", "timed_out", "cancelled")
# At most one task run per submission may be in one of these (causal order).
ACTIVE_TASK_RUN_STATUSES: tuple[str, ...] = ("pending", "running")
# "stopped" is a trial ended early by the search scheduler, which is not a failure.
TRIAL_STATUSES: tuple[str, ...] = ("pending", "running", "succeeded", "failed", "stopped", "cancelled")
FLOPS_SOURCES: tuple[str, ...] = ("measured", "reported", "floor", "near_floor")
RESULT_SPLITS: tuple[str, ...] = ("test", "dev_test")
RESULT_METRICS: tuple[str, ...] = ("accuracy", "map")


# A learner: an image with an entrypoint, an uploaded bundle, or an installed entry point.
class Learner(Base):
    __tablename__ = "learners"
    __table_args__ = (
        sha256_check("bundle_sha256"),
        named_check(
            "(bundle_key IS NULL AND bundle_sha256 IS NULL) OR (bundle_key IS NOT NULL AND bundle_sha256 IS NOT NULL)",
            "bundle_checksummed",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    image_ref: Mapped[str | None] = mapped_column(String(500))
    entrypoint: Mapped[str] = mapped_column(String(500))
    bundle_key: Mapped[str | None] = mapped_column(String(KEY_LENGTH))
    bundle_sha256: Mapped[str | None] = mapped_column(String(64))
    resources: Mapped[dict[str, Any]] = mapped_column(JSONDoc, default=dict)
    created_at: Mapped[datetime] = created_column()


# One learner on one stream version and phase; ``cursor`` is the next task order to run.
class Submission(Base):
    __tablename__ = "submissions"
    __table_args__ = (
        named_check(one_of("phase", PHASES), "phase"),
        named_check(one_of("status", SUBMISSION_STATUSES), "status"),
        named_check("cursor >= 1", "cursor_positive"),
        named_check("image_size >= 8 AND image_size <= 512", "image_size_range"),
        named_check(one_of("visibility", VISIBILITIES), "visibility"),
        *non_negative("cflop_pretraining"),
        Index(None, "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="RESTRICT"), index=True)
    stream_version_id: Mapped[int] = mapped_column(ForeignKey("stream_versions.id", ondelete="RESTRICT"), index=True)
    phase: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="queued", server_default="queued")
    budget: Mapped[dict[str, Any]] = mapped_column(JSONDoc, default=dict)
    # The stored resolution of the stream's shards this submission trains and is scored on.
    image_size: Mapped[int] = mapped_column(Integer)
    cursor: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow, server_default=NOW)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    visibility: Mapped[str] = mapped_column(String(16), default="public", server_default="public")
    pretrained_key: Mapped[str | None] = mapped_column(String(KEY_LENGTH))  # PT / PT+FT's start
    # cFLOP of the run that made a self-pretrained checkpoint (`nevis pretrain`); shown, not charged
    cflop_pretraining: Mapped[float | None] = mapped_column(Double)
    # The owner asks for this run to be repeated on every new version of its stream (a refresh).
    pinned: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    # Where the learner's code is public (an https URL its submitter gave); NULL: not declared public.
    code_url: Mapped[str | None] = mapped_column(String(CODE_URL_MAX))
    # The ruleset it competes under (services.core.rulesets); each has its own leaderboard.
    ruleset: Mapped[str] = mapped_column(String(48), default="open", server_default="open", index=True)

    learner: Mapped[Learner] = relationship()
    stream_version: Mapped[StreamVersion] = relationship()
    task_runs: Mapped[list[TaskRun]] = relationship(back_populates="submission", passive_deletes=True)


# One attempt at one task of a submission; the reaper acts on ``deadline_at``.
class TaskRun(Base):
    __tablename__ = "task_runs"
    __table_args__ = (
        UniqueConstraint("submission_id", "stream_task_id", "attempt"),
        # Target of task_results' composite key: a result must use a run of its own task.
        UniqueConstraint("id", "submission_id", "stream_task_id"),
        named_check("attempt >= 1", "attempt_positive"),
        named_check(one_of("status", TASK_RUN_STATUSES), "status"),
        *non_negative("flops", "retried_flops", "wall_time_s", "peak_memory_bytes"),
        Index(None, "status", "deadline_at"),
        Index(
            "uq_task_runs_one_active",
            "submission_id",
            unique=True,
            sqlite_where=text(one_of("status", ACTIVE_TASK_RUN_STATUSES)),
            postgresql_where=text(one_of("status", ACTIVE_TASK_RUN_STATUSES)),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    stream_task_id: Mapped[int] = mapped_column(ForeignKey("stream_tasks.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    status: Mapped[str] = mapped_column(String(16), default="pending", server_default="pending")
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    deadline_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    flops: Mapped[float] = mapped_column(Double, default=0.0, server_default=text("0"))
    retried_flops: Mapped[float] = mapped_column(Double, default=0.0, server_default=text("0"))
    wall_time_s: Mapped[float | None] = mapped_column(Double)
    peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    learner_state_key: Mapped[str | None] = mapped_column(String(KEY_LENGTH))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = created_column()

    submission: Mapped[Submission] = relationship(back_populates="task_runs")
    stream_task: Mapped[StreamTask] = relationship()
    trials: Mapped[list[Trial]] = relationship(
        back_populates="task_run", order_by="Trial.trial_index", passive_deletes=True
    )


# One hyper-parameter trial of a task run, with the FLOPs it spent and how they were counted.
GPU_ENERGY_MEASURED = ("gpu_seconds", "gpu_peak_memory_bytes", "energy_kwh")


class GpuEnergyColumns:
    """GPU time, peak GPU memory and energy, beside cFLOP (revision 0027; issue 46). NULL: not
    measured, and ``gpu_note`` says why for the GPU figures (no GPU, no NVML); never 0 for that.
    ``energy_source``: ``rapl`` (the node's RAPL counters) or ``estimate`` (CPU-seconds × a stated
    wattage, docs/isolation.md), with ``+nvml`` where the GPUs' energy is in."""

    gpu_seconds: Mapped[float | None] = mapped_column(Double)
    gpu_peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    gpu_note: Mapped[str | None] = mapped_column(Text)
    energy_kwh: Mapped[float | None] = mapped_column(Double)
    energy_source: Mapped[str | None] = mapped_column(String(16))


class Trial(GpuEnergyColumns, Base):
    __tablename__ = "trials"
    __table_args__ = (
        UniqueConstraint("task_run_id", "trial_index"),
        # Target of task_results' composite key: the best trial must belong to the run.
        UniqueConstraint("id", "task_run_id"),
        named_check(one_of("status", TRIAL_STATUSES), "status"),
        named_check(one_of("flops_source", FLOPS_SOURCES), "flops_source"),
        named_check("dev_error IS NULL OR (dev_error >= 0 AND dev_error <= 1)", "dev_error_range"),
        *non_negative(
            "trial_index", "flops", "wall_time_s", "peak_memory_bytes", "cpu_seconds", "flops_floor", "flops_paper"
        ),
        *non_negative(*GPU_ENERGY_MEASURED),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_run_id: Mapped[int] = mapped_column(ForeignKey("task_runs.id", ondelete="CASCADE"))
    trial_index: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(BigInteger)
    config: Mapped[dict[str, Any]] = mapped_column(JSONDoc, default=dict)
    status: Mapped[str] = mapped_column(String(16), default="pending", server_default="pending")
    flops: Mapped[float] = mapped_column(Double, default=0.0, server_default=text("0"))
    flops_source: Mapped[str] = mapped_column(String(16), default="measured", server_default="measured")
    dev_error: Mapped[float | None] = mapped_column(Double)
    wall_time_s: Mapped[float | None] = mapped_column(Double)
    peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    # The learner host's CPU time as the harness measured it, and the FLOP floor it implies
    # (NULL: not measured, e.g. trials stored before revision 0013).
    cpu_seconds: Mapped[float | None] = mapped_column(Double)
    flops_floor: Mapped[float | None] = mapped_column(Double)
    flops_paper: Mapped[float | None] = mapped_column(Double)  # its training updates (NEVIS'22's count)
    # cpu_seconds is wall time × declared CPUs: no usage reading could be had (revision 0024)
    cpu_estimated: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    error_text: Mapped[str | None] = mapped_column(Text)
    traceback: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = created_column()
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    task_run: Mapped[TaskRun] = relationship(back_populates="trials")
    checkpoints: Mapped[list[Checkpoint]] = relationship(
        back_populates="trial", order_by="Checkpoint.step", passive_deletes=True
    )


# A saved model state of a trial at one training step, for the probe pool.
class Checkpoint(Base):
    __tablename__ = "checkpoints"
    __table_args__ = (UniqueConstraint("trial_id", "step"), *non_negative("step", "size_bytes"), sha256_check("sha256"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    object_key: Mapped[str] = mapped_column(String(KEY_LENGTH))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = created_column()

    trial: Mapped[Trial] = relationship(back_populates="checkpoints")


# The committed outcome of one task of a submission: exactly one row, or none yet.
class TaskResult(GpuEnergyColumns, Base):
    __tablename__ = "task_results"
    __table_args__ = (
        UniqueConstraint("submission_id", "stream_task_id"),
        UniqueConstraint("task_run_id"),
        ForeignKeyConstraint(
            ["task_run_id", "submission_id", "stream_task_id"],
            ["task_runs.id", "task_runs.submission_id", "task_runs.stream_task_id"],
            name="fk_task_results_task_run",
        ),
        ForeignKeyConstraint(
            ["best_trial_id", "task_run_id"], ["trials.id", "trials.task_run_id"], name="fk_task_results_best_trial"
        ),
        named_check("error >= 0 AND error <= 1", "error_range"),
        named_check(one_of("split", RESULT_SPLITS), "split"),
        named_check(one_of("metric", RESULT_METRICS), "metric"),
        *non_negative("flops", "cpu_seconds", "flops_paper", "flops_prediction"),
        *non_negative(*GPU_ENERGY_MEASURED),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    stream_task_id: Mapped[int] = mapped_column(ForeignKey("stream_tasks.id"), index=True)
    task_run_id: Mapped[int] = mapped_column(Integer)
    best_trial_id: Mapped[int] = mapped_column(Integer, index=True)
    error: Mapped[float] = mapped_column(Double)
    split: Mapped[str] = mapped_column(String(16))
    metric: Mapped[str] = mapped_column(String(16))
    flops: Mapped[float] = mapped_column(Double)
    cpu_seconds: Mapped[float | None] = mapped_column(Double)  # learner hosts' CPU time, harness-measured
    flops_floored: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    # a trial's own count was charged but lies within NEVIS_NEAR_FLOOR_BAND × its floor (revision 0024)
    flops_near_floor: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    cpu_estimated: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    flops_paper: Mapped[float | None] = mapped_column(Double)  # the trials' training updates (NEVIS'22's count)
    flops_prediction: Mapped[float | None] = mapped_column(Double)  # the evaluation's share of flops
    # meta-test consistency check (workers/trainer/consistency.py): share lost on shifted copies, and the mark
    consistency_jump: Mapped[float | None] = mapped_column(Double)
    inconsistent: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    committed_at: Mapped[datetime] = created_column()

    submission: Mapped[Submission] = relationship()
    stream_task: Mapped[StreamTask] = relationship()
    task_run: Mapped[TaskRun] = relationship(primaryjoin="foreign(TaskResult.task_run_id) == TaskRun.id", viewonly=True)
    best_trial: Mapped[Trial] = relationship(primaryjoin="foreign(TaskResult.best_trial_id) == Trial.id", viewonly=True)


# The append-only audit log; triggers created by the migration refuse UPDATE and DELETE.
class Event(Base):
    __tablename__ = "events"
    __table_args__ = (Index(None, "submission_id", "id"), Index(None, "kind"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int | None] = mapped_column(ForeignKey("submissions.id"))
    kind: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONDoc, default=dict)
    created_at: Mapped[datetime] = created_column()


# Tables of later parts live in their own modules; importing them registers them here.
from services.store.db import (  # noqa: E402,F401 - imported last, for their tables; they import this module
    models_coordinator,
    models_probe,
    models_refresh,
    models_scores,
    models_secrets,
    models_verify,
)

__all__ = [
    "ACTIVE_TASK_RUN_STATUSES",
    "CODE_URL_MAX",
    "FLOPS_SOURCES",
    "GPU_ENERGY_MEASURED",
    "PHASES",
    "RESULT_METRICS",
    "RESULT_SPLITS",
    "SHARD_SPLITS",
    "SUBMISSION_STATUSES",
    "TASK_KINDS",
    "TASK_RUN_STATUSES",
    "TRIAL_STATUSES",
    "VISIBILITIES",
    "Base",
    "Checkpoint",
    "Dataset",
    "Event",
    "GpuEnergyColumns",
    "Learner",
    "Shard",
    "StreamTask",
    "StreamVersion",
    "Submission",
    "TaskResult",
    "TaskRun",
    "Trial",
]
