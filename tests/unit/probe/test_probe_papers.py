"""Probes as their papers (issue 22, item 6): relative δ and its sensitivity, the publish preset,
the correlation across trials, MM3 of the current task only."""

from __future__ import annotations

import numpy as np
import pytest

from services.core.errors import UnknownNameError
from services.store.probes.settings import ProbeSettings
from workers.probe.runtime.measure import lidar_measures
from workers.probe.runtime.trial_jobs import current_only_mm3
from workers.probe.scores.probe_metrics import lidar, lidar_at_deltas
from workers.probe.scores.proxies import ProxyPoint, final_points, proxy_correlations
from workers.probe.scores.trial_scores import trial_mismatch


@pytest.fixture
def views() -> np.ndarray:
    """(n=12, q=4, d=6) views: class means spread along 3 directions, small noise elsewhere."""
    rng = np.random.default_rng(3)
    means = rng.normal(size=(12, 6)) * np.array([3.0, 2.0, 1.0, 0.05, 0.05, 0.05])
    return means[:, None, :] + 0.3 * rng.normal(size=(12, 4, 6))


def test_relative_delta_does_not_move_with_the_features_scale_where_absolute_does(views) -> None:
    small = views * 1e-3
    rel, scale = lidar_at_deltas(views, [1e-2], relative=True)
    rel_small, scale_small = lidar_at_deltas(small, [1e-2], relative=True)
    assert rel[1e-2] == pytest.approx(rel_small[1e-2], rel=1e-9)
    assert scale_small == pytest.approx(scale * 1e-6, rel=1e-9)
    absolute = lidar_at_deltas(views, [1e-2], relative=False)[0][1e-2]
    absolute_small = lidar_at_deltas(small, [1e-2], relative=False)[0][1e-2]
    assert abs(absolute - absolute_small) > 0.03  # the same ridge swamps the small features


def test_relative_delta_is_metrics_md_formula_with_delta_times_the_mean_within_eigenvalue(views) -> None:
    values, scale = lidar_at_deltas(views, [1e-4, 1e-2], relative=True)
    within = views - views.mean(axis=1, keepdims=True)
    by_hand = np.einsum("nqd,nqe->de", within, within) / (12 * 3)
    assert scale == pytest.approx(np.trace(by_hand) / 6, rel=1e-12)
    for delta in (1e-4, 1e-2):
        assert values[delta] == pytest.approx(lidar(views, delta=delta * scale), rel=1e-12)


def test_a_checkpoint_stores_lidar_with_its_delta_sensitivity(views) -> None:
    value, details = lidar_measures(views, ProbeSettings.ci())
    assert details["lidar_delta_mode"] == "relative"
    assert set(details["lidar_sweep"]) == {"1e-06", "0.0001", "0.01"}
    assert value == details["lidar_sweep"]["0.0001"]
    assert details["lidar_delta_used"] == pytest.approx(1e-4 * details["lidar_delta_scale"])
    assert details["lidar_absolute_delta"] == pytest.approx(lidar(views, delta=1e-4), rel=1e-12)
    sweep = [details["lidar_sweep"][k] for k in ("1e-06", "0.0001", "0.01")]
    assert sweep == sorted(sweep)  # a larger ridge whitens less: LiDAR tends to the rank of Σ_b
    absolute, again = lidar_measures(views, ProbeSettings.ci(lidar_delta_mode="absolute"))
    assert absolute == pytest.approx(lidar(views, delta=1e-4), rel=1e-12) and again["lidar_delta_scale"] == 1.0


def test_publish_preset_is_the_papers_scale_on_every_trial() -> None:
    s = ProbeSettings.preset("publish")
    assert (s.lidar_n, s.lidar_q, s.other_trials, s.other_checkpoints) == (1000, 50, None, None)
    assert s.lidar_delta_mode == "relative" and s.lidar_delta == 1e-4
    assert s.to_dict()["lidar_delta_sweep"] == [1e-6, 1e-4, 1e-2]


def test_settings_stored_before_the_delta_mode_read_back_as_absolute() -> None:
    old = {
        k: v
        for k, v in ProbeSettings.standard().to_dict().items()
        if k not in ("lidar_delta_mode", "lidar_delta_sweep")
    }
    again = ProbeSettings.from_dict(old)
    assert again.lidar_delta_mode == "absolute" and again.lidar_delta_sweep == ()
    with pytest.raises(UnknownNameError, match="LiDAR delta mode"):
        ProbeSettings(lidar_delta_mode="scaled")


def test_the_headline_correlation_ranks_each_trials_final_checkpoint() -> None:
    # Task 1: three trials; along each trajectory LiDAR falls as accuracy rises (within: negative),
    # but the trials' final checkpoints rank the same way by LiDAR and by accuracy (across: +1).
    points = [
        ProxyPoint(1, trial, step, lidar=base - step, rankme=1.0, accuracy=acc + 0.01 * step)
        for trial, base, acc in [(10, 5.0, 0.1), (11, 7.0, 0.3), (12, 9.0, 0.5)]
        for step in (0, 1, 2)
    ]
    got = {(c.scope, c.task_order, c.proxy): c for c in proxy_correlations(points)}
    across = got[("trials", 1, "lidar")]
    assert (across.spearman, across.kendall_tau_b, across.num_points) == (pytest.approx(1.0), pytest.approx(1.0), 3)
    assert [p.step for p in final_points(points)] == [2, 2, 2]
    assert got[("trials_mean", 0, "lidar")].spearman == pytest.approx(1.0)
    assert got[("trials", 1, "rankme")].spearman is None  # constant: undefined
    assert got[("task", 1, "lidar")].num_points == 9  # within trajectories: kept, every checkpoint


def test_mm3_is_stored_for_the_current_target_only() -> None:
    steps, losses = [0, 10, 20], np.array([[1.0, 0.9], [0.8, 0.7], [0.6, 0.5]])
    errors = np.array([[0.5, 0.4], [0.4, 0.3], [0.3, 0.2]])
    result = trial_mismatch(steps, losses, errors, [0.6, 0.5, 0.4], [2.0, 1.5, 1.0], settings=ProbeSettings.ci())
    scores, spreads, curves = current_only_mm3(result, current=True)
    assert scores["mm3"] == pytest.approx(result.scores["mm3"]) and curves["m3"]
    scores, spreads, curves = current_only_mm3(result, current=False)
    assert scores["mm3"] is None and "mm3" not in spreads and curves["m3"] is None
    assert scores["mofm"] == result.scores["mofm"]  # the other scores are the target's own


def test_nevis_probe_run_preset_publish_selects_the_papers_scale() -> None:
    from services.cli.probe_cmd import build_settings

    assert build_settings("publish", lidar_n=None, lidar_delta_mode=None) == ProbeSettings.publish()
    assert build_settings("standard", lidar_delta_mode="absolute").lidar_delta_mode == "absolute"
    assert build_settings("standard", all_trials=True).other_trials is None
