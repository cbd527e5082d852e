"""What the code around a run's driver needs of it: its settings, database, store, actors and
data, and the learner it checks. :class:`~workers.trainer.stream_runner.StreamRunner` has them;
:mod:`workers.trainer.run_create` and :mod:`workers.trainer.task_steps` take any object that
does, so they need not import the runner (nor it them, both ways).
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from services.core.budget import RunBudget
from services.core.config import Settings
from services.store.objects import ObjectStore
from workers.sandbox.client import HostSpec
from workers.sandbox.declaration import LearnerDeclaration
from workers.trainer.run_actors import RunActors
from workers.trainer.run_data import RunData


class RunParts(Protocol):
    """A run's driver, as the steps of a submission and of a task use it."""

    settings: Settings
    sessions: sessionmaker[Session]
    store: ObjectStore
    actors: RunActors
    data: RunData

    def learner(self, spec: str, budget: RunBudget) -> tuple[HostSpec, LearnerDeclaration]: ...
    def run(self, submission_id: int) -> None: ...


__all__ = ["RunParts"]
