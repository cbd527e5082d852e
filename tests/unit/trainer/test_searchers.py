"""Search strategies by name; ``random`` samples exactly what the hard-wired search did."""

from __future__ import annotations

import dataclasses

import pytest
from ray.tune.experiment import Experiment
from ray.tune.search.basic_variant import BasicVariantGenerator

from services.core.errors import UnknownNameError
from workers.learners.protocol import Choice, LogUniform, Uniform
from workers.trainer import searchers
from workers.trainer.search import param_space
from workers.trainer.searchers import SEARCHERS, SearchPlan, SearchRequest

SPACE = {"lr": LogUniform(1e-4, 1e-1), "wd": Uniform(0.0, 0.1), "width": Choice((16, 32, 64))}
TRIALS = 5


def _trainable(config):  # never run: Tune needs a trainable to build trials
    return None


def configs(search_alg) -> list[dict]:
    """Every trial config ``search_alg`` proposes for SPACE, as Tune would ask for them."""
    search_alg.add_configurations([Experiment("searchers", _trainable,
                                              config=param_space(SPACE, trials=TRIALS))])
    out = []
    while (trial := search_alg.next_trial()) is not None:
        out.append(trial.config)
        search_alg.on_trial_complete(trial.trial_id)  # frees a max_concurrent slot
    return out


def test_random_is_registered() -> None:
    assert "random" in SEARCHERS and "random" in SEARCHERS.names()


def test_a_typo_says_did_you_mean() -> None:
    with pytest.raises(UnknownNameError, match=r"Unknown search strategy 'randon'\. Did you mean 'random'\?"):
        searchers.plan("randon", SearchRequest(seed=1, max_concurrent=1, trials=1))


def test_random_plan_is_todays_seeded_basic_variant_generator() -> None:
    request = SearchRequest(seed=123, max_concurrent=2, trials=TRIALS)
    plan = searchers.plan("random", request)
    assert isinstance(plan, SearchPlan) and plan.scheduler is None
    assert isinstance(plan.search_alg, BasicVariantGenerator)
    assert plan.search_alg.max_concurrent == 2
    before = configs(BasicVariantGenerator(random_state=123, max_concurrent=2))  # the old wiring
    first = configs(plan.search_alg)
    again = configs(searchers.plan("random", request).search_alg)
    assert len(first) == TRIALS and first == before == again
    other = configs(searchers.plan("random", dataclasses.replace(request, seed=124)).search_alg)
    assert other != first


def test_requests_are_frozen() -> None:
    request = SearchRequest(seed=1, max_concurrent=1, trials=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.seed = 2  # type: ignore[misc]
    assert (request.metric, request.mode) == ("dev_error", "min")
