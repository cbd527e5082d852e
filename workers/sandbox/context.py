"""The harness side of :class:`~workers.learners.protocol.TrialContext`.

One :class:`LocalTrialContext` lives in the process that runs learner code for one trial
(or one prediction job). It counts FLOPs through a :class:`~workers.sandbox.flops.FlopMeter`,
records the training curve, and turns ``progress`` calls at the configured steps into
checkpoints handed to ``on_checkpoint`` (the harness stores them; learner code never
touches the object store). In a trial it also offers the harness's dev scoring
(:mod:`workers.sandbox.dev_scoring`), so the learner's last validation is the harness's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from services.core.errors import LearnerError
from workers.sandbox.dev_scoring import DevScoring
from workers.sandbox.flops import FlopMeter

FLOP_REPORT_INTERVAL_S = 2.0
"""How often a trial's FLOPs so far are sent to harness code (at the next ``progress`` call):
a trial whose process is killed is charged what it spent up to its last report, so it loses
at most this interval (or one step, if a step takes longer)."""


class TrialStopped(BaseException):  # noqa: N818 - a signal, like KeyboardInterrupt
    """Raised in learner code by ``ctx.progress`` when the search's early stopping ends the
    trial at a rung. A BaseException, so a learner's ``except Exception`` does not swallow it."""

    def __init__(self, step: int) -> None:
        super().__init__(f"stopped early at step {step}")
        self.step = step


@dataclass
class CurvePoint:
    """One point of the learner's own training curve (the probes' pretext curve)."""

    step: int
    loss: float | None


@dataclass
class LocalTrialContext:
    """Context for learner code running in this process."""

    seed: int
    steps: int
    save_predictor: Callable[[Any], bytes]
    on_checkpoint: Callable[[int, bytes], None] = lambda step, data: None
    checkpoint_at: Iterable[int] = ()
    rung_at: Iterable[int] = ()  # steps where early stopping may end the trial (ASHA's rungs)
    on_rung: Callable[[int, Any], bool] = lambda step, predictor: True
    on_flops: Callable[[int, int], None] = lambda measured, reported: None  # FLOPs so far, periodically
    world_size: int = 1
    rank: int = 0
    device: str = "cpu"
    meter: FlopMeter = field(default_factory=FlopMeter)
    curve: list[CurvePoint] = field(default_factory=list)
    checkpointed: list[int] = field(default_factory=list)
    stored_checkpoints: list[dict[str, Any]] = field(default_factory=list)
    dev_scoring: DevScoring | None = None  # the harness's dev scoring, offered by ``dev_error``

    def __post_init__(self) -> None:
        self._pending = set(self.checkpoint_at)
        self._rungs = set(self.rung_at)
        self._flops_sent = -math.inf

    def track(self, module: Any) -> Any:
        return self.meter.track(module)

    def report_flops(self, flops: int) -> None:
        self.meter.report_flops(flops)

    def dev_error(self, predictor: Any) -> float | None:
        """The harness's dev error of ``predictor`` (``None`` where no dev split was given):
        a returned predictor with the same saved bytes is not scored again."""
        return None if self.dev_scoring is None else self.dev_scoring.error(predictor)

    def progress(self, step: int, predictor: Any, *, loss: float | None = None) -> None:
        if not isinstance(step, int) or step < 0:
            raise LearnerError(f"progress() takes a non-negative int step; got {step!r}.")
        if loss is not None:
            loss = float(loss)
            if math.isnan(loss):
                loss = math.inf  # a diverged run is the worst loss, not a missing one
        self.curve.append(CurvePoint(step, loss))
        now = time.monotonic()
        if now - self._flops_sent >= FLOP_REPORT_INTERVAL_S:
            self._flops_sent = now
            self.on_flops(int(self.meter.measured), int(self.meter.reported))
        if step in self._pending and self.rank == 0:
            self._pending.discard(step)
            self.on_checkpoint(step, self.save_predictor(predictor))
            self.checkpointed.append(step)
        if step in self._rungs:
            self._rungs.discard(step)
            if not self.on_rung(step, predictor):
                raise TrialStopped(step)

    @property
    def missed_checkpoints(self) -> tuple[int, ...]:
        """Requested checkpoint steps the learner never reached (reported, not fatal)."""
        return tuple(sorted(self._pending))


__all__ = ["FLOP_REPORT_INTERVAL_S", "CurvePoint", "LocalTrialContext", "TrialStopped"]
