"""The probes: folds, per-fold standardisation, batched linear and MLP fits, checked against
independent fits and hand-made data."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from services.store.probes.settings import ProbeSettings
from workers.probe.fits.fit_common import first_layer, fit_rows, prepare
from workers.probe.fits.folds import FoldError, fold_ids, subsample, train_masks
from workers.probe.fits.linear import fit_linear
from workers.probe.fits.mlp import fit_mlp
from workers.probe.fits.probes import fit_probes, get_probe


def _blobs(n: int = 240, d: int = 6, classes: int = 3, spread: float = 1.5, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    centres = rng.standard_normal((classes, d)) * spread
    x = centres[y] + rng.standard_normal((n, d))
    return (x * rng.uniform(0.1, 10.0, d) + rng.normal(0, 5, d)).astype(np.float32), y


def test_subsample_is_seeded_sorted_and_capped() -> None:
    a, b = subsample(100, 10, seed=3), subsample(100, 10, seed=3)
    assert a.tolist() == b.tolist() == sorted(set(a.tolist())) and len(a) == 10
    assert subsample(100, 10, seed=4).tolist() != a.tolist()


def test_folds_are_stratified_and_cover_every_example() -> None:
    labels = np.repeat([0, 1, 2], [30, 12, 9])
    ids = fold_ids(labels, 3, seed=0)
    for cls in range(3):
        counts = np.bincount(ids[labels == cls], minlength=3)
        assert counts.max() - counts.min() <= 1  # each class dealt evenly
    masks = train_masks(ids, 3)
    assert (masks.sum(axis=0) == 2).all()  # every example trains exactly k - 1 probes
    multi = fold_ids(np.zeros((7, 4)), 3, seed=0)
    assert sorted(np.bincount(multi).tolist()) == [2, 2, 3]


def test_too_few_examples_for_the_folds_is_a_clear_error() -> None:
    with pytest.raises(FoldError, match="Cannot split 2 examples into 3 folds"):
        fold_ids(np.array([0, 1]), 3, seed=0)


def test_standardisation_folded_into_the_weights_matches_doing_it_explicitly() -> None:
    x, y = _blobs()
    data = prepare(x, y, fold_ids(y, 4, seed=0), 4, 3)
    v = torch.randn(4, x.shape[1], 5)
    b = torch.randn(4, 5)
    got = first_layer(data, v, b)
    for f in range(4):
        rows = data.train[f].bool().numpy()
        mu, sd = x[rows].astype(np.float64).mean(0), x[rows].astype(np.float64).std(0)
        want = ((x - mu) / sd) @ v[f].double().numpy() + b[f].double().numpy()
        np.testing.assert_allclose(got[f].numpy(), want, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("multi", [False, True])
def test_each_fold_computes_on_its_own_rows_as_the_masked_all_rows_layer_does(multi: bool) -> None:
    """The fold-block layout gives member m exactly the all-rows layer's values on m's training
    (or held-out) rows, with their labels, for several feature sets at once."""
    x, y = _blobs(n=103)  # 103 rows in 4 folds: blocks of 26 and 25, so one padding row
    labels = np.stack([y == 0, y == 2], axis=1).astype(np.int64) if multi else y
    ids = fold_ids(labels, 4, seed=0)
    data = prepare(np.stack([x, 2 * x + 1, -x]), labels, ids, 4, 2 if multi else 3)
    v, b = torch.randn(12, x.shape[1], 5), torch.randn(12, 5)
    every = first_layer(data, v, b)
    for held in (False, True):
        rows = fit_rows(data, held=held)
        got = first_layer(data, v, b, rows)
        for m in range(12):
            mine = ids == m % 4 if held else ids != m % 4
            real = rows.weights[m] > 0
            assert int(real.sum()) == mine.sum()
            np.testing.assert_allclose(
                torch.sort(got[m][real], dim=0).values.numpy(),
                torch.sort(every[m][torch.from_numpy(mine)], dim=0).values.numpy(),
                rtol=2e-4,
                atol=2e-4,
            )  # float32 sums in another order
            want_labels = np.sort(labels[mine], axis=0)
            assert (np.sort(rows.labels[m][real].numpy(), axis=0) == want_labels).all()
            weight = 1.0 if held else 1.0 / mine.sum()
            assert torch.allclose(rows.weights[m][real], torch.tensor(weight, dtype=torch.float32))


@pytest.mark.parametrize("kind", ["linear", "mlp3"])
def test_fits_on_own_rows_score_as_fits_on_all_rows_masked(kind: str) -> None:
    """Computing on each fold's own rows changes the cost, not the fit: same held-out scores
    as every member computing on all rows with the held-out ones masked out of its loss."""
    x, y = _blobs(n=181, spread=0.8)
    settings = ProbeSettings(folds=5, mlp_hidden=8, mlp_steps=30)
    data = prepare(np.stack([x, x[:, ::-1] * 3]), y, fold_ids(y, 5, seed=0), 5, 3)
    fast = get_probe(kind)(data, settings)
    masked = get_probe(kind)(dataclasses.replace(data, blocks=None), settings)
    np.testing.assert_allclose(fast.losses, masked.losses, rtol=1e-4)
    assert fast.errors.tolist() == masked.errors.tolist()
    with pytest.raises(ValueError, match="blocks hold 10 members, its masks 1"):
        dataclasses.replace(data, train=data.train[:1])


def test_batched_linear_folds_equal_fitting_each_fold_alone() -> None:
    x, y = _blobs(spread=0.8)
    data = prepare(x, y, fold_ids(y, 3, seed=1), 3, 3)
    together = fit_linear(data, l2=1e-2, max_iter=300)
    for f in range(3):
        alone = dataclasses.replace(
            data,
            train=data.train[f : f + 1],
            counts=data.counts[f : f + 1],
            mu=data.mu[f : f + 1],
            inv_sd=data.inv_sd[f : f + 1],
            blocks=None,
        )
        single = fit_linear(alone, l2=1e-2, max_iter=300)
        assert single.errors[0] == pytest.approx(together.errors[f], abs=1e-9)
        assert single.losses[0] == pytest.approx(together.losses[f], rel=5e-3)  # solver tolerance


def test_linear_probe_reaches_the_logistic_regression_optimum() -> None:
    x, y = _blobs(spread=0.7, seed=2)
    ids = fold_ids(y, 3, seed=0)
    l2 = 1e-2
    scores = fit_linear(prepare(x, y, ids, 3, 3), l2=l2, max_iter=300)
    for f in range(3):
        train, held = ids != f, ids == f
        mu, sd = x[train].mean(0), x[train].std(0)
        ref = LogisticRegression(C=1.0 / (l2 * train.sum()), max_iter=5000, tol=1e-10)
        ref.fit((x[train] - mu) / sd, y[train])
        proba = ref.predict_proba((x[held] - mu) / sd)
        loss = -np.mean(np.log(proba[np.arange(held.sum()), y[held]]))
        error = np.mean(proba.argmax(1) != y[held])
        assert scores.losses[f] == pytest.approx(loss, rel=2e-3)
        assert scores.errors[f] == pytest.approx(error, abs=1.0 / held.sum() + 1e-9)


def test_separable_classes_give_zero_error_and_shuffled_labels_chance() -> None:
    x, y = _blobs(spread=8.0)
    settings = ProbeSettings(folds=3, kinds=("linear",))
    assert fit_probes(x, y, num_classes=3, settings=settings)["linear"].error == 0.0
    rng = np.random.default_rng(0)
    noise = fit_probes(
        rng.standard_normal((300, 6)).astype(np.float32), np.arange(300) % 3, num_classes=3, settings=settings
    )["linear"]
    assert 0.5 < noise.error < 0.85  # chance is 2/3


def test_mlp_probes_solve_xor_where_the_linear_probe_cannot() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (400, 2)).astype(np.float32)
    y = ((x[:, 0] > 0) ^ (x[:, 1] > 0)).astype(np.int64)
    settings = ProbeSettings(folds=3, mlp_hidden=16, mlp_steps=200, mlp_lr=2e-2, mlp_weight_decay=0.0)
    scores = fit_probes(x, y, num_classes=2, settings=settings)
    assert scores["linear"].error > 0.3
    assert scores["mlp2"].error < 0.1 and scores["mlp3"].error < 0.1
    assert list(scores) == ["linear", "mlp2", "mlp3"]


def test_mlp_fits_are_deterministic_for_a_seed() -> None:
    x, y = _blobs()
    data = prepare(x, y, fold_ids(y, 3, seed=0), 3, 3)
    a = fit_mlp(data, depth=3, hidden=8, steps=20, lr=1e-2, weight_decay=1e-3, seed=5)
    b = fit_mlp(data, depth=3, hidden=8, steps=20, lr=1e-2, weight_decay=1e-3, seed=5)
    assert a.losses.tolist() == b.losses.tolist()
    with pytest.raises(ValueError, match="'depth' parameter of fit_mlp must be 2 or 3"):
        fit_mlp(data, depth=4, hidden=8, steps=1, lr=1e-2, weight_decay=0.0)


def test_multi_label_probes_score_one_minus_map() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((240, 5)).astype(np.float32)
    labels = np.stack([x[:, 0] > 0, x[:, 1] > 0.5, x[:, 2] + x[:, 3] > 0], axis=1).astype(np.int64)
    scores = fit_probes(x, labels, num_classes=3, settings=ProbeSettings(folds=3, mlp_steps=50))
    assert scores["linear"].error < 0.1  # each label is linear in x: mAP near 1
    assert all(0.0 <= s.error <= 1.0 and np.isfinite(s.losses).all() for s in scores.values())


def test_an_unknown_probe_kind_gets_a_did_you_mean() -> None:
    with pytest.raises(KeyError, match="Did you mean 'linear'"):
        get_probe("lineer")


def test_every_probe_kind_the_store_accepts_has_a_fit_and_no_other():
    """The store's CHECK (PROBE_KIND_NAMES) and the fits' registry name the same kinds."""
    from services.store.db.models_probe import PROBE_KIND_NAMES
    from workers.probe.fits.probes import PROBES

    assert PROBES.names() == tuple(sorted(PROBE_KIND_NAMES))
