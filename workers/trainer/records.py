"""Database writes and reads of the stream runner: keyword-only functions, one job each.

The invariant that matters: a task's result, its run's totals, the learner state it
produced and the submission's cursor change in ONE transaction (:func:`commit_task`), so a
crash leaves either all of them or none, and a resumed run never counts a task twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.core.errors import NevisError
from services.store.db.models import (
    ACTIVE_TASK_RUN_STATUSES,
    Checkpoint,
    Event,
    Learner,
    StreamTask,
    StreamVersion,
    Submission,
    TaskResult,
    TaskRun,
    Trial,
)
from services.store.db.types import utcnow
from workers.probe.planner import enqueue_submission
from workers.probe.pretext import store_training_curve
from workers.probe.settings import ProbeSettings
from workers.stream.manifest import StreamManifest, manifest_to_dict
from workers.stream.registry import manifest_sha256


def ensure_stream_version(session: Session, *, manifest: StreamManifest) -> StreamVersion:
    """The stored stream version for ``manifest``, created (with its tasks) on first use."""
    sha = manifest_sha256(manifest)
    found = session.scalar(
        select(StreamVersion).where(
            StreamVersion.name == manifest.name, StreamVersion.version == manifest.version
        )
    )
    if found is not None:
        if found.manifest_sha256 != sha:
            raise NevisError(
                f"Stream {manifest.name!r} version {manifest.version!r} is stored with other "
                "content: a changed manifest needs a new version string."
            )
        return found
    version = StreamVersion(
        name=manifest.name, version=manifest.version, manifest_sha256=sha,
        manifest=manifest_to_dict(manifest),
    )
    session.add(version)
    session.flush()
    for task in manifest.tasks:
        session.add(
            StreamTask(
                stream_version_id=version.id, order=task.order, year=task.year,
                dataset=task.dataset, phase=task.phase, kind=task.kind,
                num_classes=task.num_classes, domain=task.domain,
                split_rule={"kind": task.split.kind, "fractions": dict(task.split.fractions),
                            "seed": task.split.seed, "text": task.split.text},
            )
        )
    session.flush()
    return version


def ensure_learner(session: Session, *, spec: str, resources: Mapping[str, Any]) -> Learner:
    """The learner row for an installed entry point or built-in name."""
    found = session.scalar(select(Learner).where(Learner.name == spec))
    if found is not None:
        return found
    learner = Learner(name=spec, entrypoint=spec, resources=dict(resources))
    session.add(learner)
    session.flush()
    return learner


def create_submission(
    session: Session, *, learner: Learner, stream_version: StreamVersion, phase: str,
    budget: Mapping[str, Any], first_order: int,
) -> Submission:
    submission = Submission(
        learner_id=learner.id, stream_version_id=stream_version.id, phase=phase,
        status="running", budget=dict(budget), cursor=first_order,
    )
    session.add(submission)
    session.flush()
    add_event(session, submission_id=submission.id, kind="submission.created",
              payload={"phase": phase, "budget": dict(budget)})
    return submission


def add_event(session: Session, *, submission_id: int | None, kind: str, payload: Mapping[str, Any]) -> None:
    session.add(Event(submission_id=submission_id, kind=kind, payload=dict(payload)))


def stream_task(session: Session, *, stream_version_id: int, order: int) -> StreamTask:
    return session.scalars(
        select(StreamTask).where(
            StreamTask.stream_version_id == stream_version_id, StreamTask.order == order
        )
    ).one()


def start_task_run(session: Session, *, submission: Submission, task: StreamTask, deadline_s: float | None = None) -> TaskRun:
    """A new attempt at ``task``; earlier unfinished attempts become failed, their FLOPs retried.

    An attempt left ``running`` by a killed process is closed here as ``failed``
    ("interrupted"); the FLOPs its trials spent are carried as ``retried_flops`` of the new
    attempt, apart from the task's own FLOPs, so nothing is counted twice.
    """
    stale = session.scalars(
        select(TaskRun).where(
            TaskRun.submission_id == submission.id,
            TaskRun.status.in_(ACTIVE_TASK_RUN_STATUSES),
        )
    ).all()
    for run in stale:
        run.status, run.finished_at = "failed", utcnow()
        run.error = run.error or "interrupted: the process running this attempt stopped"
        add_event(session, submission_id=submission.id, kind="task.interrupted",
                  payload={"task_run_id": run.id, "order": run.stream_task.order})
    session.flush()
    previous = session.scalars(
        select(TaskRun).where(TaskRun.submission_id == submission.id, TaskRun.stream_task_id == task.id)
    ).all()
    retried = sum(trial_flops_of(session, task_run_id=r.id) for r in previous)
    now = utcnow()
    run = TaskRun(
        submission_id=submission.id, stream_task_id=task.id, attempt=len(previous) + 1,
        status="running", started_at=now, heartbeat_at=now, retried_flops=float(retried),
    )
    session.add(run)
    session.flush()
    add_event(session, submission_id=submission.id, kind="task.started",
              payload={"task_run_id": run.id, "order": task.order, "attempt": run.attempt})
    return run


def trial_flops_of(session: Session, *, task_run_id: int) -> float:
    return float(session.scalar(select(func.coalesce(func.sum(Trial.flops), 0.0)).where(Trial.task_run_id == task_run_id)))


def record_trial(session: Session, *, task_run_id: int, result: Mapping[str, Any]) -> Trial:
    """Store one finished trial (ok or failed) and its checkpoints."""
    measured, reported = int(result.get("flops_measured", 0)), int(result.get("flops_reported", 0))
    ok = result.get("status") == "ok"
    trial = Trial(
        task_run_id=task_run_id, trial_index=int(result["trial_index"]), seed=int(result["seed"]),
        config=_jsonable(result.get("config", {})), status="succeeded" if ok else "failed",
        flops=float(measured + reported), flops_source="reported" if reported else "measured",  # any reported part: not all measured
        dev_error=result.get("dev_error") if ok else None, wall_time_s=result.get("wall_time_s"),
        peak_memory_bytes=result.get("peak_memory_bytes"), error_text=result.get("error"),
        traceback=result.get("traceback"), finished_at=utcnow(),
    )
    session.add(trial)
    session.flush()
    store_training_curve(session, trial_id=trial.id, curve=result.get("curve") or ())  # pretext curve
    for ckpt in result.get("checkpoints", ()):
        session.add(Checkpoint(trial_id=trial.id, step=int(ckpt["step"]), object_key=ckpt["key"],
                               size_bytes=int(ckpt["size"]), sha256=ckpt["sha256"]))
    session.flush()
    return trial


def commit_task(
    session: Session, *, submission: Submission, run: TaskRun, best_trial: Trial, error: float,
    split: str, metric: str, task_flops: float, wall_time_s: float, peak_memory_bytes: int,
    state_key: str, next_order: int | None, probe_settings: ProbeSettings | None = None,
) -> TaskResult:
    """Commit the task: result, run totals, learner state and cursor, all or nothing.

    With ``probe_settings``, the probe jobs of the task's checkpoints are queued in the same
    transaction, so a committed task is never left without them.
    """
    result = TaskResult(
        submission_id=submission.id, stream_task_id=run.stream_task_id, task_run_id=run.id,
        best_trial_id=best_trial.id, error=error, split=split, metric=metric, flops=task_flops,
    )
    session.add(result)
    run.status, run.finished_at = "succeeded", utcnow()
    run.flops, run.wall_time_s, run.peak_memory_bytes = task_flops, wall_time_s, peak_memory_bytes
    run.learner_state_key = state_key
    if next_order is None:
        submission.status, submission.finished_at = "succeeded", utcnow()
    else:
        submission.cursor = next_order
    session.flush()
    add_event(session, submission_id=submission.id, kind="task.committed",
              payload={"task_run_id": run.id, "error": error, "flops": task_flops})
    if probe_settings is not None:
        order = session.get(StreamTask, run.stream_task_id).order
        enqueue_submission(session, submission_id=submission.id, settings=probe_settings, task_order=order)
    return result


def fail_task(session: Session, *, submission: Submission, run: TaskRun, message: str, task_flops: float) -> None:
    """Close an attempt whose trials all failed, and stop the submission with the reason."""
    run.status, run.finished_at, run.error, run.flops = "failed", utcnow(), message, 0.0
    submission.status, submission.error, submission.finished_at = "failed", message, utcnow()
    add_event(session, submission_id=submission.id, kind="task.failed",
              payload={"task_run_id": run.id, "message": message, "spent_flops": task_flops})


def last_state_key(session: Session, *, submission_id: int) -> str | None:
    """The learner state committed with the submission's latest task, if any."""
    return session.scalar(
        select(TaskRun.learner_state_key)
        .join(TaskResult, TaskResult.task_run_id == TaskRun.id)
        .where(TaskResult.submission_id == submission_id)
        .order_by(TaskResult.id.desc())
        .limit(1)
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value
