"""No trial waits for resources without a deadline.

Ray Tune keeps a trial ``PENDING`` for as long as its bundle cannot be placed, silently. The
runner refuses an ask no node could ever hold before the run starts
(:mod:`workers.trainer.placement`); this callback covers the rest (the nodes are there but
never free: another run, a lost node): once the task's trials have all been pending, none
running, for :data:`PENDING_DEADLINE_S`, the task fails with an error naming what its trials
ask for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from ray import tune

from services.core.errors import LearnerError

PENDING_DEADLINE_S = 900.0


class PlacementTimeout(LearnerError):
    """The task's trials waited past the deadline for resources that never came free."""


class PendingDeadline(tune.Callback):
    """Fails the Tune run once no trial has run for ``deadline_s`` while some wait."""

    def __init__(
        self, asked: str, *, deadline_s: float = PENDING_DEADLINE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.asked, self.deadline_s, self.clock = asked, deadline_s, clock
        self._since: float | None = None

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self.check(t.status for t in trials)

    def check(self, statuses: Iterable[str]) -> None:
        """Note the trials' statuses now; raise :class:`PlacementTimeout` past the deadline."""
        seen = set(statuses)
        if "RUNNING" in seen or "PENDING" not in seen:
            self._since = None
            return
        now = self.clock()
        if self._since is None:
            self._since = now
        elif now - self._since > self.deadline_s:
            raise PlacementTimeout(
                f"no trial of this task could start within {self.deadline_s:g} s: each asks for {self.asked}, "
                "and the cluster never had that free on one node (`ray status` shows what holds it)"
            )


__all__ = ["PENDING_DEADLINE_S", "PendingDeadline", "PlacementTimeout"]
