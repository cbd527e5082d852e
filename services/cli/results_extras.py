"""Parts of ``nevis results`` beside the task table: the transfer report and the GPU/energy line."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from services.store.runs.gpu_energy import energy_text, gpu_text


def gpu_energy_line(summary: Any) -> str:
    """GPU-hours and energy of the committed tasks, beside cFLOP: "no GPU" (and why) where none was
    measured, never 0; an estimated energy says so and how (docs/running.md)."""
    gpu = gpu_text(summary.gpu_seconds, summary.gpu_note)
    why = f" ({summary.gpu_note})" if summary.gpu_seconds is None and summary.gpu_note else ""
    source = summary.energy_source or "not measured"
    how = " = CPU-seconds x 10 W, no RAPL on the node" if source.startswith("estimate") else ""
    return f"GPU = {gpu}{why}  energy = {energy_text(summary.energy_kwh, summary.energy_source)} ({source}{how})"


def print_transfer(console: Console, report: Any) -> None:
    """The repeated datasets and FT-d's choices, where the run has them (docs/transfer.md)."""
    from services.core.transfer import candidate_label  # noqa: PLC0415 - imported when the command runs (fast start)

    if report.repeats:
        against = f"Indep #{report.indep_submission_id}" if report.indep_submission_id else report.indep_reason
        table = Table(
            "dataset",
            "first",
            "later",
            "error first",
            "error later",
            "later − first",
            "Indep later",
            "later − Indep",
            title=f"Repeated datasets (against {against})",
        )
        for r in report.repeats:
            table.add_row(
                r.dataset,
                str(r.first),
                str(r.later),
                *(
                    ("" if v is None else f"{v:.4f}")
                    for v in (r.first_error, r.later_error, r.vs_first, r.indep_error, r.vs_indep)
                ),
            )
        console.print(table)
    if report.choices:
        chosen = ", ".join(f"{t}←{candidate_label(c.chosen)}" for t, c in sorted(report.choices.items()))
        console.print(f"Starts chosen (the learner's own record): {chosen}")


__all__ = ["gpu_energy_line", "print_transfer"]
