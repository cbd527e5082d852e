"""The context the probe pool hands learner code when it loads a checkpoint and extracts
features: the learner protocol's :class:`~workers.learners.protocol.TrialContext`, minus
what only training needs.

Probing is the service's own measurement, not the learner's compute, so nothing is metered
(``track`` returns the module untouched) and there is no curve or checkpoint to record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProbeContext:
    """A one-process, unmetered context for ``load_predictor`` and ``features``."""

    seed: int
    steps: int = 1
    world_size: int = 1
    rank: int = 0
    device: str = "cpu"

    def track(self, module: Any) -> Any:
        return module

    def report_flops(self, flops: int) -> None:
        """Probing spends the service's FLOPs, never the learner's: nothing to count."""

    def progress(self, step: int, predictor: Any, *, loss: float | None = None) -> None:
        """No training curve while probing."""


__all__ = ["ProbeContext"]
