"""The context the probe pool hands learner code when it loads a checkpoint and extracts
features: the learner protocol's :class:`~workers.learners.protocol.TrialContext`, minus
what only training needs, plus the tally of what those calls cost.

Probing is the service's own measurement, not the learner's compute: its FLOPs are counted
(the harness's :class:`~workers.sandbox.metering.flops.FlopMeter`, the same meter and conventions as
training and prediction) but kept apart as *analysis FLOPs*, never added to the learner's
cFLOP. In the probe pool learner code runs in a learner host, whose meter counts each call
(watching, so modules the learner did not pass to ``ctx.track`` count too) and sends the
figures back; :class:`~workers.sandbox.learner_calls.SandboxedLearner` hands them to
:meth:`ProbeContext.charge_host_flops`. A learner object called in this process (tests,
tools) is counted by this context's own meter: the modules it tracks and the FLOPs it reports.
There is no curve or checkpoint to record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, SupportsFloat

from workers.sandbox.metering.flops import FlopMeter


@dataclass(frozen=True)
class AnalysisFlops:
    """FLOPs of learner code run for the analysis: ``measured`` (forward and backward passes
    of torch modules), ``reported`` (the learner's own ``report_flops``) and ``untracked`` (the
    part of ``measured`` from modules it did not track)."""

    measured: int = 0
    reported: int = 0
    untracked: int = 0

    @property
    def total(self) -> int:
        return self.measured + self.reported

    def __add__(self, other: AnalysisFlops) -> AnalysisFlops:
        return AnalysisFlops(
            self.measured + other.measured, self.reported + other.reported, self.untracked + other.untracked
        )

    def to_dict(self) -> dict[str, int]:
        return {"measured": self.measured, "reported": self.reported, "untracked": self.untracked, "total": self.total}


@dataclass
class ProbeContext:
    """A one-process context for ``load_predictor``, ``features`` and ``predict`` that counts
    their FLOPs as analysis FLOPs (see the module docstring)."""

    seed: int
    steps: int = 1
    world_size: int = 1
    rank: int = 0
    device: str = "cpu"
    meter: FlopMeter = field(default_factory=FlopMeter, repr=False)
    hosted: AnalysisFlops = AnalysisFlops()

    def track(self, module: Any) -> Any:
        return self.meter.track(module)

    def report_flops(self, flops: int) -> None:
        self.meter.report_flops(flops)

    def progress(self, step: int, predictor: Any, *, loss: SupportsFloat | None = None) -> None:
        """No training curve while probing."""

    def charge_host_flops(self, counts: Mapping[str, int]) -> None:
        """Add what a learner host's meter counted for one call (checked by
        :func:`~workers.sandbox.messages.flop_fields`, with its reply)."""
        self.hosted = self.hosted + AnalysisFlops(
            int(counts["flops_measured"]), int(counts["flops_reported"]), int(counts["flops_untracked"])
        )

    @property
    def flops(self) -> AnalysisFlops:
        """Everything the calls made with this context cost so far, in hosts and here."""
        here = AnalysisFlops(self.meter.measured, self.meter.reported, self.meter.untracked)
        return self.hosted + here

    def close(self) -> None:
        """Let go of the modules this context's meter tracks (the figures stay)."""
        self.meter.untrack_all()


__all__ = ["AnalysisFlops", "ProbeContext"]
