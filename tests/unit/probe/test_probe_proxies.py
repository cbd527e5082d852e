"""Proxy correlations per task, pooled and averaged, with undefined values as None."""

from __future__ import annotations

import pytest

from workers.probe.scores.proxies import ProxyPoint, proxy_correlations


def _by_key(points):
    return {(c.scope, c.task_order, c.proxy): c for c in proxy_correlations(points)}


def test_correlations_per_task_pooled_and_mean_by_hand() -> None:
    points = [
        ProxyPoint(1, 10, 0, lidar=1.0, rankme=3.0, accuracy=0.1),
        ProxyPoint(1, 10, 1, lidar=2.0, rankme=2.0, accuracy=0.2),
        ProxyPoint(1, 10, 2, lidar=3.0, rankme=1.0, accuracy=0.3),
        ProxyPoint(2, 20, 0, lidar=5.0, rankme=1.0, accuracy=0.9),
        ProxyPoint(2, 20, 1, lidar=4.0, rankme=1.0, accuracy=0.8),
    ]
    got = _by_key(points)
    assert got[("task", 1, "lidar")].spearman == pytest.approx(1.0)
    assert got[("task", 1, "rankme")].kendall_tau_b == pytest.approx(-1.0)
    assert got[("task", 2, "lidar")].spearman == pytest.approx(1.0)  # two points, same order
    assert got[("task", 2, "rankme")].spearman is None  # constant proxy: undefined
    # task_mean averages only the defined per-task values.
    assert got[("task_mean", 0, "rankme")].spearman == pytest.approx(-1.0)
    assert got[("task_mean", 0, "lidar")].num_points == 5
    # Pooled: lidar ranks 1,2,3,5,4 vs accuracy ranks 1,2,3,5,4 -> rho = 1.
    assert got[("pooled", 0, "lidar")].spearman == pytest.approx(1.0)


def test_a_single_point_has_no_correlation() -> None:
    got = _by_key([ProxyPoint(1, 1, 0, 2.0, 2.0, 0.5)])
    assert got[("task", 1, "lidar")].spearman is None and got[("task", 1, "lidar")].num_points == 1
    assert got[("pooled", 0, "rankme")].kendall_tau_b is None
