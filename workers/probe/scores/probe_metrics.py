"""The probe metrics of METRICS.md §2 and §3: the public face other tools import.

Contract: every metric is a pure function of arrays, computed in float64 with numpy only
(no scipy, no torch). Curves are non-empty 1-D sequences of finite numbers; results are
Python floats or float64 arrays. The only infinite result is the +inf of the OFM special
case. Anything a metric is not defined for (empty or non-finite input, wrong shape,
mismatched lengths, n < 2 or q < 2 for LiDAR) raises :class:`MetricInputError`, a
``ValueError``, whose message names the parameter, the function and what it needs.

:data:`METRICS` (declared in :mod:`services.core.metric_specs`) registers each scalar metric's
direction and its aggregation across tasks, so a leaderboard reads them instead of guessing;
:func:`get_metric_spec` looks one up.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.core.errors import UnknownNameError, unknown_name_message
from services.core.metric_checks import MetricInputError
from services.core.metric_specs import PROBE_METRICS, MetricSpec
from services.core.ranks import lidar, lidar_at_deltas, lidar_eigenvalues, rankme
from workers.probe.scores.correlation import kendall_tau_b, spearman
from workers.probe.scores.mismatch import (
    cofm,
    csm3,
    m3,
    mm3,
    mofm,
    mofm_max,
    msm3,
    msm3max,
    msm3max_index,
    ofm_curve,
    ofm_normalize,
    sm3,
)
from workers.probe.scores.mismatch_cv import convergence_epoch, interpolate_integer_epochs, mm3_cv, soft_mismatch_cv

METRICS: Mapping[str, MetricSpec] = PROBE_METRICS
"""The probe metrics' specs, declared in :mod:`services.core.metric_specs` (where the store
and the dashboard may read them) and re-exported here beside the functions."""


def get_metric_spec(name: str) -> MetricSpec:
    """The registered :class:`MetricSpec` of ``name``.

    Raises:
        UnknownNameError: ``name`` is not registered; the message suggests close names.

    Examples:
        >>> get_metric_spec("mofm").higher_is_better
        False
    """
    try:
        return METRICS[name]
    except KeyError:
        raise UnknownNameError(unknown_name_message("metric", name, METRICS)) from None


__all__ = [
    "METRICS",
    "MetricInputError",
    "MetricSpec",
    "cofm",
    "convergence_epoch",
    "csm3",
    "get_metric_spec",
    "interpolate_integer_epochs",
    "kendall_tau_b",
    "lidar",
    "lidar_at_deltas",
    "lidar_eigenvalues",
    "m3",
    "mm3",
    "mm3_cv",
    "mofm",
    "mofm_max",
    "msm3",
    "msm3max",
    "msm3max_index",
    "ofm_curve",
    "ofm_normalize",
    "rankme",
    "sm3",
    "soft_mismatch_cv",
    "spearman",
]
