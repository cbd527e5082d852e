"""Probe tables: the durable probe-job queue and the probe results (revision ``0003``).

Imported at the end of :mod:`services.store.db.models`, so every table shares one
metadata and one Alembic history.

Contract:
- ``trial_curves`` keeps each trial's own training curve (step, loss): the probes'
  pretext curve. One row per trial, written with the trial.
- ``probe_settings`` stores every settings document a probe run used, under its hash;
  every job and result row names its settings hash, so results of different settings
  never overwrite each other and every figure says how it was measured.
- ``probe_jobs`` is the queue. ``job_key`` is unique, so queueing twice is a no-op. A
  claimed job carries a lease (``lease_owner``, ``lease_expires_at``) that its worker
  renews; an expired lease can be claimed again, until ``max_attempts``. A done job keeps
  the FLOPs it cost in ``analysis_flops`` (revision ``0011``): the harness's analysis,
  reported apart and never part of a submission's cFLOP; NULL for jobs done before it was
  counted, and for failed ones.
- Results are unique per (checkpoint or trial or submission, settings, target, probe
  kind), so a job that runs twice writes each row once (upserts).
- Infinite values (the +inf of the OFM special case) are stored as such in the float
  columns; JSON documents hold them as the strings "inf" / "-inf" / "nan".
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Double, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from services.core.metric_specs import PROXIES
from services.store.db.base import Base, created_column, named_check, non_negative, one_of
from services.store.db.types import JSONDoc, UTCDateTime

PROBE_JOB_KINDS: tuple[str, ...] = ("checkpoint", "trial", "summary")
PROBE_JOB_STATUSES: tuple[str, ...] = ("queued", "running", "done", "failed")
# A job in one of these still has work ahead; the others are final.
OPEN_PROBE_JOB_STATUSES: tuple[str, ...] = ("queued", "running")
PROBE_KIND_NAMES: tuple[str, ...] = ("linear", "mlp2", "mlp3")
CORRELATION_SCOPES: tuple[str, ...] = ("task", "pooled", "task_mean", "trials", "trials_mean")
SETTINGS_HASH_LENGTH = 16


def _settings_fk() -> Mapped[str]:
    return mapped_column(String(SETTINGS_HASH_LENGTH), ForeignKey("probe_settings.settings_hash", ondelete="RESTRICT"))


# The learner's own training curve of one trial, the pretext curve of the probes.
class TrialCurve(Base):
    __tablename__ = "trial_curves"

    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True)
    steps: Mapped[list[int]] = mapped_column(JSONDoc)
    losses: Mapped[list[Any]] = mapped_column(JSONDoc)
    created_at: Mapped[datetime] = created_column()


# One probe settings document (folds, kinds, LiDAR n and q, ...), by its hash.
class ProbeSettingsRow(Base):
    __tablename__ = "probe_settings"

    settings_hash: Mapped[str] = mapped_column(String(SETTINGS_HASH_LENGTH), primary_key=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JSONDoc)
    created_at: Mapped[datetime] = created_column()


# One unit of probe work: a checkpoint, a trial's mismatch curves, or a submission summary.
class ProbeJob(Base):
    __tablename__ = "probe_jobs"
    __table_args__ = (
        UniqueConstraint("job_key"),
        named_check(one_of("kind", PROBE_JOB_KINDS), "kind"),
        named_check(one_of("status", PROBE_JOB_STATUSES), "status"),
        named_check("kind <> 'checkpoint' OR checkpoint_id IS NOT NULL", "checkpoint_job_target"),
        named_check("kind = 'summary' OR trial_id IS NOT NULL", "trial_set"),
        named_check("max_attempts >= 1", "max_attempts_positive"),
        *non_negative("attempts", "task_order", "analysis_flops"),
        Index(None, "status", "lease_expires_at"),
        Index(None, "submission_id", "status"),
        Index(None, "trial_id", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_key: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    task_order: Mapped[int] = mapped_column(Integer)  # 0 for a submission summary
    trial_id: Mapped[int | None] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"))
    checkpoint_id: Mapped[int | None] = mapped_column(ForeignKey("checkpoints.id", ondelete="CASCADE"))
    settings_hash: Mapped[str] = _settings_fk()
    status: Mapped[str] = mapped_column(String(16), default="queued", server_default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    max_attempts: Mapped[int] = mapped_column(Integer, default=3, server_default=text("3"))
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    error: Mapped[str | None] = mapped_column(Text)
    wall_time_s: Mapped[float | None] = mapped_column(Double)
    # FLOPs of the learner's passes (checkpoint jobs) or the probe fits (trial jobs); never cFLOP.
    analysis_flops: Mapped[float | None] = mapped_column(Double)
    created_at: Mapped[datetime] = created_column()
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


# Label-free ranks and the pretext error of one checkpoint, with how they were measured.
class ProbeCheckpointResult(Base):
    __tablename__ = "probe_checkpoint_results"
    __table_args__ = (
        UniqueConstraint("checkpoint_id", "settings_hash"),
        named_check("pretext_error IS NULL OR (pretext_error >= 0 AND pretext_error <= 1)", "pretext_error_range"),
        *non_negative("step", "feature_dim", "lidar_n", "lidar_q", "rankme_n"),
        Index(None, "trial_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    checkpoint_id: Mapped[int] = mapped_column(ForeignKey("checkpoints.id", ondelete="CASCADE"))
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"))
    settings_hash: Mapped[str] = _settings_fk()
    step: Mapped[int] = mapped_column(Integer)
    lidar: Mapped[float | None] = mapped_column(Double)
    rankme: Mapped[float | None] = mapped_column(Double)
    pretext_error: Mapped[float | None] = mapped_column(Double)
    feature_dim: Mapped[int] = mapped_column(Integer)
    lidar_n: Mapped[int] = mapped_column(Integer)
    lidar_q: Mapped[int] = mapped_column(Integer)
    rankme_n: Mapped[int] = mapped_column(Integer)
    details: Mapped[dict[str, Any]] = mapped_column(JSONDoc, default=dict)
    created_at: Mapped[datetime] = created_column()


# Held-out loss and error of one probe kind on one target task, at one checkpoint.
class ProbeFitRow(Base):
    __tablename__ = "probe_fits"
    __table_args__ = (
        UniqueConstraint("checkpoint_id", "settings_hash", "target_order", "probe_kind"),
        named_check(one_of("probe_kind", PROBE_KIND_NAMES), "probe_kind"),
        named_check("error >= 0 AND error <= 1", "error_range"),
        named_check("target_order >= 1", "target_order_positive"),
        *non_negative("step", "num_examples", "num_classes", "folds"),
        Index(None, "trial_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    checkpoint_id: Mapped[int] = mapped_column(ForeignKey("checkpoints.id", ondelete="CASCADE"))
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"))
    settings_hash: Mapped[str] = _settings_fk()
    step: Mapped[int] = mapped_column(Integer)
    target_order: Mapped[int] = mapped_column(Integer)
    probe_kind: Mapped[str] = mapped_column(String(16))
    loss: Mapped[float] = mapped_column(Double)
    error: Mapped[float] = mapped_column(Double)
    fold_losses: Mapped[list[Any]] = mapped_column(JSONDoc)
    fold_errors: Mapped[list[Any]] = mapped_column(JSONDoc)
    folds: Mapped[int] = mapped_column(Integer)
    num_examples: Mapped[int] = mapped_column(Integer)
    num_classes: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = created_column()


# The mismatch scores (METRICS.md §2) of one trial, target task and probe kind, with curves.
class ProbeMismatchRow(Base):
    __tablename__ = "probe_mismatch"
    __table_args__ = (
        UniqueConstraint("trial_id", "settings_hash", "target_order", "probe_kind"),
        named_check(one_of("probe_kind", PROBE_KIND_NAMES), "probe_kind"),
        named_check("target_order >= 1", "target_order_positive"),
        *non_negative("conv_step", "num_checkpoints"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"))
    settings_hash: Mapped[str] = _settings_fk()
    target_order: Mapped[int] = mapped_column(Integer)
    probe_kind: Mapped[str] = mapped_column(String(16))
    conv_step: Mapped[int] = mapped_column(Integer)
    converged: Mapped[bool] = mapped_column(Boolean)  # whether patience ran out
    num_checkpoints: Mapped[int] = mapped_column(Integer)
    mm3: Mapped[float | None] = mapped_column(Double)  # NULL: an earlier target (no pretext error of its own)
    msm3: Mapped[float] = mapped_column(Double)
    csm3: Mapped[float] = mapped_column(Double)
    msm3max: Mapped[float] = mapped_column(Double)
    mofm: Mapped[float] = mapped_column(Double)
    cofm: Mapped[float] = mapped_column(Double)
    mofm_max: Mapped[float] = mapped_column(Double)
    spreads: Mapped[dict[str, Any]] = mapped_column(JSONDoc)
    curves: Mapped[dict[str, Any]] = mapped_column(JSONDoc)
    created_at: Mapped[datetime] = created_column()


# The scalar scores of a ProbeMismatchRow, in the order reports show them.
MISMATCH_SCALARS = ("mm3", "msm3", "csm3", "msm3max", "mofm", "cofm", "mofm_max")


# How well a label-free proxy ranks checkpoints and trials by linear-probe accuracy.
class ProbeCorrelationRow(Base):
    __tablename__ = "probe_correlations"
    __table_args__ = (
        UniqueConstraint("submission_id", "settings_hash", "scope", "task_order", "proxy"),
        named_check(one_of("scope", CORRELATION_SCOPES), "scope"),
        named_check(one_of("proxy", PROXIES), "proxy"),
        named_check("(scope IN ('task', 'trials')) = (task_order >= 1)", "task_order_matches_scope"),
        *non_negative("task_order", "num_points"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    settings_hash: Mapped[str] = _settings_fk()
    scope: Mapped[str] = mapped_column(String(16))
    task_order: Mapped[int] = mapped_column(Integer)  # 0 unless scope is "task" or "trials"
    proxy: Mapped[str] = mapped_column(String(16))
    spearman: Mapped[float | None] = mapped_column(Double)  # NULL where undefined
    kendall_tau_b: Mapped[float | None] = mapped_column(Double)
    num_points: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = created_column()


__all__ = [
    "CORRELATION_SCOPES",
    "MISMATCH_SCALARS",
    "OPEN_PROBE_JOB_STATUSES",
    "PROBE_JOB_KINDS",
    "PROBE_JOB_STATUSES",
    "PROBE_KIND_NAMES",
    "PROXIES",
    "SETTINGS_HASH_LENGTH",
    "ProbeCheckpointResult",
    "ProbeCorrelationRow",
    "ProbeFitRow",
    "ProbeJob",
    "ProbeMismatchRow",
    "ProbeSettingsRow",
    "TrialCurve",
]
