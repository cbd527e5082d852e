"""The linear probe on features wider than a fold's training rows: restated in each fold's
row space (workers/probe/fits/row_space.py), it reaches the full-width fit's optimum, scores
the same held-out rows the same, and costs a fraction of the FLOPs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from workers.probe.fits import linear
from workers.probe.fits.fit_common import prepare
from workers.probe.fits.fit_flops import counting
from workers.probe.fits.folds import fold_ids
from workers.probe.fits.row_space import in_row_space


def _wide(n: int = 60, d: int = 150, classes: int = 3, groups: int = 1, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    centres = rng.standard_normal((classes, d)) * 0.4
    x = centres[y][None] + rng.standard_normal((groups, n, d))
    x[..., 5] = 3.0  # a constant feature: standardised to 0 on every fold's training rows
    return (x * rng.uniform(0.1, 10.0, d)).astype(np.float32), y


@pytest.fixture
def converged(monkeypatch):
    """Both fits run to the optimum (the probe's own stopping rule leaves each its own few
    1e-3 of held-out loss short of it on these nearly separable rows)."""
    monkeypatch.setattr(linear, "TOLERANCE_CHANGE", 1e-10)


def _full_width(data, **kwargs):
    """The fit without the restatement (what the probe did before it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(linear, "in_row_space", lambda _: None)
        return linear.fit_linear(data, **kwargs)


@pytest.mark.parametrize("groups", [1, 2])
def test_wide_features_reach_the_same_optimum_as_the_full_width_fit(groups, converged) -> None:
    x, y = _wide(groups=groups)
    data = prepare(x, y, fold_ids(y, 3, seed=0), 3, 3)
    assert data.dim > int(data.counts.max())
    narrower = in_row_space(data)
    assert narrower is not None and narrower.dim == int(data.counts.max()) and narrower.groups == 3 * groups
    fast = linear.fit_linear(data, l2=1e-2, max_iter=3000)
    full = _full_width(data, l2=1e-2, max_iter=3000)
    np.testing.assert_allclose(fast.losses, full.losses, rtol=5e-3)  # float32 solver tolerance
    np.testing.assert_array_equal(fast.errors, full.errors)


def test_the_restated_fit_is_sklearn_s_logistic_regression(converged) -> None:
    x, y = _wide()
    x = x[0]
    ids = fold_ids(y, 3, seed=1)
    l2 = 1e-2
    scores = linear.fit_linear(prepare(x, y, ids, 3, 3), l2=l2, max_iter=3000)
    for f in range(3):
        train, held = ids != f, ids == f
        mu, sd = x[train].mean(0), x[train].std(0)
        sd[sd <= 1e-6] = 1.0
        ref = LogisticRegression(C=1.0 / (l2 * train.sum()), max_iter=10000, tol=1e-12)
        ref.fit((x[train] - mu) / sd, y[train])
        proba = ref.predict_proba((x[held] - mu) / sd)
        assert scores.losses[f] == pytest.approx(-np.mean(np.log(proba[np.arange(held.sum()), y[held]])), rel=3e-3)
        assert scores.errors[f] == pytest.approx(np.mean(proba.argmax(1) != y[held]), abs=1.0 / held.sum() + 1e-9)


def test_narrow_features_are_left_as_they_are_and_wide_ones_cost_less() -> None:
    x, y = _wide(n=300, d=20)
    assert in_row_space(prepare(x, y, fold_ids(y, 3, seed=0), 3, 3)) is None
    x, y = _wide(n=60, d=600)
    data = prepare(x, y, fold_ids(y, 3, seed=0), 3, 3)
    with counting() as fast:
        linear.fit_linear(data, l2=1e-2, max_iter=50)
    with counting() as full:
        _full_width(data, l2=1e-2, max_iter=50)
    assert 0 < fast.flops < full.flops / 10


def test_multi_label_features_are_restated_too(converged) -> None:
    x, y = _wide()
    multi = np.eye(3, dtype=np.int64)[y] | (np.arange(len(y)) % 2 == 0)[:, None].astype(np.int64)
    data = prepare(x, multi, fold_ids(multi, 3, seed=0), 3, 3)
    fast = linear.fit_linear(data, l2=1e-2, max_iter=3000)
    full = _full_width(dataclasses.replace(data), l2=1e-2, max_iter=3000)
    np.testing.assert_allclose(fast.losses, full.losses, rtol=2e-3)
    np.testing.assert_allclose(fast.errors, full.errors, atol=0.02)
