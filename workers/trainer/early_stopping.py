"""Asynchronous successive halving (ASHA) for the trials of one task, decided in harness code.

Trials run inside learner hosts, far from Tune's trial loop, so their intermediate results
come to the task's harness actor instead: at each rung step a trial's host scores the
predictor on the dev split (harness-side ``task_error``; the learner's ``predict`` passes are
charged like any other) and asks whether to go on. The rule is ASHA's (Li et al., 2020, the
one Ray Tune's ``AsyncHyperBandScheduler`` applies): a trial continues past a rung only if
its dev error is within the best ``1/eta`` of the errors recorded at that rung so far; until
``eta`` trials have reached a rung every trial continues. A stopped trial ends with status
``stopped``, keeps the FLOPs it spent, and is never the task's chosen trial.

Rungs are ``steps / eta**k`` for k = ``rungs`` … 1 (rounded, at least one step, distinct), so the
survivors of the last rung train to the full budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

DEFAULT_ETA = 3
DEFAULT_RUNGS = 2


def rung_steps(steps: int, *, eta: int = DEFAULT_ETA, rungs: int = DEFAULT_RUNGS) -> tuple[int, ...]:
    """The steps at which trials are compared, smallest first; all strictly below ``steps``."""
    if eta < 2 or rungs < 1 or steps < 1:
        raise ValueError(f"ASHA needs eta >= 2, rungs >= 1 and steps >= 1; got {eta}, {rungs}, {steps}.")
    out = {max(1, round(steps / eta**k)) for k in range(rungs, 0, -1)}
    return tuple(sorted(s for s in out if s < steps))


@dataclass(frozen=True)
class StoppingRule:
    """What a trial scheduler asks of the harness: rung steps (none: every trial runs to its
    end), how many trials share one promotion (``eta``), and what is compared there: dev
    error, or with ``proxy`` the negated LiDAR of augmented train views (lower is better)."""

    rungs: tuple[int, ...] = ()
    eta: int = DEFAULT_ETA
    proxy: dict[str, int] | None = None  # the ``proxy`` scheduler: LiDAR views {n, q, seed}, not dev error


@dataclass
class SuccessiveHalving:
    """ASHA's promotion rule over one task's trials (an object of the harness actor)."""

    rungs: tuple[int, ...]
    eta: int = DEFAULT_ETA
    recorded: dict[int, list[float]] = field(default_factory=dict)
    stopped: set[int] = field(default_factory=set)

    def report(self, trial_index: int, step: int, dev_error: float) -> bool:
        """Record ``dev_error`` of a trial at rung ``step``; whether it may go on.

        A step that is not a rung, or a non-finite error, is recorded as the worst value:
        a diverged trial never blocks others and is stopped when enough have reported.
        """
        if step not in self.rungs:
            return True
        value = dev_error if math.isfinite(dev_error) else math.inf
        seen = self.recorded.setdefault(step, [])
        seen.append(value)
        if len(seen) < self.eta:
            return True
        cutoff = sorted(seen)[max(0, math.ceil(len(seen) / self.eta) - 1)]
        go_on = value <= cutoff
        if not go_on:
            self.stopped.add(trial_index)
        return go_on


__all__ = ["DEFAULT_ETA", "DEFAULT_RUNGS", "StoppingRule", "SuccessiveHalving", "rung_steps"]
