"""The ``proxy`` trial scheduler: its rungs, its LiDAR (the probe pool's function, with its
relative ridge), what a rung compares, and the unlabelled views a learner host passes through."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from services.core.proxy_policies import halving
from services.core.ranks import lidar_at_deltas
from services.core.strategies import SCHEDULERS
from workers.sandbox.proxy_views import proxy_features
from workers.stream.task_info import LabelledData
from workers.trainer.early_stopping import SuccessiveHalving
from workers.trainer.proxy_scheduler import PROXY_N, PROXY_Q, lidar_of_views, proxy, rung_value
from workers.trainer.searchers import stopping_rule


def test_proxy_is_a_registered_scheduler_with_rungs_at_the_eighth_and_quarter() -> None:
    assert "proxy" in SCHEDULERS.names()
    rule = stopping_rule("proxy", 80)
    assert rule.rungs == (10, 20) and rule.eta == 3
    assert rule.proxy == {"n": PROXY_N, "q": PROXY_Q, "seed": 0}
    assert stopping_rule("asha", 80).proxy is None


@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_lidar_matches_the_probe_pools_relative_delta(scale: float) -> None:
    rng = np.random.default_rng(0)
    views = (rng.standard_normal((12, 1, 6)) * 3 + rng.standard_normal((12, 4, 6))) * scale  # n 12, q 4, d 6
    expected = lidar_at_deltas(views, [1e-4], relative=True, eps=1e-8)[0][1e-4]
    assert lidar_of_views(views.reshape(48, 6), 4) == pytest.approx(expected, rel=1e-9)


def test_a_rung_compares_minus_lidar_and_ranks_unusable_features_last() -> None:
    rng = np.random.default_rng(1)
    features = rng.standard_normal((16, 5))
    how = {"n": 4, "q": 4}
    assert rung_value(features, how) == pytest.approx(-lidar_of_views(features, 4))
    broken = features.copy()
    broken[0, 0] = np.nan
    assert rung_value(broken, how) == math.inf
    assert rung_value(features[:6], how) == math.inf  # not whole images of q views
    assert rung_value(features[:, 0], how) == math.inf  # not (rows, d)
    assert rung_value(np.concatenate([features, features]), how) == math.inf  # not exactly n·q rows


def test_a_rung_wider_than_the_cap_ranks_last_without_computing_lidar() -> None:
    """A forged 256 × 4096 report would cost seconds of eigendecomposition: refused at the shape."""
    wide = np.ones((PROXY_N * PROXY_Q, 4096), np.float32)
    how = {"n": PROXY_N, "q": PROXY_Q}
    started = time.perf_counter()
    assert rung_value(wide, how, max_dim=2048) == math.inf
    assert time.perf_counter() - started < 0.5
    narrow = np.random.default_rng(2).standard_normal((PROXY_N * PROXY_Q, 8))
    assert math.isfinite(rung_value(narrow, how, max_dim=8))


def test_the_harness_rule_on_minus_lidar_is_the_replays_rule() -> None:
    lidars = [5.0, 4.0, 6.0, 3.0, 7.0, 4.5]
    asha = SuccessiveHalving(rungs=(10,), eta=3)
    live = [asha.report(i, 10, -value) for i, value in enumerate(lidars)]
    assert live == halving(lidars) == [True, True, True, False, True, False]


class _Pixels:
    """A learner whose features are its input pixels, scaled by the predictor."""

    def features(self, predictor, images, ctx):
        return images.reshape(len(images), -1).astype(np.float32) * predictor


def test_proxy_features_are_q_views_of_n_seeded_train_images_and_read_no_label() -> None:
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, (30, 8, 8, 3), dtype=np.uint8)
    labels = np.full(30, -1)  # never read: any value would do
    train = LabelledData(images, labels)
    out = proxy_features(_Pixels(), 1.0, train, n=10, q=3, seed=0, ctx=None)
    again = proxy_features(_Pixels(), 2.0, train, n=10, q=3, seed=0, ctx=None)
    assert out.shape == (30, 8 * 8 * 3)
    np.testing.assert_allclose(again, 2 * out)  # the same images and views for every trial of a task
    assert not np.allclose(out[0], out[1])  # q distinct augmentations of one image
    assert proxy_features(_Pixels(), 1.0, train, n=100, q=2, seed=0, ctx=None).shape[0] == 60  # capped by the data
    assert proxy(type("R", (), {"steps": 8})()).rungs == (1, 2)


def test_a_streamed_tasks_proxy_images_are_a_seeded_batch_of_a_few_shards() -> None:
    """A task too large to hold gives the proxy the first n rows of a seeded stream, never the
    whole split; other tasks give their train split."""
    from workers.sandbox.proxy_views import proxy_images
    from workers.stream.shard_stream import ShardStream
    from workers.stream.shards import ShardInfo

    rows, shards = 10, [ShardInfo(key=str(i), size=0, sha256="", num_examples=10) for i in range(8)]
    read: list[str] = []

    def load(shard: ShardInfo) -> LabelledData:
        read.append(shard.key)
        first = int(shard.key) * rows
        return LabelledData(np.full((rows, 4, 4, 3), int(shard.key), np.uint8), np.arange(first, first + rows))

    class View:
        def __init__(self, streamed: bool) -> None:
            self.streamed = streamed

        def train_stream(self, seed: int):
            return ShardStream(shards, load, seed=seed) if self.streamed else None

        def train(self) -> LabelledData:
            assert not self.streamed, "the whole split was asked for"
            return LabelledData(np.zeros((3, 4, 4, 3), np.uint8), np.arange(3))

    first = proxy_images(View(streamed=True), n=12, seed=5)
    assert len(first.labels) == 12 and len(set(first.labels.tolist())) == 12
    assert len(set(read)) <= 4 < len(shards)  # a window of shards, not the split
    again = proxy_images(View(streamed=True), n=12, seed=5)
    assert np.array_equal(first.labels, again.labels)  # the same images for every trial of a task
    assert len(proxy_images(View(streamed=False), n=12, seed=5).labels) == 3
