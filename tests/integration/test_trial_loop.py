"""The trial loop on a real local Ray (2 CPUs): every suggested trial runs once in the pool,
no more at once than the declared CPUs can hold, and every reservation is given back.

The pool here is a small Ray actor with the executor pool's ``run`` signature that records
how many trials it holds at once; the real pool runs under it in the end-to-end tests.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import ray
from ray.util import placement_group_table

from workers.learners.protocol import Uniform
from workers.trainer import searchers
from workers.trainer.search import param_space
from workers.trainer.searchers import SearchRequest
from workers.trainer.trial import TRIAL_INDEX, TRIAL_SEED
from workers.trainer.trial_loop import Suggestions, TrialLoop

pytestmark = pytest.mark.usefixtures("ray_local")


@ray.remote(num_cpus=0)
class CountingPool:
    """Holds each trial 0.3 s; a config with ``fail`` raises, as harness code might."""

    def __init__(self) -> None:
        self.now = self.most = 0

    async def run(self, config: dict, spec_box: list) -> dict:
        self.now += 1
        self.most = max(self.most, self.now)
        await asyncio.sleep(0.3)
        self.now -= 1
        if config.get("fail"):
            raise ValueError("harness code raised")
        return {
            "status": "ok",
            "trial_index": config[TRIAL_INDEX],
            "seed": config[TRIAL_SEED],
            "config": {"x": config["x"]},
            "dev_error": config["x"],
            "flops_measured": 10,
        }

    def most_at_once(self) -> int:
        return self.most


def run_loop(trials: int, *, cpus: float, concurrency: int, fail: bool = False):
    pool = CountingPool.remote()
    space = {"x": Uniform(0.0, 1.0)}
    plan = searchers.plan("random", SearchRequest(seed=5, max_concurrent=concurrency, trials=trials, steps=10))
    config_space = {**param_space(space, trials=trials), **({"fail": True} if fail else {})}
    seen = []
    loop = TrialLoop(pool=pool, spec_ref=ray.put("spec"), cpus=cpus, concurrency=concurrency, on_trial=seen.append)
    outcomes = loop.run(Suggestions(plan, config_space))
    return outcomes, seen, ray.get(pool.most_at_once.remote())


def live_reservations() -> list:
    return [pg for pg in placement_group_table().values() if pg["state"] != "REMOVED"]


def test_every_trial_runs_once_and_each_is_handed_on_as_it_ends() -> None:
    groups_before = len(placement_group_table())
    outcomes, seen, most = run_loop(6, cpus=1, concurrency=2)
    assert sorted(o.trial_index for o in outcomes) == [0, 1, 2, 3, 4, 5]
    assert seen == outcomes and all(o.status == "ok" and o.flops_measured == 10 for o in outcomes)
    assert all(set(o.config) == {"x", TRIAL_INDEX, TRIAL_SEED} for o in outcomes)  # as Tune's results carry it
    assert most == 2
    assert live_reservations() == []
    assert len(placement_group_table()) - groups_before == 2  # the trials take turns in 2 groups


def test_trials_wait_for_the_cpus_they_declared() -> None:
    started = time.monotonic()
    outcomes, _, most = run_loop(4, cpus=1, concurrency=4)  # 4 asked, the 2-CPU cluster holds 2
    assert len(outcomes) == 4 and most == 2
    assert time.monotonic() - started >= 0.6  # two rounds of 0.3 s
    assert live_reservations() == []


def test_without_a_cpu_ask_the_concurrency_alone_limits() -> None:
    _, _, most = run_loop(4, cpus=0, concurrency=4)
    assert most == 4


def test_a_trial_whose_harness_call_raises_is_a_failed_trial() -> None:
    outcomes, _, _ = run_loop(2, cpus=1, concurrency=2, fail=True)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("harness code raised" in (o.error or "") for o in outcomes)
    assert live_reservations() == []
