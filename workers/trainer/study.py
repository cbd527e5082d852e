"""Run a Pareto study: every point of its grid as an ordinary run, resumable.

Why a runner of runs: the study's numbers must be the same rows as any other run's (the
leaderboard, ``nevis results`` and the dashboard read them), so each point is a submission
made and driven by :class:`~workers.trainer.stream_runner.StreamRunner`, nothing more. This
module adds the bookkeeping around them (:mod:`workers.trainer.study_plan`):

- Everything is checked before the first run starts: the grid's lists, the plan in the
  folder (it may only grow), the stream, every learner (asked of a learner host, as a run
  does), and that each recorded submission is the point it stands for in this database.
- A point's submission id is written to ``study.json`` as soon as the submission exists, so
  an interrupted study loses nothing: a rerun skips finished points, resumes started ones
  from their cursor (committed tasks are never redone) and creates the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from services.core.config import mask_url
from services.core.errors import NevisError, TaskFailedError
from workers.stream.manifest_files import load_stream
from workers.trainer.run_plan import RunPlan, RunRequest
from workers.trainer.stream_runner import StreamRunner
from workers.trainer.study_plan import (
    StudyGrid,
    StudyPlan,
    StudyPlanError,
    StudyPoint,
    merge_plan,
    read_plan,
    write_plan,
)


class StudyObserver(Protocol):
    """What the study tells a user interface, point by point (tasks go to the runner's own
    :class:`~workers.trainer.run_plan.RunObserver`)."""

    def point_started(self, point: StudyPoint, position: int, total: int, *, resumed: bool) -> None: ...
    def point_skipped(self, point: StudyPoint, position: int, total: int) -> None: ...
    def point_finished(self, point: StudyPoint, position: int, total: int) -> None: ...


class _Silent:
    def point_started(self, point: StudyPoint, position: int, total: int, *, resumed: bool) -> None: ...
    def point_skipped(self, point: StudyPoint, position: int, total: int) -> None: ...
    def point_finished(self, point: StudyPoint, position: int, total: int) -> None: ...


@dataclass(frozen=True)
class StudyOutcome:
    """What one invocation did: the final plan and which submissions it created, resumed
    or skipped (finished before it started)."""

    plan: StudyPlan
    created: tuple[int, ...]
    resumed: tuple[int, ...]
    skipped: tuple[int, ...]


class StudyRunner:
    """Plans, checks and runs one study folder against one database and store."""

    def __init__(self, runner: StreamRunner, folder: Path, *, observer: StudyObserver | None = None) -> None:
        self.runner = runner
        self.folder = Path(folder)
        self.observer = observer or _Silent()
        self._database = mask_url(runner.settings.database_url)

    def prepare(self, grid: StudyGrid) -> StudyPlan:
        """The plan for ``grid`` (the folder's plan grown by it), checked and written.

        Raises:
            StudyPlanError: the folder holds another study, or a recorded submission is not
                the point it stands for in this database.
            UnknownNameError, LearnerError, ManifestError: an unknown stream or learner.
        """
        plan = merge_plan(read_plan(self.folder), grid)
        manifest = load_stream(plan.grid.stream)
        for learner in plan.grid.learners:  # each learner loads in a host, or its error stops the study
            self.runner.learner(learner, plan.points[0].run_budget())
        for point in plan.points:
            if point.submission_id is not None:
                self._check_submission(point, plan.grid, manifest.name)
        write_plan(self.folder, plan, database=self._database)
        return plan

    def run(self, plan: StudyPlan) -> StudyOutcome:
        """Run every point not finished yet, in plan order; returns what was done."""
        created: list[int] = []
        resumed: list[int] = []
        skipped: list[int] = []
        total = len(plan.points)
        for position, point in enumerate(plan.points, start=1):
            if point.submission_id is not None and self._status(point.submission_id) == "succeeded":
                skipped.append(point.submission_id)
                self.observer.point_skipped(point, position, total)
                continue
            started = point.submission_id is not None
            if point.submission_id is None:
                plan, point = self._create(plan, point)
            submission_id: int = point.submission_id  # type: ignore[assignment]
            (resumed if started else created).append(submission_id)
            self.observer.point_started(point, position, total, resumed=started)
            self._run_point(point, submission_id)
            self.observer.point_finished(point, position, total)
        return StudyOutcome(plan=plan, created=tuple(created), resumed=tuple(resumed), skipped=tuple(skipped))

    # --- helpers ---------------------------------------------------------------------------

    def _create(self, plan: StudyPlan, point: StudyPoint) -> tuple[StudyPlan, StudyPoint]:
        """Create the point's submission and record it in the plan file before it runs."""
        submission_id = self.runner.create(
            RunRequest(stream=plan.grid.stream, learner=point.learner, phase=plan.grid.phase, budget=point.run_budget())
        )
        plan = plan.with_submission(point, submission_id)
        write_plan(self.folder, plan, database=self._database)
        return plan, replace(point, submission_id=submission_id)

    def _run_point(self, point: StudyPoint, submission_id: int) -> None:
        try:
            self.runner.run(submission_id)
        except TaskFailedError as exc:
            raise TaskFailedError(
                f"Study point {point.label} (run {submission_id}) failed: {exc} Finished points are "
                "kept; rerun the same command to retry this one from its last committed task."
            ) from exc

    def _status(self, submission_id: int) -> str:
        return self._stored(submission_id).status

    def _stored(self, submission_id: int) -> RunPlan:
        try:
            return self.runner.plan(submission_id)
        except NevisError as exc:
            raise StudyPlanError(
                f"The study plan names run {submission_id}, which this database cannot give ({exc}). Is "
                f"NEVIS_DATABASE_URL the database the study was started with ({self._database})?"
            ) from None

    def _check_submission(self, point: StudyPoint, grid: StudyGrid, stream_name: str) -> None:
        """The recorded submission runs exactly this point (else the plan and the database
        disagree, e.g. another database than the study's)."""
        stored = self._stored(point.submission_id)  # type: ignore[arg-type]
        budget = stored.budget
        found = (stored.learner_spec, stored.manifest.name, stored.phase, budget.trials, budget.steps, budget.seed)
        wanted = (point.learner, stream_name, grid.phase, point.budget.trials, point.budget.steps, point.seed)
        if found != wanted:
            raise StudyPlanError(
                f"The study plan says run {point.submission_id} is {point.label} on {stream_name} "
                f"({grid.phase}), but in this database it is {stored.learner_spec} "
                f"{budget.trials}x{budget.steps} seed {budget.seed} on {stored.manifest.name} ({stored.phase}). "
                f"Is NEVIS_DATABASE_URL the database the study was started with ({self._database})?"
            )


__all__ = ["StudyObserver", "StudyOutcome", "StudyRunner"]
