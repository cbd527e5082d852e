"""A trial whose executor dies is charged what it used, never 0 (issue 44): the usage its
call measured where harness code raised with it, else wall time × the CPUs it declared,
floored like any call and marked ``cpu_estimated`` (the host went with its reading)."""

from __future__ import annotations

import asyncio
import os

import pytest
import ray

from workers.learners.protocol import Uniform
from workers.trainer import searchers
from workers.trainer.search import param_space
from workers.trainer.searchers import SearchRequest
from workers.trainer.trial_loop import Suggestions, TrialLoop

pytestmark = pytest.mark.usefixtures("ray_local")

HELD_S = 2.6  # past the floor's 2 s allowance, so the estimate implies a floor above 0


@ray.remote(num_cpus=0, max_restarts=0)
class DyingPool:
    """Holds the trial, then its process dies, as an executor killed for memory does."""

    async def run(self, config: dict, spec_box: list) -> dict:
        await asyncio.sleep(HELD_S)
        os._exit(1)


def test_a_trial_whose_executor_dies_is_charged_its_estimated_usage_and_floor() -> None:
    plan = searchers.plan("random", SearchRequest(seed=5, max_concurrent=1, trials=1, steps=10))
    loop = TrialLoop(pool=DyingPool.remote(), spec_ref=ray.put("spec"), cpus=1, concurrency=1, on_trial=lambda o: None)
    [outcome] = loop.run(Suggestions(plan, param_space({"x": Uniform(0.0, 1.0)}, trials=1)))
    assert outcome.status == "failed"
    assert outcome.cpu_estimated is True
    assert outcome.cpu_seconds is not None and outcome.cpu_seconds >= HELD_S  # wall × 1 declared CPU
    assert outcome.flops_floor > 0 and outcome.flops == outcome.flops_floor  # charged, never 0
    assert outcome.flops_source == "floor"
