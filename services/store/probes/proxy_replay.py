"""The stored rows the proxy replay needs (:mod:`services.core.proxy_policies`), per committed task.

Why here: every figure comes from rows the run and the probe pool wrote (the committed task
results, every trial's dev error and FLOPs, LiDAR and RankMe of each probed checkpoint, the
checkpoint jobs' analysis FLOPs, and each final checkpoint's error on the held-out ``dev_test``
examples of its probe sample, which no selection reads), so the replay needs no learner code.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.core.errors import NevisError
from services.core.proxy_policies import PROXIES, TaskRecord, TrialRecord, rung_steps
from services.store.db.models import StreamTask, Submission, TaskResult, Trial
from services.store.db.models_probe import ProbeCheckpointResult, ProbeJob
from services.store.probes.report import latest_settings_hash


@dataclass(frozen=True)
class ReplayInput:
    """A submission's tasks as the replay reads them, with the probe settings they came from
    and the run's E (test, the committed trials') over the same tasks."""

    submission_id: int
    settings_hash: str
    tasks: tuple[TaskRecord, ...]
    committed_error: dict[int, float]  # task order → committed (test) error


def load_replay_input(session: Session, *, submission_id: int, settings_hash: str | None = None) -> ReplayInput:
    """Read a probed submission's committed tasks for the replay.

    Raises:
        NevisError: no such submission, no committed task, or nothing probed under the settings.
    """
    submission = session.get(Submission, submission_id)
    if submission is None:
        raise NevisError(f"No run with id {submission_id} in this database.")
    settings_hash = settings_hash or latest_settings_hash(session, submission_id=submission_id)
    if settings_hash is None:
        raise NevisError(
            f"Run {submission_id} has no probes: run `nevis probe run --submission {submission_id} --all-trials` first."
        )
    committed = session.execute(
        select(StreamTask.order, TaskResult.task_run_id, TaskResult.best_trial_id, TaskResult.flops, TaskResult.error)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .where(TaskResult.submission_id == submission_id)
        .order_by(StreamTask.order)
    ).all()
    if not committed:
        raise NevisError(f"Run {submission_id} has no committed task.")
    trials = session.execute(
        select(Trial.id, Trial.task_run_id, Trial.trial_index, Trial.status, Trial.dev_error, Trial.flops).where(
            Trial.task_run_id.in_([row.task_run_id for row in committed])
        )
    ).all()
    probed = session.execute(
        select(
            ProbeCheckpointResult.trial_id,
            ProbeCheckpointResult.checkpoint_id,
            ProbeCheckpointResult.step,
            ProbeCheckpointResult.lidar,
            ProbeCheckpointResult.rankme,
            ProbeCheckpointResult.details,
        ).where(
            ProbeCheckpointResult.trial_id.in_([t.id for t in trials]),
            ProbeCheckpointResult.settings_hash == settings_hash,
        )
    ).all()
    if not probed:
        raise NevisError(f"Run {submission_id} has no probed checkpoint under settings {settings_hash}.")
    spent = dict(
        session.execute(
            select(ProbeJob.checkpoint_id, ProbeJob.analysis_flops).where(
                ProbeJob.submission_id == submission_id,
                ProbeJob.settings_hash == settings_hash,
                ProbeJob.kind == "checkpoint",
                ProbeJob.status == "done",
            )
        ).all()
    )
    values: dict[int, dict[str, dict[int, float]]] = {}
    costs: dict[int, dict[int, float]] = {}
    last: dict[int, tuple[int, float | None]] = {}  # trial → (last probed step, its held-out error)
    for row in probed:
        if row.trial_id not in last or row.step > last[row.trial_id][0]:
            held = (row.details or {}).get("heldout_error")
            last[row.trial_id] = (row.step, None if held is None else float(held))
        for proxy in PROXIES:
            value = getattr(row, proxy)
            if value is not None:
                values.setdefault(row.trial_id, {}).setdefault(proxy, {})[row.step] = float(value)
        costs.setdefault(row.trial_id, {})[row.step] = float(spent.get(row.checkpoint_id) or 0.0)
    steps = _steps(submission, values)
    tasks = []
    for order, run_id, best_id, flops, _ in committed:
        mine = sorted((t for t in trials if t.task_run_id == run_id), key=lambda t: t.trial_index)
        records = tuple(
            TrialRecord(
                t.trial_index,
                t.dev_error if t.status == "succeeded" else None,
                float(t.flops),
                values.get(t.id, {}),
                costs.get(t.id, {}),
                _final_heldout(last.get(t.id), steps),
            )
            for t in mine
        )
        chosen = next(t.trial_index for t in mine if t.id == best_id)
        tasks.append(TaskRecord(order, records, chosen, float(flops), steps, rung_steps(steps)))
    return ReplayInput(submission_id, settings_hash, tuple(tasks), {row.order: float(row.error) for row in committed})


def _final_heldout(last: tuple[int, float | None] | None, steps: int) -> float | None:
    """A trial's held-out error, if its last probed checkpoint is its final one (the model
    dev selection scored); None otherwise, never an earlier checkpoint's in its place."""
    return last[1] if last is not None and last[0] == steps else None


def _steps(submission: Submission, values: dict[int, dict[str, dict[int, float]]]) -> int:
    """Each trial's step budget: the submission's, or else the last probed step of any trial."""
    steps = (submission.budget or {}).get("steps")
    if isinstance(steps, int) and steps >= 1:
        return steps
    seen = [s for per in values.values() for by_step in per.values() for s in by_step]
    if not seen:
        raise NevisError(f"Run {submission.id} records no step budget and no probed step.")
    return max(seen)


__all__ = ["ReplayInput", "load_replay_input"]
