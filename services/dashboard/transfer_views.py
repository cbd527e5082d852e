"""What the submission page shows of a run's transfer (NEVIS'22 §5.2): the report read from
the store (:mod:`services.store.runs.transfer`) and its figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from services.core.transfer import candidate_label
from services.dashboard import transfer_figures
from services.store.objects import ObjectStore
from services.store.runs.summary import RunSummary
from services.store.runs.transfer import TransferReport, transfer_report


@dataclass(frozen=True)
class TransferView:
    report: TransferReport
    targets: list[int]
    sources: list[int]
    cells: list[list[float | None]]
    figures: dict[str, dict[str, Any]]

    def source_label(self, order: int) -> str:
        return candidate_label(order)


def transfer_view(
    session: Session, store: ObjectStore, submission_id: int, summary: RunSummary | None = None
) -> TransferView:
    """The report and its figures: repeats (if the stream has any), the matrix (if the learner
    recorded choices), the resolution slices (if a task is scored); ``summary``: the run's, if read."""
    report = transfer_report(session, store, submission_id=submission_id, summary=summary)
    targets, sources, cells = report.matrix()
    charts = {}
    if report.repeats:
        charts["repeats"] = transfer_figures.repeats(report.repeats, indep=report.indep_submission_id)
    if targets:
        charts["transfer_matrix"] = transfer_figures.transfer_matrix(
            targets, sources, cells, report.choices, report.datasets
        )
    if report.slices:
        charts["resolution"] = transfer_figures.resolution(report.slices, indep=report.indep_submission_id)
    return TransferView(report, targets, sources, cells, charts)


__all__ = ["TransferView", "transfer_view"]
