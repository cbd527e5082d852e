"""The run's warm executors: borrowed for trials and evaluations, handed back or replaced."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import ray

from workers.learners.protocol import TaskInfo
from workers.trainer.executor import borrowed, start_pool
from workers.trainer.task_job import evaluate

LEARNER = "nevis_test_learners:nearest_mean"


@pytest.fixture
def pool(ray_local: None) -> Iterator[Any]:
    pool = start_pool(LEARNER, threads=1, size=1, gpus_per_executor=0.0)
    assert ray.get(pool.ready.remote(), timeout=120) == 1
    yield pool
    ray.kill(pool)


def _same(a: Any, b: Any) -> bool:
    return a._actor_id == b._actor_id


def test_an_executor_is_handed_back_when_the_block_fails(pool: Any) -> None:
    with pytest.raises(RuntimeError, match="predict failed"):
        with borrowed(pool) as executor:
            raise RuntimeError("the learner's predict failed")
    again = ray.get(pool.acquire.remote(), timeout=30)  # hangs if the executor was lost
    assert _same(again, executor)
    ray.get(pool.release.remote(again))


def test_an_executor_whose_process_died_is_replaced(pool: Any) -> None:
    with pytest.raises(ray.exceptions.RayActorError):
        with borrowed(pool) as executor:
            ray.kill(executor)
            ray.get(executor.__ray_ready__.remote())
    fresh = ray.get(pool.acquire.remote(), timeout=30)
    assert not _same(fresh, executor)
    assert ray.get(fresh.__ray_ready__.remote(), timeout=120)
    ray.get(pool.release.remote(fresh))


def test_an_executor_scores_a_predictor_from_images_alone(pool: Any) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(7, 4, 4, 3), dtype=np.uint8)
    means = rng.random((3, 4 * 4 * 3)).astype(np.float32)
    info = TaskInfo(order=1, key="t", dataset="t", title="t", year=2000, domain=None, kind="single",
                    num_classes=3, class_names=("a", "b", "c"), image_size=4, num_train=0, num_dev=0)
    with borrowed(pool) as executor:
        scores, flops = evaluate(executor, info, pickle.dumps(means), images, seed=0)
    flat = images.reshape(7, -1).astype(np.float32) / 255.0
    expected = -((flat[:, None, :] - means[None]) ** 2).sum(axis=2)
    np.testing.assert_allclose(scores, expected, rtol=1e-6)
    assert flops["flops_reported"] == 3 * 7 * 48 * 3  # what the learner reported for predict
