"""A task's GPU time, peak GPU memory and energy, from its trials, and how they are shown.

Trials carry what the harness measured (revision 0027; workers/trainer/energy.py and
workers/sandbox's NVML reader): ``gpu_seconds`` and ``gpu_peak_memory_bytes`` are ``None`` with
``gpu_note`` saying why where no GPU was measured (no GPU given, no NVML on the node), never 0;
``energy_kwh`` is RAPL's or an estimate, ``energy_source`` says which. A task's figures sum its
attempt's trials (the peak is the largest); a sum with one estimated part is an estimate.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import Session

from services.store.db.models import TaskResult, Trial

JOULES_PER_KWH = 3.6e6


def combined_source(sources: list[str | None]) -> str | None:
    """The label of a sum of energies: ``estimate`` if any part was estimated (a sum is only as
    measured as its least measured part), ``rapl`` otherwise; ``+nvml`` if any part has GPU energy."""
    known = [s for s in sources if s]
    if not known:
        return None
    base = "estimate" if any(s.startswith("estimate") for s in known) else "rapl"
    return base + ("+nvml" if any(s.endswith("+nvml") for s in known) else "")


def task_gpu_energy(session: Session, task_run_id: int) -> dict[str, Any]:
    """The GPU and energy columns of a task result: its run's trials summed."""
    rows = session.execute(
        select(
            Trial.gpu_seconds, Trial.gpu_peak_memory_bytes, Trial.gpu_note, Trial.energy_kwh, Trial.energy_source
        ).where(Trial.task_run_id == task_run_id)
    ).all()
    seconds = [r.gpu_seconds for r in rows if r.gpu_seconds is not None]
    peaks = [r.gpu_peak_memory_bytes for r in rows if r.gpu_peak_memory_bytes is not None]
    energy = [r.energy_kwh for r in rows if r.energy_kwh is not None]
    notes = [r.gpu_note for r in rows if r.gpu_note]
    return {
        "gpu_seconds": sum(seconds) if seconds else None,
        "gpu_peak_memory_bytes": max(peaks) if peaks else None,
        "gpu_note": None if seconds else (notes[0] if notes else None),
        "energy_kwh": sum(energy) if energy else None,
        "energy_source": combined_source([r.energy_source for r in rows if r.energy_kwh is not None]),
    }


def gpu_energy_columns() -> list[Any]:
    """A submission's GPU-seconds and energy as SQL aggregates over its committed ``task_results``,
    kept in ``submission_scores`` as each result commits (services/store/runs/scores.py), so a
    leaderboard page reads them with its row and runs no query of its own. Same rules as
    :func:`combined_source`: a sum with one estimated part is an estimate; ``+nvml`` where any
    part has GPU energy; a note only where no GPU-second was measured."""
    has_energy = TaskResult.energy_kwh.is_not(None)
    estimated = func.sum(case((and_(has_energy, TaskResult.energy_source.like("estimate%")), 1), else_=0))
    nvml = func.sum(case((and_(has_energy, TaskResult.energy_source.like("%+nvml")), 1), else_=0))
    return [
        func.sum(TaskResult.gpu_seconds).label("gpu_seconds"),  # SUM skips NULLs; all NULL: NULL
        case((func.count(TaskResult.gpu_seconds) == 0, func.min(TaskResult.gpu_note)), else_=None).label("gpu_note"),
        func.sum(TaskResult.energy_kwh).label("energy_kwh"),
        case(
            (func.count(TaskResult.energy_kwh) == 0, None),
            (and_(estimated > 0, nvml > 0), "estimate+nvml"),
            (estimated > 0, "estimate"),
            (nvml > 0, "rapl+nvml"),
            else_="rapl",
        ).label("energy_source"),
    ]


def gpu_text(gpu_seconds: float | None, note: str | None) -> str:
    """GPU-hours as a table shows them: the figure, or ``no GPU`` / why it is unknown (never 0)."""
    if gpu_seconds is not None:
        return f"{gpu_seconds / 3600:.4g} GPU-h"
    if note and note.startswith("no GPU:"):
        return "no GPU"
    return "n/a" if not note else "unmeasured"


def energy_text(kwh: float | None, source: str | None) -> str:
    """Energy as a table shows it: kWh, ``~`` before an estimate; ``n/a`` where unknown."""
    if kwh is None:
        return "n/a"
    return f"{'~' if (source or '').startswith('estimate') else ''}{kwh:.3g} kWh"


__all__ = ["JOULES_PER_KWH", "combined_source", "energy_text", "gpu_energy_columns", "gpu_text", "task_gpu_energy"]
