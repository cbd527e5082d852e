"""Specs that are read: the profiles and the proxy policies take each metric's direction from
its spec (flipping one flips what they call best), and the proxies are listed once."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from services.core import metric_specs
from services.core.errors import UnknownNameError
from services.core.metric_specs import HEADLINE_METRICS, PROBE_METRICS, PROXIES, metric_spec
from services.core.profiles import cflop_to_target_profile, error_profile
from services.core.proxy_policies import Policy, TaskRecord, TrialRecord, replay_task


def flip(monkeypatch: pytest.MonkeyPatch, table: str, name: str) -> None:
    """Swap ``name``'s direction in one of the spec tables, for this test only."""
    specs = dict(getattr(metric_specs, table))
    specs[name] = replace(specs[name], higher_is_better=not specs[name].higher_is_better)
    monkeypatch.setattr(metric_specs, table, specs)


ERRORS = np.array([[0.1, 0.2, 0.1], [0.4, 0.5, 0.6], [0.2, 0.2, 0.3]])


def test_the_error_profile_ranks_by_es_direction(monkeypatch: pytest.MonkeyPatch) -> None:
    lower = error_profile(ERRORS).scores
    assert int(np.argmax(lower)) == 0 and int(np.argmin(lower)) == 1  # the least error is best
    flip(monkeypatch, "HEADLINE_METRICS", "E")
    higher = error_profile(ERRORS).scores
    assert int(np.argmax(higher)) == 1 and int(np.argmin(higher)) == 0
    assert higher[1] == pytest.approx(1.0)  # best on every task


def test_the_cflop_profile_ranks_by_cflops_direction(monkeypatch: pytest.MonkeyPatch) -> None:
    flops = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0]])
    reference = np.array([0.5, 0.5, 0.6])  # everyone reaches it
    lower = cflop_to_target_profile(ERRORS, flops, reference).scores
    flip(monkeypatch, "HEADLINE_METRICS", "cFLOP")
    higher = cflop_to_target_profile(ERRORS, flops, reference).scores
    assert list(np.argsort(-lower)) == [0, 1, 2] and list(np.argsort(-higher)) == [2, 1, 0]


TASK = TaskRecord(
    order=1,
    chosen_index=0,
    flops=30.0,
    steps=8,
    rungs=(1, 2),
    trials=tuple(
        TrialRecord(i, dev_error=0.3 - 0.1 * i, flops=10.0, proxies={"lidar": {1: v, 2: v, 8: v}, "rankme": {8: 1.0}})
        for i, v in enumerate((5.0, 1.0, 3.0))
    ),
)


def test_a_proxy_chooser_picks_the_best_value_by_the_proxys_direction(monkeypatch: pytest.MonkeyPatch) -> None:
    assert replay_task(TASK, Policy("choose:lidar", choose="lidar")).trial_index == 0  # the highest LiDAR
    flip(monkeypatch, "PROBE_METRICS", "lidar")
    assert replay_task(TASK, Policy("choose:lidar", choose="lidar")).trial_index == 1  # now the lowest


def test_pruning_stops_the_worst_by_the_proxys_direction(monkeypatch: pytest.MonkeyPatch) -> None:
    falling = replace(
        TASK,
        trials=tuple(
            replace(t, proxies={"lidar": {1: v, 2: v, 8: v}}) for t, v in zip(TASK.trials, (5.0, 3.0, 1.0), strict=True)
        ),
    )
    policy = Policy("prune:lidar", prune="lidar")
    assert replay_task(falling, policy).stopped == (2,)  # the third reporter goes on only if best so far
    flip(monkeypatch, "PROBE_METRICS", "lidar")
    assert replay_task(falling, policy).stopped == ()


def test_the_proxies_are_listed_once_and_each_has_a_probe_spec() -> None:
    from services.core import proxy_policies
    from services.store.db import models_probe
    from workers.probe.scores import probe_metrics, proxies

    assert proxy_policies.PROXIES is models_probe.PROXIES is proxies.PROXY_NAMES is PROXIES
    assert probe_metrics.METRICS is PROBE_METRICS
    assert all(metric_spec(p).higher_is_better for p in PROXIES)


def test_every_spec_is_found_by_name_and_an_unknown_name_suggests_one() -> None:
    for name, spec in {**HEADLINE_METRICS, **PROBE_METRICS}.items():
        assert metric_spec(name) is spec and spec.name == name
    with pytest.raises(UnknownNameError, match="Did you mean 'lidar'"):
        metric_spec("lidr")
