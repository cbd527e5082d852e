"""The run's warm executors: lent by the pool for trials and evaluations, always taken back."""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import ray

from workers.learners.protocol import TaskInfo
from workers.sandbox.client import HostSpec
from workers.trainer.executor import predict_in_pool, start_pool

LEARNER = "nevis_test_learners:nearest_mean"


def _host(spec: str) -> HostSpec:
    """The test learners' host: sandboxed, seeing the fixtures folder on PYTHONPATH."""
    paths = tuple(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    return HostSpec(spec, import_paths=paths)


@pytest.fixture
def pool(ray_local: None) -> Iterator[Any]:
    pool, _ = start_pool(_host(LEARNER), size=1, gpus_per_executor=0.0)
    assert ray.get(pool.ready.remote(), timeout=120) == 1
    yield pool
    ray.kill(pool)


def _free_executors(pool: Any) -> list[Any]:
    """The executors waiting in the pool now (their actor ids)."""
    return [e._actor_id for e in ray.get(pool.__ray_call__.remote(lambda self: list(self._free)), timeout=30)]


def test_an_executor_comes_back_when_the_evaluation_fails(pool: Any) -> None:
    (before,) = _free_executors(pool)
    info = _info()
    with pytest.raises(ray.exceptions.RayTaskError, match="UnpicklingError|pickle"):
        predict_in_pool(pool, info, b"not a predictor", np.zeros((2, 4, 4, 3), np.uint8), seed=0)
    assert _free_executors(pool) == [before]


def test_an_executor_comes_back_when_the_caller_dies(ray_local: None) -> None:
    # A Tune trial process can be stopped while its trial runs in an executor; the executor
    # must not be lost with it (a pool of one would then hang the run for good).
    pool, _ = start_pool(_host("nevis_test_learners:slow_predict"), size=1, gpus_per_executor=0.0)
    assert ray.get(pool.ready.remote(), timeout=120) == 1
    (before,) = _free_executors(pool)

    @ray.remote(num_cpus=0, max_retries=0)
    def caller(pool: Any) -> None:  # dies while the pool's executor works for it
        pool.predict.remote(
            _info(),
            [ray.put(pickle.dumps(np.zeros((3, 48), np.float32)))],
            [ray.put(np.zeros((2, 4, 4, 3), np.uint8))],
            0,
        )
        while _free_executors(pool):  # wait until the executor is lent out
            time.sleep(0.05)
        os._exit(1)

    try:
        with pytest.raises(ray.exceptions.RayError):
            ray.get(caller.remote(pool), timeout=60)
        deadline = time.monotonic() + 30
        while _free_executors(pool) != [before] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _free_executors(pool) == [before]
    finally:
        ray.kill(pool)


def test_an_executor_whose_process_died_is_replaced(pool: Any) -> None:
    (before,) = _free_executors(pool)

    def kill_and_call(self: Any) -> None:  # runs inside the pool: kill its only executor
        ray.kill(self._free[0])

    ray.get(pool.__ray_call__.remote(kill_and_call), timeout=30)
    with pytest.raises(ray.exceptions.RayActorError):
        predict_in_pool(
            pool, _info(), pickle.dumps(np.zeros((3, 48), np.float32)), np.zeros((2, 4, 4, 3), np.uint8), seed=0
        )
    (after,) = _free_executors(pool)
    assert after != before
    scores, _ = predict_in_pool(
        pool, _info(), pickle.dumps(np.zeros((3, 48), np.float32)), np.zeros((2, 4, 4, 3), np.uint8), seed=0
    )
    assert scores.shape == (2, 3)  # the replacement works


def _info() -> TaskInfo:
    return TaskInfo(
        order=1,
        key="t",
        dataset="t",
        title="t",
        year=2000,
        domain=None,
        kind="single",
        num_classes=3,
        class_names=("a", "b", "c"),
        image_size=4,
        num_train=0,
        num_dev=0,
    )


def test_an_executor_scores_a_predictor_from_images_alone(pool: Any) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(7, 4, 4, 3), dtype=np.uint8)
    means = rng.random((3, 4 * 4 * 3)).astype(np.float32)
    scores, flops = predict_in_pool(pool, _info(), pickle.dumps(means), images, seed=0)
    flat = images.reshape(7, -1).astype(np.float32) / 255.0
    expected = -((flat[:, None, :] - means[None]) ** 2).sum(axis=2)
    np.testing.assert_allclose(scores, expected, rtol=1e-6)
    assert flops["flops_reported"] == 3 * 7 * 48 * 3  # what the learner reported for predict
