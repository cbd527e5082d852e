"""What a run is, apart from how it is driven: the request ``nevis run`` makes, the plan the
database holds for a submission (read once per task), one attempt at one task, and the
observer that shows a run's progress. :class:`~workers.trainer.stream_runner.StreamRunner`
drives them; the study and pre-training code build them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from services.core.budget import RunBudget
from services.core.rulesets import TaskRules, ruleset
from services.store.runs import run_keys
from services.store.runs.outcomes import TaskOutcome, TrialOutcome
from workers.sandbox.declaration import LearnerDeclaration
from workers.stream.manifest import StreamManifest, TaskSpec


class RunObserver(Protocol):
    """What the runner tells a user interface (progress bars, logs)."""

    def task_started(self, task: TaskSpec, position: int, total: int, trials: int) -> None: ...
    def trial_finished(self, task: TaskSpec, outcome: TrialOutcome) -> None: ...
    def task_committed(self, task: TaskSpec, outcome: TaskOutcome) -> None: ...


class Silent:
    """The observer of a run nobody watches."""

    def task_started(self, task: TaskSpec, position: int, total: int, trials: int) -> None: ...
    def trial_finished(self, task: TaskSpec, outcome: TrialOutcome) -> None: ...
    def task_committed(self, task: TaskSpec, outcome: TaskOutcome) -> None: ...


@dataclass(frozen=True)
class RunRequest:
    """What ``nevis run`` asks for."""

    stream: str
    learner: str
    phase: str = "meta_test"
    budget: RunBudget = RunBudget()
    image_size: int | None = None
    pretrained: str | None = None  # a checkpoint file, or an object-store key, for PT / PT+FT
    visibility: str = "public"  # "private": a run without an owner, so shown to admins only
    ruleset: str = "open"  # services.core.rulesets: what the harness enforces, its leaderboard


@dataclass(frozen=True)
class RunPlan:
    """Everything stored about a submission that the runner needs, read once per task."""

    submission_id: int
    manifest: StreamManifest
    tasks: tuple[TaskSpec, ...]  # the phase's tasks, in order
    learner_spec: str
    phase: str
    cursor: int
    status: str
    budget: RunBudget
    image_size: int
    pretrained_key: str | None = None
    ruleset: str = "open"

    @property
    def rules(self) -> TaskRules:
        """What the harness enforces in each task under the run's ruleset."""
        return ruleset(self.ruleset).task_rules

    def next_task(self) -> TaskSpec | None:
        """The task at the cursor, or None once the submission is done (succeeded, or
        stopped by a cap: resuming a stopped run runs nothing)."""
        if self.status in ("succeeded", "stopped"):
            return None
        return next((t for t in self.tasks if t.order >= self.cursor), None)

    def next_order(self, task: TaskSpec) -> int | None:
        """The order of the task after ``task`` in this run, or None if it is the last."""
        return next((t.order for t in self.tasks if t.order > task.order), None)


@dataclass(frozen=True)
class Attempt:
    """One attempt at one task: its task run row and where its objects go."""

    plan: RunPlan
    task: TaskSpec
    run_id: int
    number: int
    started: float  # perf_counter at the start

    @property
    def key_prefix(self) -> str:
        return run_keys.attempt_prefix(self.plan.submission_id, self.task.order, self.number)


def preferred_budget(budget: RunBudget, learner: LearnerDeclaration) -> RunBudget:
    """``budget`` with the learner's preferred search strategy, unless the run named one."""
    if learner.preferred_search is None or "search" in budget.model_fields_set:
        return budget
    return RunBudget(**{**budget.to_dict(), "search": learner.preferred_search})


__all__ = ["Attempt", "RunObserver", "RunPlan", "RunRequest", "Silent", "preferred_budget"]
