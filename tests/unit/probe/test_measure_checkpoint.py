"""Everything measured on one checkpoint, with a tiny numpy learner and hand-made tasks."""

from __future__ import annotations

import numpy as np
import pytest

from services.core.errors import ProbeInputError
from services.store.probes.settings import ProbeSettings
from workers.probe.runtime.checkpoint_jobs import target_orders
from workers.probe.runtime.data import TaskSamples
from workers.probe.runtime.measure import measure_checkpoint


class MeanLearner:
    """Features: per-channel means of 2x2 blocks; predictions: a fixed class score table."""

    name = "mean"

    def features(self, predictor, images, ctx):
        x = images.astype(np.float32) / 255.0
        n, h, w, c = x.shape
        return x.reshape(n, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4)).reshape(n, -1)

    def predict(self, predictor, images, ctx):
        scores = np.zeros((len(images), 2))
        scores[:, predictor["always"]] = 1.0
        return scores


def _task(order: int, n: int = 60, seed: int = 0) -> TaskSamples:
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 2
    images = rng.integers(0, 100, (n, 8, 8, 3)).astype(np.uint8)
    images[labels == 1, :4] += 120  # class 1 is bright on top: linearly visible
    return TaskSamples(
        order=order,
        kind="single",
        num_classes=2,
        probe_images=images,
        probe_labels=labels,
        lidar_images=images[:6],
        info=None,
    )


def test_a_checkpoint_gets_every_target_kind_ranks_and_pretext_error() -> None:
    current, earlier = _task(2), _task(1, seed=1)
    settings = ProbeSettings(folds=3, mlp_steps=30, mlp_hidden=8, lidar_q=3)
    m = measure_checkpoint(
        MeanLearner(), {"always": 0}, current=current, targets=[current, earlier], settings=settings, ctx=None
    )
    assert [(f.target_order, f.kind) for f in m.fits] == [
        (2, "linear"),
        (2, "mlp2"),
        (2, "mlp3"),
        (1, "linear"),
        (1, "mlp2"),
        (1, "mlp3"),
    ]
    assert all(len(f.scores.losses) == 3 and f.num_examples == 60 for f in m.fits)
    assert m.fits[0].scores.error < 0.05  # the bright top half gives the class away
    # m^P on the probe examples themselves (half are class 0): "always 0" errs on half
    assert m.pretext_error == pytest.approx(0.5)
    # scores [1, 0] are read as probabilities: class-1 rows cost -log(1e-12) (the clip)
    assert m.pretext_loss == pytest.approx(-0.5 * np.log(1e-12))
    assert m.details["pretext_error_split"] == "dev+dev_test" and m.features == {}
    assert (m.feature_dim, m.lidar_n, m.lidar_q, m.rankme_n) == (48, 6, 3, 60)
    assert 1.0 <= m.lidar <= 48 and 1.0 <= m.rankme <= 48
    assert m.details["augmentation"].startswith("fallback")
    assert set(m.details["seconds"]) >= {"lidar", "total", "features_1", "probes_2"}


def test_without_fitting_each_targets_features_are_handed_over() -> None:
    current, earlier = _task(2), _task(1, seed=1)
    m = measure_checkpoint(
        MeanLearner(),
        {"always": 0},
        current=current,
        targets=[current, earlier],
        settings=ProbeSettings(folds=3, lidar_q=3),
        ctx=None,
        fit=False,
    )
    assert m.fits == () and sorted(m.features) == [1, 2]
    assert m.features[2].features.shape == (60, 48) and m.features[2].num_classes == 2
    np.testing.assert_array_equal(m.features[1].labels, earlier.probe_labels)


def test_a_failing_predict_is_reported_as_the_learners_fault() -> None:
    current = _task(1)
    with pytest.raises(ProbeInputError, match=r"predict\(\) of learner 'mean' failed on task 1"):
        measure_checkpoint(
            MeanLearner(),
            {},
            current=current,
            targets=[current],
            settings=ProbeSettings(folds=3, kinds=("linear",), lidar_q=2),
            ctx=None,
        )


def test_targets_are_the_current_task_then_the_most_recent_earlier_ones() -> None:
    assert target_orders([1, 2, 3, 5], 5, ProbeSettings()) == [5, 3, 2, 1]
    assert target_orders([1, 2, 3, 5], 5, ProbeSettings(max_earlier=2)) == [5, 3, 2]
    assert target_orders([1, 2, 3, 5], 5, ProbeSettings(targets="current")) == [5]
    assert target_orders([1, 2, 3], 1, ProbeSettings()) == [1]


def test_the_error_on_held_out_dev_test_examples_is_kept_apart() -> None:
    """The proxy replay scores trials where selection did not look: the dev_test examples of the
    probe sample alone. Predicting class 0 everywhere, the error there is the share of class 1
    among the dev_test rows, not the sample's 0.5."""
    current = _task(2, n=60)
    splits = np.where(np.arange(60) < 40, "dev", "dev_test")  # dev_test: rows 40..59
    labels = current.probe_labels.copy()
    labels[40:] = np.arange(20) % 4 == 0  # dev_test: 5 of 20 are class 1
    current = TaskSamples(
        order=2, kind="single", num_classes=2, probe_images=current.probe_images, probe_labels=labels,
        lidar_images=current.lidar_images, info=None, probe_splits=splits, probe_rows=np.arange(60),
    )  # fmt: skip
    settings = ProbeSettings(folds=3, mlp_steps=30, mlp_hidden=8, lidar_q=3)
    m = measure_checkpoint(MeanLearner(), {"always": 0}, current=current, targets=[], settings=settings, ctx=None)
    assert m.details["heldout_split"] == "dev_test" and m.details["heldout_examples"] == 20
    assert m.details["heldout_error"] == pytest.approx(5 / 20)
    assert m.pretext_error == pytest.approx((20 + 5) / 60)  # dev rows alternate: 20 of 40 class 1
    unsplit = measure_checkpoint(
        MeanLearner(), {"always": 0}, current=_task(2), targets=[], settings=settings, ctx=None
    )
    assert unsplit.details["heldout_error"] is None and unsplit.details["heldout_examples"] == 0
