"""LiDAR's views cut from the stored originals, and OFM's fresh start (issue 22, item 6)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from services.store.probes.settings import ProbeSettings
from workers.learners.augment import AugmentConfig
from workers.learners.finetune import FtPrevLearner
from workers.learners.indep import IndepLearner
from workers.probe.runtime.context import ProbeContext
from workers.probe.runtime.data import PROBE_SPLITS, TaskSamples, sample_task
from workers.probe.runtime.fresh_start import FRESH_STEP, fresh_features, start_losses
from workers.probe.runtime.measure import TargetFeatures
from workers.probe.runtime.trial_fits import fit_trial
from workers.probe.scores.mismatch_cv import soft_mismatch_cv
from workers.probe.scores.trial_scores import trial_mismatch
from workers.sandbox.fresh import fresh_predictor
from workers.sandbox.views import augment_views
from workers.stream.task_info import Originals


def _originals(n: int, value: int) -> Originals:
    """Originals on a 12 x 16 canvas, valid 12 x 10 of ``value``; the padding is 255."""
    images = np.full((n, 12, 16, 3), 255, dtype=np.uint8)
    images[:, :, :10] = value
    return Originals(images, np.tile(np.array([[12, 10]], dtype=np.int32), (n, 1)))


def test_views_are_cut_from_the_originals_as_training_cuts_and_never_read_the_padding() -> None:
    squares = np.full((3, 8, 8, 3), 50, dtype=np.uint8)
    stored = _originals(3, 100)
    predictor = SimpleNamespace(augment=AugmentConfig(size=8))
    views, source = augment_views(
        object(), predictor, squares, 4, seed=0, originals=stored.images, extents=stored.extents
    )
    assert views.shape == (3, 4, 8, 8, 3) and views.dtype == np.uint8
    assert (views == 100).all() and "stored originals" in source  # not the squares, not the padding
    plain, plain_source = augment_views(object(), predictor, squares, 4, seed=0)
    assert (plain == 50).all() and "evaluation squares" in plain_source


def test_views_follow_the_training_crop_distribution_of_the_originals() -> None:
    # A horizontal ramp: a crop's mean brightness tells where (and how wide) it was cut.
    ramp = np.broadcast_to(np.linspace(0, 250, 40).astype(np.uint8)[None, None, :, None], (1, 20, 40, 3)).copy()
    stored = Originals(ramp, np.array([[20, 40]], dtype=np.int32))
    predictor = SimpleNamespace(augment=AugmentConfig(size=8, flip_p=0.0))
    views, _ = augment_views(
        object(),
        predictor,
        np.zeros((1, 8, 8, 3), np.uint8),
        64,
        seed=1,
        originals=stored.images,
        extents=stored.extents,
    )
    spans = views[0, :, 0, :, 0].astype(float)
    widths = spans[:, -1] - spans[:, 0]
    assert widths.min() < 60 < widths.max()  # area 8 %..100 %: narrow and wide crops both drawn
    assert (np.diff(spans, axis=1) >= 0).all()  # no flip asked: every view keeps the ramp's direction


def test_lidar_samples_keep_the_originals_of_their_own_rows() -> None:
    labels = {s: np.arange(n) % 2 for s, n in zip(PROBE_SPLITS, (7, 5))}
    squares = {s: np.full((len(y), 8, 8, 3), i, dtype=np.uint8) for i, (s, y) in enumerate(labels.items())}
    originals = {}
    for i, (s, y) in enumerate(labels.items()):
        images = np.zeros((len(y), 12, 12 + i, 3), dtype=np.uint8)
        images[:, 0, 0, 0] = np.arange(len(y)) + 10 * i  # each original names its split and row
        originals[s] = Originals(images, np.full((len(y), 2), (12, 11), dtype=np.int32))
    data = SimpleNamespace(
        splits={s: (squares[s], labels[s]) for s in PROBE_SPLITS},
        originals=originals,
        index=SimpleNamespace(num_classes=2, class_names=("a", "b"), counts={}),
    )
    task = SimpleNamespace(
        order=1, kind="single", key="t", dataset="d", title="t", year=2000, domain=None, num_classes=2
    )
    samples = sample_task(task, data, image_size=8, max_examples=10, lidar_n=6, seed=3)
    stored = samples.lidar_originals
    assert stored is not None and stored.images.shape == (6, 12, 13, 3) and len(stored) == 6
    # The squares say which split a LiDAR image came from; its original must say the same.
    from_split = samples.lidar_images[:, 0, 0, 0]
    assert ((stored.images[:, 0, 0, 0] >= 10) == (from_split == 1)).all()


def _ctx() -> ProbeContext:
    return ProbeContext(seed=0)


def test_a_transfer_learners_start_is_a_fresh_network_of_the_same_architecture() -> None:
    info = SimpleNamespace(num_classes=3, image_size=8, kind="single", key="t")
    learner = FtPrevLearner("small_cnn")
    transferred = learner._new_predictor(info, _ctx())
    with torch.no_grad():
        for p in transferred.model.parameters():
            p.add_(1.0)
    fresh, source = fresh_predictor(learner, transferred, seed=5)
    assert fresh is not None and "fresh small_cnn" in source
    assert type(fresh.model) is type(transferred.model) and fresh.model_config == transferred.model_config
    again, _ = fresh_predictor(learner, transferred, seed=5)
    for a, b, t in zip(fresh.model.parameters(), again.model.parameters(), transferred.model.parameters()):
        assert torch.equal(a, b) and not torch.equal(a, t)  # seeded, and not the transferred weights
    images = np.random.default_rng(0).integers(0, 255, (4, 8, 8, 3)).astype(np.uint8)
    assert learner.features(fresh, images, _ctx()).shape == (4, fresh.model.feature_dim)


def test_a_learner_whose_trials_start_untrained_needs_no_fresh_network() -> None:
    info = SimpleNamespace(num_classes=3, image_size=8, kind="single", key="t")
    learner = IndepLearner("small_cnn")
    fresh, source = fresh_predictor(learner, learner._new_predictor(info, _ctx()), seed=0)
    assert fresh is None and "already an untrained network" in source
    hooked = SimpleNamespace(fresh_predictor=lambda predictor, *, seed: ("fresh", seed))
    assert fresh_predictor(hooked, object(), seed=2) == (("fresh", 2), "learner.fresh_predictor")

    assert fresh_predictor(object(), None, seed=0)[0] is None  # another kind: its first checkpoint stays


def test_ofm_from_the_untrained_start_by_hand() -> None:
    transferred = [[2.0, 1.5, 1.8]]  # one fold; the first checkpoint is already trained
    plain = soft_mismatch_cv([0, 1, 2], transferred, 2, use_ofm=True)
    assert plain["curve"].tolist() == pytest.approx([0.0, 0.0, 60.0])  # 100 * 0.3 / (2 - 1.5)
    fresh = soft_mismatch_cv([0, 1, 2], transferred, 2, use_ofm=True, start=[4.0])
    assert fresh["curve"].tolist() == pytest.approx([0.0, 0.0, 12.0])  # 100 * 0.3 / (4 - 1.5)
    assert fresh["mean"] == pytest.approx(4.0) and fresh["m"] == pytest.approx(12.0)
    never_better = [[1.0, 1.2, 1.1]]  # fine-tuning never beats the transferred network
    assert soft_mismatch_cv([0, 1, 2], never_better, 2)["mean"] == math.inf  # the special case
    fixed = soft_mismatch_cv([0, 1, 2], never_better, 2, start=3.0)
    assert fixed["curve"].tolist() == pytest.approx([0.0, 10.0, 5.0])


def test_the_trial_job_scores_ofm_from_the_fresh_networks_fits() -> None:
    rng = np.random.default_rng(0)
    labels = np.arange(40) % 2
    signal = labels[:, None] * np.array([[2.0, 0.0, 0.0]])
    feats = {
        step: {1: TargetFeatures((signal * k + rng.normal(size=(40, 3))).astype(np.float32), labels, 2)}
        for step, k in ((FRESH_STEP, 0.0), (0, 1.0), (5, 1.5), (10, 2.0))
    }
    settings = ProbeSettings.ci(kinds=("linear",))
    fits = fit_trial(feats, settings)
    starts = start_losses(fits)
    kept = sorted((f for f in fits if f.step != FRESH_STEP), key=lambda f: f.step)
    assert set(starts) == {(1, "linear")} and len(starts[(1, "linear")]) == settings.folds
    assert starts[(1, "linear")].mean() > max(f.scores.loss for f in kept)  # noise: the worst loss
    result = trial_mismatch(
        [f.step for f in kept],
        np.array([f.scores.losses for f in kept]),
        np.array([f.scores.errors for f in kept]),
        [0.5, 0.4, 0.3],
        [1.0, 0.8, 0.6],
        settings=settings,
        start_losses=starts[(1, "linear")],
        start_source="fresh",
    )
    assert result.curves["ofm_start"]["source"] == "fresh" and math.isfinite(result.scores["mofm"])


def test_in_process_the_fresh_start_comes_from_the_learners_own_hook_only() -> None:
    samples = TaskSamples(
        order=1,
        kind="single",
        num_classes=2,
        probe_images=np.ones((4, 8, 8, 3), np.uint8),
        probe_labels=np.arange(4) % 2,
        lidar_images=np.ones((2, 8, 8, 3), np.uint8),
        info=None,
    )
    plain = SimpleNamespace(features=lambda predictor, images, ctx: np.full((len(images), 2), predictor))
    assert fresh_features(plain, 1.0, [samples], None, seed=0)[0] is None
    hooked = SimpleNamespace(features=plain.features, fresh_predictor=lambda predictor, *, seed: 7.0)
    feats, source = fresh_features(hooked, 1.0, [samples], None, seed=0)
    assert source == "learner.fresh_predictor" and (feats[1].features == 7.0).all()
