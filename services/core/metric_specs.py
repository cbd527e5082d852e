"""Every scalar metric's spec: which way is better and how a phase's tasks combine.

The headline metrics (E, cFLOP: METRICS.md §1) and the probe metrics (§2 and §3) are declared
here, in the lowest layer, so that every view that ranks by a metric reads its direction
instead of guessing: the leaderboard's sort and rank (:mod:`services.store.runs.leaderboard`),
the performance profiles (:mod:`services.core.profiles`) and the proxy policies
(:mod:`services.core.proxy_policies`). Readers look a spec up when they rank
(:func:`metric_spec`), not at import time, so the table is the one place a direction lives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from services.core.errors import UnknownNameError, unknown_name_message

Aggregation = Literal["mean", "sum"]


@dataclass(frozen=True)
class MetricSpec:
    """How to read one scalar metric, headline or probe: which way is better and how the
    values of a phase's tasks combine into one figure per run. The one spec type every
    ranking view reads.

    Attributes:
        name: The registered name.
        higher_is_better: True for scores, False for errors, costs and mismatch values.
        aggregation: How per-task values combine: ``mean`` (E, probe metrics) or ``sum`` (cFLOP).
        description: One line for tables and tooltips.
    """

    name: str
    higher_is_better: bool
    aggregation: Aggregation
    description: str

    @property
    def direction(self) -> str:
        """ "max" or "min", for sorting a leaderboard column."""
        return "max" if self.higher_is_better else "min"


def _specs(*specs: MetricSpec) -> Mapping[str, MetricSpec]:
    return MappingProxyType({spec.name: spec for spec in specs})


HEADLINE_METRICS: Mapping[str, MetricSpec] = _specs(
    MetricSpec("E", False, "mean", "mean error over the phase's tasks (METRICS.md §1)"),
    MetricSpec("cFLOP", False, "sum", "FLOPs of the whole stream, search included"),
)
"""The headline metrics a run is ranked by (:func:`~services.core.metrics.mean_error`,
:func:`~services.core.metrics.cflop`)."""

# Mismatch values are lower-is-better (METRICS.md §2); ranks and rank correlations are scores.
PROBE_METRICS: Mapping[str, MetricSpec] = _specs(
    MetricSpec("mm3", False, "mean", "MM3: mean target minus pretext error (percent points)"),
    MetricSpec("msm3", False, "mean", "MSM3: mean soft mismatch of the target error"),
    MetricSpec("csm3", False, "mean", "cSM3: soft mismatch of the target error at convergence"),
    MetricSpec("msm3max", False, "mean", "mSM3: largest soft mismatch of the target error"),
    MetricSpec("mofm", False, "mean", "MOFM: mean objective-function mismatch of the target loss"),
    MetricSpec("cofm", False, "mean", "cOFM: objective-function mismatch at convergence"),
    MetricSpec("mofm_max", False, "mean", "mOFM: largest objective-function mismatch"),
    MetricSpec("lidar", True, "mean", "LiDAR: effective rank of the augmentation-LDA matrix"),
    MetricSpec("rankme", True, "mean", "RankMe: effective rank of the embedding matrix"),
    MetricSpec("spearman", True, "mean", "Spearman rho between a proxy and probe accuracy"),
    MetricSpec("kendall_tau_b", True, "mean", "Kendall tau-b between a proxy and probe accuracy"),
)
"""The probe metrics (the probe pool computes them: :mod:`workers.probe.scores.probe_metrics`)."""

PROXIES: tuple[str, ...] = ("lidar", "rankme")
"""The label-free proxies (METRICS.md §3): probed per checkpoint, stored per checkpoint
(``probe_checkpoint_results.proxy``), replayed as trial choosers (:mod:`services.core.proxy_policies`)."""


def metric_spec(name: str) -> MetricSpec:
    """The spec of a headline or probe metric, read from the tables when asked.

    Raises:
        UnknownNameError: ``name`` is not registered; the message suggests close names.

    Examples:
        >>> metric_spec("E").higher_is_better
        False
    """
    found = HEADLINE_METRICS.get(name) or PROBE_METRICS.get(name)
    if found is None:
        raise UnknownNameError(unknown_name_message("metric", name, {**HEADLINE_METRICS, **PROBE_METRICS}))
    return found


__all__ = ["HEADLINE_METRICS", "PROBE_METRICS", "PROXIES", "Aggregation", "MetricSpec", "metric_spec"]
