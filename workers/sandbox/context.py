"""The harness side of :class:`~workers.learners.protocol.TrialContext`.

One :class:`LocalTrialContext` lives in the process that runs learner code for one trial
(or one prediction job). It counts FLOPs through a :class:`~workers.sandbox.metering.flops.FlopMeter`,
records the training curve, and turns ``progress`` calls at the configured steps into
checkpoints handed to ``on_checkpoint`` (the harness stores them; learner code never
touches the object store). In a trial it also offers the harness's dev scoring
(:mod:`workers.sandbox.dev_scoring`), so the learner's last validation is the harness's.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, SupportsFloat

from services.core.errors import LearnerError
from workers.sandbox.dev_scoring import DevScoring
from workers.sandbox.metering.flops import FlopMeter

LOSS_READ_EVERY = 64
"""Losses reported as tensors are read in batches of this many points (and whenever the
curve is read): reading a GPU tensor waits for the device, so a learner that reported
``float(loss)`` every step kept the host from queueing the next step ahead of the device."""

FLOP_REPORT_INTERVAL_S = 2.0
"""How often a trial's FLOPs so far are sent to harness code (at the next ``progress`` call):
a trial whose process is killed is charged what it spent up to its last report, so it loses
at most this interval (or one step, if a step takes longer)."""


class TrialStopped(BaseException):
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
    flop_report_interval_s: float = FLOP_REPORT_INTERVAL_S  # 0: every step (a task capped by its ruleset)
    world_size: int = 1
    rank: int = 0
    device: str = "cpu"
    meter: FlopMeter = field(default_factory=FlopMeter)
    _points: list[CurvePoint] = field(default_factory=list, init=False, repr=False)
    checkpointed: list[int] = field(default_factory=list)
    stored_checkpoints: list[dict[str, Any]] = field(default_factory=list)
    dev_scoring: DevScoring | None = None  # the harness's dev scoring, offered by ``dev_error``

    def __post_init__(self) -> None:
        self._pending = set(self.checkpoint_at)
        self._rungs = set(self.rung_at)
        self._flops_sent = -math.inf
        self._unread: list[tuple[CurvePoint, Any]] = []  # points whose loss is a tensor, not read yet

    def track(self, module: Any) -> Any:
        return self.meter.track(module)

    def report_flops(self, flops: int) -> None:
        self.meter.report_flops(flops)

    def dev_error(self, predictor: Any) -> float | None:
        """The harness's dev error of ``predictor`` (``None`` where no dev split was given):
        a returned predictor with the same saved bytes is not scored again."""
        return None if self.dev_scoring is None else self.dev_scoring.error(predictor)

    def progress(self, step: int, predictor: Any, *, loss: SupportsFloat | None = None) -> None:
        if not isinstance(step, int) or step < 0:
            raise LearnerError(f"progress() takes a non-negative int step; got {step!r}.")
        point = CurvePoint(step, None)
        self._points.append(point)
        if loss is not None:
            if _is_tensor(loss):
                self._keep_unread(point, loss)
            else:
                point.loss = _curve_loss(float(loss))
        now = time.monotonic()
        if now - self._flops_sent >= self.flop_report_interval_s:
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
    def curve(self) -> list[CurvePoint]:
        """The training curve so far, every loss read."""
        self._read_losses()
        return self._points

    def wire_curve(self, *, or_empty: bool = False) -> list[list[Any]]:
        """``[step, loss]`` pairs as a host sends them (JSON has no infinity: ``"inf"``); with
        ``or_empty``, a trial that ended early and whose losses cannot be read sends none
        rather than a second failure."""
        try:
            points = self.curve
        except LearnerError:
            if not or_empty:
                raise
            points = []
        return [[p.step, "inf" if p.loss == math.inf else p.loss] for p in points]

    def _keep_unread(self, point: CurvePoint, loss: Any) -> None:
        if loss.numel() != 1:  # metadata: no wait for the device
            raise LearnerError(f"progress() takes a loss of one element; got a tensor of shape {tuple(loss.shape)}.")
        self._unread.append((point, loss.detach()))
        if len(self._unread) >= LOSS_READ_EVERY:
            self._read_losses()

    def _read_losses(self) -> None:
        """Read the unread tensor losses at once: one wait for their device, not one a step."""
        if not self._unread:
            return
        import torch  # noqa: PLC0415 - only learners that report tensors reach this

        points, tensors = zip(*self._unread, strict=True)
        try:
            values = torch.stack([t.reshape(()).float() for t in tensors]).tolist()
        except RuntimeError:  # on several devices: one at a time
            try:
                values = [float(t) for t in tensors]
            except (RuntimeError, TypeError, ValueError) as exc:
                raise LearnerError(f"A loss passed to progress() could not be read as a number: {exc}") from exc
        for point, value in zip(points, values, strict=True):
            point.loss = _curve_loss(value)
        self._unread = []

    @property
    def missed_checkpoints(self) -> tuple[int, ...]:
        """Requested checkpoint steps the learner never reached (reported, not fatal)."""
        return tuple(sorted(self._pending))


def _is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")  # a tensor's module is loaded already; never import it here
    return torch is not None and isinstance(value, torch.Tensor)


def _curve_loss(value: float) -> float:
    return math.inf if math.isnan(value) else value  # a diverged run is the worst loss, not a missing one


__all__ = ["FLOP_REPORT_INTERVAL_S", "LOSS_READ_EVERY", "CurvePoint", "LocalTrialContext", "TrialStopped"]
