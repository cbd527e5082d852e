"""The across-trial correlation of each proxy with linear-probe accuracy, per task, with its n,
a permutation null and a bootstrap interval (:func:`services.core.rank_tests.rank_test`).

Why here, from the report's checkpoint rows and not the summary job's stored ρ: the stored
``trials`` correlation is a bare number, and with about 4 trials per task a ρ of 0.8 is what
chance gives one time in six. This reads the same points (each probed trial's final checkpoint:
its LiDAR, RankMe and own-task linear-probe accuracy, as
:func:`workers.probe.scores.proxies.final_points` picks them) and adds what it takes to read ρ.
Seeded, so a report reads the same every time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.core.metric_specs import PROXIES
from services.core.rank_tests import RankTest, rank_test

SEED = 0


@dataclass(frozen=True)
class AcrossTrials:
    """One proxy against linear-probe accuracy over one task's trials (final checkpoints)."""

    task_order: int
    proxy: str
    test: RankTest


def final_checkpoints(checkpoints: Sequence[Any]) -> dict[int, list[Any]]:
    """Task order → each probed trial's last checkpoint (highest step), in trial order."""
    last: dict[int, Any] = {}
    for c in checkpoints:
        if c.trial_id not in last or c.step > last[c.trial_id].step:
            last[c.trial_id] = c
    by_task: dict[int, list[Any]] = defaultdict(list)
    for c in sorted(last.values(), key=lambda c: (c.task_order, c.trial_index)):
        by_task[c.task_order].append(c)
    return dict(by_task)


def across_trials(checkpoints: Sequence[Any], *, seed: int = SEED) -> tuple[AcrossTrials, ...]:
    """Per task and proxy, the rank test over the trials whose final checkpoint has both the
    proxy and the linear-probe accuracy (``checkpoints``: the report's rows)."""
    out = []
    for order, finals in sorted(final_checkpoints(checkpoints).items()):
        for proxy in PROXIES:
            pairs = [
                (getattr(c, proxy), c.linear_accuracy)
                for c in finals
                if getattr(c, proxy) is not None and c.linear_accuracy is not None
            ]
            if pairs:
                x, y = zip(*pairs, strict=True)
                out.append(AcrossTrials(order, proxy, rank_test(x, y, seed=seed)))
    return tuple(out)


__all__ = ["SEED", "AcrossTrials", "across_trials", "final_checkpoints"]
