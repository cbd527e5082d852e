"""A task's running charge against its ruleset's cap (``budget-<X>``), kept by harness code.

The task harness actor (:class:`~workers.trainer.harness.TaskHarness`) holds one
:class:`TaskCharge` per task attempt. Trials tell it what they spent as they go (the learner
hosts' interim FLOP reports, read by harness code) and, once a trial ends, the runner settles
it at its charge (the higher of meter and floor). A trial of sandboxed ranks reports every
rank's count (:mod:`workers.trainer.rank_trial`), so the running charge is what all its ranks
spent, not rank 0's alone: a learner cannot hide its work on rank 1 until the trial ends. The
total is what every trial of the task spent; a trial may go on while it is below the cap, and
none starts once it is reached. The learner never talks to it: its hosts' reports only feed
it, through harness code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.core.rulesets import cap_message

PREPARATION = -1
"""The index the task's ``prepare_task`` is settled under: charged once, before any trial, so
its work (FT-d's choice among earlier models) counts against the cap like a trial's."""


@dataclass
class TaskCharge:
    """Running charge of one task's trials against ``cap`` cFLOP."""

    cap: float
    _running: dict[tuple[int, int], int] = field(default_factory=dict)  # (trial, rank): interim reports
    _settled: dict[int, int] = field(default_factory=dict)  # final charges of ended trials

    @property
    def total(self) -> int:
        """Everything the task's trials spent so far: ended trials' charges, running ones' reports
        (every rank's)."""
        return sum(self._settled.values()) + sum(self._running.values())

    @property
    def reached(self) -> bool:
        return self.total >= self.cap

    def report(self, trial_index: int, flops: int, rank: int = 0) -> bool:
        """Rank ``rank`` of a running trial spent ``flops`` so far (each rank's reports only
        grow); whether the trial may go on."""
        index = int(trial_index)
        if index not in self._settled:
            key = (index, int(rank))
            self._running[key] = max(self._running.get(key, 0), int(flops))
        return not self.reached

    def settle(self, trial_index: int, flops: int) -> None:
        """A trial ended, charged ``flops`` (meter or floor, whichever is higher, all ranks
        summed): it replaces every rank's interim reports."""
        index = int(trial_index)
        for key in [k for k in self._running if k[0] == index]:
            del self._running[key]
        self._settled[index] = max(self._settled.get(index, 0), int(flops))


__all__ = ["PREPARATION", "TaskCharge", "cap_message"]
