"""A task's running charge against its ruleset's cap (``budget-<X>``), kept by harness code.

The task harness actor (:class:`~workers.trainer.harness.TaskHarness`) holds one
:class:`TaskCharge` per task attempt. Trials tell it what they spent as they go (the learner
host's interim FLOP reports, read by harness code) and, once a trial ends, the runner settles
it at its charge (the higher of meter and floor). The total is what every trial of the task
spent; a trial may go on while it is below the cap, and none starts once it is reached. The
learner never talks to it: its host's reports only feed it, through harness code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.core.rulesets import cap_message


@dataclass
class TaskCharge:
    """Running charge of one task's trials against ``cap`` cFLOP."""

    cap: float
    _running: dict[int, int] = field(default_factory=dict)  # interim reports of trials still running
    _settled: dict[int, int] = field(default_factory=dict)  # final charges of ended trials

    @property
    def total(self) -> int:
        """Everything the task's trials spent so far: ended trials' charges, running ones' reports."""
        return sum(self._settled.values()) + sum(self._running.values())

    @property
    def reached(self) -> bool:
        return self.total >= self.cap

    def report(self, trial_index: int, flops: int) -> bool:
        """A running trial spent ``flops`` so far (reports only grow); whether it may go on."""
        index = int(trial_index)
        if index not in self._settled:
            self._running[index] = max(self._running.get(index, 0), int(flops))
        return not self.reached

    def settle(self, trial_index: int, flops: int) -> None:
        """A trial ended, charged ``flops`` (meter or floor, whichever is higher)."""
        index = int(trial_index)
        self._running.pop(index, None)
        self._settled[index] = max(self._settled.get(index, 0), int(flops))


__all__ = ["TaskCharge", "cap_message"]
