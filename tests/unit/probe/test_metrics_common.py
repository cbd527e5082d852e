"""Properties shared by every registered probe metric, the registry itself, and the examples."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import subprocess
import sys

import numpy as np
import pytest

from services.core.errors import NevisError, UnknownNameError
from workers.probe.scores import probe_metrics as metrics

CURVE_METRICS = ["msm3", "csm3", "msm3max", "mofm", "cofm", "mofm_max"]
# A representative valid input per registered metric, so properties can be checked over all.
SAMPLE_CALLS = {
    **{name: ([4.0, 2.0, 3.0, 2.5],) for name in CURVE_METRICS},
    "mm3": ([50.0, 40.0], [45.0, 41.0]),
    "lidar": (np.random.default_rng(0).normal(size=(6, 3, 4)),),
    "rankme": (np.random.default_rng(0).normal(size=(6, 4)),),
    "spearman": ([1.0, 3.0, 2.0], [1.0, 2.0, 3.0]),
    "kendall_tau_b": ([1.0, 3.0, 2.0], [1.0, 2.0, 3.0]),
}


def test_every_registered_metric_is_a_public_function_with_a_sample():
    assert set(metrics.METRICS) == set(SAMPLE_CALLS)
    for name, spec in metrics.METRICS.items():
        assert spec.name == name
        assert callable(getattr(metrics, name)) and name in metrics.__all__


@pytest.mark.parametrize("name", sorted(SAMPLE_CALLS))
def test_every_registered_metric_returns_a_python_float(name):
    value = getattr(metrics, name)(*SAMPLE_CALLS[name])
    assert type(value) is float and np.isfinite(value)


@pytest.mark.parametrize("name", sorted(SAMPLE_CALLS))
def test_every_registered_metric_rejects_empty_input_with_a_metric_error(name):
    empty = tuple(np.empty((0,) * np.ndim(arg)) for arg in SAMPLE_CALLS[name])
    with pytest.raises(metrics.MetricInputError, match=rf"parameter of {name} must be .* Got an empty"):
        getattr(metrics, name)(*empty)


@pytest.mark.parametrize("name", [*CURVE_METRICS, "mm3"])
def test_mismatch_metrics_are_lower_is_better_and_zero_on_a_flat_curve(name):
    spec = metrics.get_metric_spec(name)
    assert not spec.higher_is_better and spec.direction == "min" and spec.aggregation == "mean"
    flat = [3.0, 3.0, 3.0]
    assert getattr(metrics, name)(*([flat] * len(SAMPLE_CALLS[name]))) == 0.0


@pytest.mark.parametrize("name", ["lidar", "rankme", "spearman", "kendall_tau_b"])
def test_ranks_and_correlations_are_higher_is_better(name):
    assert metrics.get_metric_spec(name).higher_is_better
    assert metrics.get_metric_spec(name).direction == "max"


def test_metric_input_error_is_both_a_value_error_and_a_nevis_error():
    assert issubclass(metrics.MetricInputError, ValueError)
    assert issubclass(metrics.MetricInputError, NevisError)


def test_unknown_metric_name_suggests_close_names():
    with pytest.raises(UnknownNameError, match=r"Unknown metric 'mofm_mx'\. Did you mean 'mofm_max'"):
        metrics.get_metric_spec("mofm_mx")


def test_registry_entries_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        metrics.METRICS["lidar"].higher_is_better = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        metrics.METRICS["new"] = metrics.METRICS["lidar"]  # type: ignore[index]


@pytest.mark.parametrize(
    "module",
    [
        "workers.probe.scores.mismatch",
        "workers.probe.scores.mismatch_cv",
        "services.core.ranks",
        "workers.probe.scores.correlation",
        "workers.probe.scores.probe_metrics",
    ],
)
def test_docstring_examples_run(module):
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, extraglobs={"np": np}, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0


def test_importing_the_package_stays_light():
    code = "import sys, workers.probe; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
