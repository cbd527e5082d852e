"""How well LiDAR and RankMe rank checkpoints by linear-probe accuracy (METRICS.md §3).

One point per probed checkpoint: its LiDAR, its RankMe, and the held-out accuracy of the
linear probe on its own task. Scopes:
- ``trials`` (the headline): across the trials of one task, one point per trial, its final
  (last probed) checkpoint: models trained with different hyper-parameters, as the LiDAR
  paper ranks them. It needs every trial probed (``--all-trials``; the ``publish`` preset);
- ``trials_mean``: the mean of the defined per-task ``trials`` values;
- ``task``: across the checkpoints of one task's probed trials, mostly along one training
  trajectory (the chosen trial's): the within-trajectory correlation, kept and labelled so;
- ``task_mean``: the mean of the defined per-task values;
- ``pooled``: across every checkpoint of the submission, tasks mixed. Kept as a labelled
  secondary figure only: between-task differences in accuracy and in the proxies can
  dominate it, so the per-task values (and their mean) are the ones to read.
An undefined correlation (fewer than 2 points, or a constant input) is None, never a number.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from services.core.metric_specs import PROXIES
from workers.probe.scores.probe_metrics import kendall_tau_b, spearman

PROXY_NAMES = PROXIES  # the one list: services.core.metric_specs


@dataclass(frozen=True)
class ProxyPoint:
    """One checkpoint's proxies and its linear-probe accuracy on its own task."""

    task_order: int
    trial_id: int
    step: int
    lidar: float
    rankme: float
    accuracy: float


@dataclass(frozen=True)
class Correlation:
    """Spearman ρ and Kendall τ-b of one proxy against accuracy, over one scope."""

    scope: str
    task_order: int  # 0 unless scope == "task"
    proxy: str
    spearman: float | None
    kendall_tau_b: float | None
    num_points: int


def _defined(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _pair(proxy: Sequence[float], accuracy: Sequence[float]) -> tuple[float | None, float | None]:
    if len(proxy) < 2:
        return None, None
    return _defined(spearman(proxy, accuracy)), _defined(kendall_tau_b(proxy, accuracy))


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def final_points(points: Sequence[ProxyPoint]) -> list[ProxyPoint]:
    """Each trial's last probed checkpoint (highest step), in trial order."""
    last: dict[int, ProxyPoint] = {}
    for point in points:
        if point.trial_id not in last or point.step > last[point.trial_id].step:
            last[point.trial_id] = point
    return [last[t] for t in sorted(last)]


def _across_trials(by_task: dict[int, list[ProxyPoint]]) -> list[Correlation]:
    """The ``trials`` scope of every task and its ``trials_mean``."""
    out: list[Correlation] = []
    pairs: dict[str, list[tuple[float | None, float | None]]] = defaultdict(list)
    total = 0
    for order in sorted(by_task):
        finals = final_points(by_task[order])
        total += len(finals)
        for proxy in PROXY_NAMES:
            rho, tau = _pair([getattr(p, proxy) for p in finals], [p.accuracy for p in finals])
            pairs[proxy].append((rho, tau))
            out.append(Correlation("trials", order, proxy, rho, tau, len(finals)))
    for proxy in PROXY_NAMES:
        out.append(
            Correlation(
                "trials_mean", 0, proxy, _mean(r for r, _ in pairs[proxy]), _mean(t for _, t in pairs[proxy]), total
            )
        )
    return out


def proxy_correlations(points: Sequence[ProxyPoint]) -> list[Correlation]:
    """Every scope's correlations for both proxies (see the module docstring).

    Examples:
        >>> pts = [ProxyPoint(1, 1, s, l, 2.0, a) for s, l, a in [(0, 1.0, .1), (1, 2.0, .5), (2, 3.0, .4)]]
        >>> [(c.scope, c.proxy, c.spearman) for c in proxy_correlations(pts)][:2]
        [('task', 'lidar', 0.5), ('task', 'rankme', None)]
    """
    by_task: dict[int, list[ProxyPoint]] = defaultdict(list)
    for point in points:
        by_task[point.task_order].append(point)
    out: list[Correlation] = []
    per_task: dict[str, list[tuple[float | None, float | None]]] = defaultdict(list)
    for order in sorted(by_task):
        group = by_task[order]
        accuracy = [p.accuracy for p in group]
        for proxy in PROXY_NAMES:
            rho, tau = _pair([getattr(p, proxy) for p in group], accuracy)
            per_task[proxy].append((rho, tau))
            out.append(Correlation("task", order, proxy, rho, tau, len(group)))
    out += _across_trials(by_task)
    for proxy in PROXY_NAMES:
        rho, tau = _pair([getattr(p, proxy) for p in points], [p.accuracy for p in points])
        out.append(Correlation("pooled", 0, proxy, rho, tau, len(points)))
        pairs = per_task[proxy]
        out.append(
            Correlation("task_mean", 0, proxy, _mean(r for r, _ in pairs), _mean(t for _, t in pairs), len(points))
        )
    return out


__all__ = ["PROXY_NAMES", "Correlation", "ProxyPoint", "final_points", "proxy_correlations"]
