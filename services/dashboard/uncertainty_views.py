"""The uncertainty figures the dashboard's pages show: E's interval on a submission's page, and
the paired comparison on the compare page when exactly two runs are compared
(:mod:`services.store.runs.uncertainty`; the method is docs/uncertainty.md)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from services.dashboard.views import CompareView
from services.store.objects import ObjectStore
from services.store.runs.comparison import Comparison, TaskComparison, compare
from services.store.runs.summary import RunSummary
from services.store.runs.uncertainty import IncomparableRunsError, RunInterval, run_interval


@dataclass(frozen=True)
class PairedView:
    """The paired comparison of two runs, or why there is none."""

    comparison: Comparison | None
    reason: str | None

    def task(self, order: int) -> TaskComparison | None:
        """The paired figures of one task; None when it is not compared."""
        if self.comparison is None:
            return None
        return next((t for t in self.comparison.tasks if t.order == order), None)


def interval_of(session: Session, store: ObjectStore, summary: RunSummary) -> RunInterval:
    """E's interval for the submission page (None figures with a reason where it cannot be had)."""
    return run_interval(session, store, summary=summary)


def paired_view(session: Session, store: ObjectStore, view: CompareView) -> PairedView | None:
    """Run A against run B when exactly two are compared; None otherwise."""
    if len(view.summaries) != 2:
        return None
    a, b = (s.submission_id for s in view.summaries)
    try:
        return PairedView(compare(session, store, a=a, b=b), None)
    except IncomparableRunsError as exc:
        return PairedView(None, str(exc))


__all__ = ["PairedView", "interval_of", "paired_view"]
