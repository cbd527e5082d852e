"""The run's actors: a learner is described by the executors of the pool started for it on a
guess (one worker, one CPU, no GPU), which the run keeps when the guess was right and stops as
soon as the learner turns out to need other actors; a learner that cannot be loaded leaves no
pool behind and is reported by a host of the caller's own, with the usual error. Real local
Ray, real sandboxed learner hosts."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
import ray

from services.core.budget import RunBudget
from services.core.config import get_settings
from services.core.errors import LearnerError
from workers.learners.protocol import Resources
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.learner_calls import describe
from workers.trainer.run_actors import RunActors
from workers.trainer.stream_runner import StreamRunner

pytestmark = pytest.mark.usefixtures("ray_local")
BUDGET = RunBudget(trials=1, steps=1)


def _host(spec: str) -> HostSpec:
    paths = tuple(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    return HostSpec(spec, import_paths=paths)


@pytest.fixture
def actors() -> Iterator[RunActors]:
    actors = RunActors(get_settings())
    yield actors
    actors.close()


def _alive(actor: object) -> bool:
    try:
        ray.get(actor.__ray_ready__.remote(), timeout=60)  # type: ignore[attr-defined]
    except ray.exceptions.RayActorError:
        return False
    return True


def _stopped(actor: object, within_s: float = 20.0) -> bool:
    """Whether ``actor`` is gone within ``within_s``: ``ray.kill`` returns before the process ends."""
    deadline = time.monotonic() + within_s
    while _alive(actor):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_the_pool_that_described_a_default_learner_is_the_one_its_trials_get(actors: RunActors) -> None:
    host = _host("nevis_test_learners:nearest_mean")
    declared = actors.describe_in_guessed_pool(host, BUDGET)
    with LearnerHost(host) as own:
        assert declared == describe(own)  # the same answer as a host of the driver's own
    (guessed,) = actors._pools.values()
    assert actors.executor_pool(host, declared.resources, BUDGET) is guessed
    assert actors.describe_in_guessed_pool(host, BUDGET) is None  # one guess per run
    assert _alive(guessed)


def test_a_learner_that_needs_other_actors_stops_the_guessed_pool(actors: RunActors) -> None:
    host = _host("nevis_test_learners:two_workers")
    declared = actors.describe_in_guessed_pool(host, BUDGET)
    assert declared is not None and declared.resources.num_workers == 2
    (guessed,) = actors._pools.values()
    actors.start(host, declared.resources, BUDGET, 16)  # its evaluator starts; the pool idles no more
    assert actors.executor_pool(host, declared.resources, BUDGET) is None
    assert _stopped(guessed)


def test_a_guess_of_another_size_is_stopped_when_the_real_pool_starts(actors: RunActors) -> None:
    host = _host("nevis_test_learners:nearest_mean")
    declared = actors.describe_in_guessed_pool(host, BUDGET)
    (guessed,) = actors._pools.values()
    (executors,) = actors._executors.values()
    wider = Resources(cpus_per_worker=0.5)  # e.g. bounded by a registration: two fit at once
    pool = actors.executor_pool(host, wider, RunBudget(trials=2, steps=1))
    assert pool is not guessed and declared is not None
    assert _stopped(guessed) and _alive(pool)
    assert all(map(_stopped, executors))  # the guess's executors went with it


def test_a_learner_that_cannot_load_leaves_no_pool_and_gets_the_usual_error(actors: RunActors) -> None:
    assert actors.describe_in_guessed_pool(_host("nevis_test_learners:no_such_learner"), BUDGET) is None
    assert not actors._pools
    with StreamRunner(get_settings()) as runner, pytest.raises(LearnerError, match="no_such_learner"):
        runner.learner("nevis_test_learners:no_such_learner", BUDGET)
