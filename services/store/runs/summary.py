"""Read a run back from the database: per-task rows, E and cFLOP (METRICS.md §1).

The run's read model, shared by every view of a run (``nevis results``, the API, the
dashboard); E and cFLOP come from :mod:`services.core.metrics`. Every number here is computed from committed rows only, so what ``nevis results`` prints
is exactly what the database holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from services.core.errors import UnknownNameError
from services.core.metrics import cflop, mean_error
from services.core.rulesets import stopped_at_cap
from services.store.db.models import Submission, TaskResult, TaskRun, Trial
from services.store.runs.gpu_energy import combined_source


@dataclass(frozen=True)
class TaskRow:
    """One task of a run as stored."""

    order: int
    dataset: str
    year: int
    phase: str
    status: str  # committed, failed, running, pending
    error: float | None
    split: str | None
    flops: float
    retried_flops: float
    trials: int
    failed_trials: int
    best_config: dict[str, Any] | None
    wall_time_s: float | None
    cpu_seconds: float | None = None  # learner hosts' CPU time, harness-measured; None: not measured
    flops_floored: bool = False  # the harness charged its CPU-time floor: the learner's count was too low
    flops_paper: float | None = None  # training updates of its trials, as NEVIS'22 counts; None: not split
    flops_prediction: float | None = None  # the evaluation's prediction; None: not split
    capped_trials: int = 0  # trials the harness stopped (or did not start) at the ruleset's task cap
    consistency_jump: float | None = None  # share lost on shifted test copies (workers/trainer/consistency.py)
    inconsistent: bool = False  # that jump is beyond an honest learner's: the run is marked
    flops_near_floor: bool = False  # a trial's own count lies within NEVIS_NEAR_FLOOR_BAND × its floor
    cpu_estimated: bool = False  # part of cpu_seconds is wall time × declared CPUs (no reading could be had)
    gpu_seconds: float | None = None  # NVML; None with gpu_note saying why (no GPU), never 0 for that
    gpu_peak_memory_bytes: int | None = None
    gpu_note: str | None = None
    energy_kwh: float | None = None  # RAPL's, or the estimate energy_source says (services/store/runs/gpu_energy.py)
    energy_source: str | None = None

    @property
    def flops_validation(self) -> float | None:
        """The rest of ``flops``: validation, dev scoring and transfer selection."""
        if self.flops_paper is None or self.flops_prediction is None:
            return None
        return max(self.flops - self.flops_paper - self.flops_prediction, 0.0)


@dataclass(frozen=True)
class RunSummary:
    """A run (submission) with its headline numbers."""

    submission_id: int
    learner: str
    stream: str
    stream_version: str
    phase: str
    status: str
    message: str | None
    tasks: tuple[TaskRow, ...]
    mean_error: float | None  # E over the phase's headline tasks that are committed
    headline_tasks: int  # how many tasks E should average over when the run is complete
    cflop: float  # committed FLOPs of every task
    retried_flops: float  # FLOPs of interrupted or failed attempts, reported apart
    flops_sources: tuple[str, ...]
    cpu_seconds: float | None = None  # committed tasks' harness-measured CPU time; None: none measured
    floored_tasks: int = 0  # committed tasks charged the harness's CPU-time floor
    cflop_paper: float | None = None  # NEVIS'22's count (training updates); None: a task was not split
    cflop_pretraining: float | None = None  # the self-pretrained checkpoint's run (pt_self); not in cflop
    ruleset: str = "open"  # the rules it ran under (services.core.rulesets)
    inconsistent_tasks: int = 0  # committed tasks marked by the consistency check
    near_floor_tasks: int = 0  # committed tasks a trial of which counted near its floor
    gpu_seconds: float | None = None  # committed tasks' GPU time; None: none measured (gpu_note: why)
    gpu_note: str | None = None
    energy_kwh: float | None = None  # committed tasks' energy; an estimate where energy_source says so
    energy_source: str | None = None

    @property
    def near_floor(self) -> bool:
        """Some trial's own count lies just over its floor: charged, but marked."""
        return self.near_floor_tasks > 0

    @property
    def inconsistent(self) -> bool:
        """Some task's answers jumped on shifted copies of its test images: marked everywhere."""
        return self.inconsistent_tasks > 0

    @property
    def flops_floored(self) -> bool:
        """Some of cFLOP is the harness's floor, not the learner's own count."""
        return self.floored_tasks > 0

    def to_dict(self) -> dict[str, Any]:
        tasks = [{**asdict(row), "flops_validation": row.flops_validation} for row in self.tasks]
        marks = {"flops_floored": self.flops_floored, "inconsistent": self.inconsistent, "near_floor": self.near_floor}
        return {**asdict(self), "tasks": tasks, **marks}


def load_summary(session: Session, *, submission_id: int) -> RunSummary:
    """The stored state of a run; an unknown id is an UnknownNameError."""
    submission = session.get(Submission, submission_id)
    if submission is None:
        raise UnknownNameError(f"No run with id {submission_id} in this database.")
    results = {
        r.stream_task_id: r
        for r in session.scalars(select(TaskResult).where(TaskResult.submission_id == submission_id))
    }
    runs: dict[int, list[TaskRun]] = {}
    for run in session.scalars(
        select(TaskRun)
        .where(TaskRun.submission_id == submission_id)
        .options(selectinload(TaskRun.trials))
        .order_by(TaskRun.attempt)
    ):
        runs.setdefault(run.stream_task_id, []).append(run)
    best_ids = [r.best_trial_id for r in results.values()]
    best_trials = {t.id: t for t in session.scalars(select(Trial).where(Trial.id.in_(best_ids)))} if best_ids else {}
    headline_phase = submission.phase
    rows, sources = [], set()
    for task in submission.stream_version.tasks:
        if submission.phase == "meta_train" and task.phase != "meta_train":
            continue
        attempts = runs.get(task.id, [])
        result = results.get(task.id)
        trials = [t for run in attempts for t in run.trials]
        sources.update(t.flops_source for t in trials if t.flops > 0)
        final = next((r for r in attempts if r.id == result.task_run_id), None) if result else None
        retried = sum(sum(t.flops for t in run.trials) for run in attempts if final is None or run.id != final.id)
        best = best_trials.get(result.best_trial_id) if result else None
        rows.append(
            TaskRow(
                order=task.order,
                dataset=task.dataset,
                year=task.year,
                phase=task.phase,
                status="committed" if result else (attempts[-1].status if attempts else "pending"),
                error=result.error if result else None,
                split=result.split if result else None,
                flops=result.flops if result else 0.0,
                retried_flops=float(retried),
                trials=len(final.trials) if final else 0,
                failed_trials=sum(t.status == "failed" for t in final.trials) if final else 0,
                best_config=dict(best.config) if best else None,
                wall_time_s=final.wall_time_s if final else None,
                cpu_seconds=result.cpu_seconds if result else None,
                flops_floored=bool(result.flops_floored) if result else False,
                flops_paper=result.flops_paper if result else None,
                flops_prediction=result.flops_prediction if result else None,
                capped_trials=sum(stopped_at_cap(t.status, t.error_text) for t in final.trials) if final else 0,
                consistency_jump=result.consistency_jump if result else None,
                inconsistent=bool(result.inconsistent) if result else False,
                flops_near_floor=bool(result.flops_near_floor) if result else False,
                cpu_estimated=bool(result.cpu_estimated) if result else False,
                **_gpu_energy(result),
            )
        )
    headline = [r for r in rows if r.phase == headline_phase]
    scored = [r.error for r in headline if r.error is not None]
    return RunSummary(
        submission_id=submission.id,
        learner=submission.learner.name,
        stream=submission.stream_version.name,
        stream_version=submission.stream_version.version,
        phase=submission.phase,
        status=submission.status,
        message=submission.error,
        tasks=tuple(rows),
        mean_error=mean_error(scored),
        headline_tasks=len(headline),
        cflop=cflop(r.flops for r in rows),
        retried_flops=float(sum(r.retried_flops for r in rows)),
        flops_sources=tuple(sorted(sources)),
        cpu_seconds=known_sum(r.cpu_seconds for r in rows),
        floored_tasks=sum(r.flops_floored for r in rows),
        cflop_paper=paper_cflop(rows),
        cflop_pretraining=submission.cflop_pretraining,
        ruleset=submission.ruleset,
        inconsistent_tasks=sum(r.inconsistent for r in rows),
        near_floor_tasks=sum(r.flops_near_floor for r in rows),
        gpu_seconds=known_sum(r.gpu_seconds for r in rows),
        gpu_note=next((r.gpu_note for r in rows if r.gpu_note and r.gpu_seconds is None), None),
        energy_kwh=known_sum(r.energy_kwh for r in rows),
        energy_source=combined_source([r.energy_source for r in rows if r.energy_kwh is not None]),
    )


def paper_cflop(rows: Iterable[TaskRow]) -> float | None:
    """cFLOP as NEVIS'22 counts it (training updates of every trial of every committed task);
    None when a committed task was stored before FLOPs were split by purpose (a partial sum
    would read as a smaller count)."""
    committed = [r for r in rows if r.status == "committed"]
    if any(r.flops_paper is None for r in committed):
        return None
    return cflop(r.flops_paper or 0.0 for r in committed)


def _gpu_energy(result: TaskResult | None) -> dict[str, Any]:
    """A task row's GPU and energy fields (revision 0027), as its result stored them."""
    names = ("gpu_seconds", "gpu_peak_memory_bytes", "gpu_note", "energy_kwh", "energy_source")
    return {name: getattr(result, name) if result else None for name in names}


def known_sum(values: Iterable[float | None]) -> float | None:
    """The sum of the measured values; None when none was measured (unknown is not 0)."""
    known = [v for v in values if v is not None]
    return float(sum(known)) if known else None


__all__ = ["RunSummary", "TaskRow", "known_sum", "load_summary", "paper_cflop"]
