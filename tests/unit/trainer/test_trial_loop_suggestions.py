"""The trial loop's suggestions are the configs Tune's experiment would have run: the same
seeded samples for ``random``, the same sequence of GP suggestions for ``gp_ucb``."""

from __future__ import annotations

import dataclasses

import pytest
from ray.tune.search import Searcher
from ray.tune.search.basic_variant import BasicVariantGenerator

from tests.unit.trainer.test_searchers import GP_REQUEST, SPACE, TRIALS, configs, error_of, run_plan
from workers.trainer import searchers
from workers.trainer.search import param_space
from workers.trainer.searchers import SearchPlan, SearchRequest
from workers.trainer.trial import TRIAL_INDEX
from workers.trainer.trial_loop import Suggestions


def loop_configs(plan: SearchPlan, error=error_of) -> list[dict]:
    """Every config the loop's suggestions give, each trial completing before the next."""
    suggestions = Suggestions(plan, param_space(SPACE, trials=TRIALS))
    out = []
    for n in range(TRIALS + 1):
        config = suggestions.next(f"t{n}")
        if config == Searcher.FINISHED:
            return out
        assert config is not None
        out.append(config)
        value = error(config)
        suggestions.complete(f"t{n}", {"status": "failed"} if value is None else {"status": "ok", "dev_error": value})
    raise AssertionError("the suggestions did not finish after the budgeted trials")


@pytest.mark.parametrize("seed", [0, 123])
def test_random_suggestions_are_the_samples_tunes_generator_draws(seed: int) -> None:
    request = SearchRequest(seed=seed, max_concurrent=2, trials=TRIALS, steps=10)
    tunes = configs(BasicVariantGenerator(random_state=seed, max_concurrent=2))
    assert loop_configs(searchers.plan("random", request)) == tunes
    assert [c[TRIAL_INDEX] for c in tunes] == list(range(TRIALS))


def test_gp_ucb_suggestions_are_the_ones_tunes_search_generator_makes() -> None:
    assert loop_configs(searchers.plan("gp_ucb", GP_REQUEST)) == run_plan(searchers.plan("gp_ucb", GP_REQUEST))
    failing = lambda c: None if c[TRIAL_INDEX] % 2 else error_of(c)  # noqa: E731
    assert loop_configs(searchers.plan("gp_ucb", GP_REQUEST), failing) == run_plan(
        searchers.plan("gp_ucb", GP_REQUEST), error=failing
    )


def test_gp_ucb_waits_for_a_result_before_its_next_suggestion() -> None:
    suggestions = Suggestions(searchers.plan("gp_ucb", GP_REQUEST), param_space(SPACE, trials=TRIALS))
    assert suggestions.next("a")[TRIAL_INDEX] == 0
    assert suggestions.next("b") is None
    suggestions.complete("a", {"status": "ok", "dev_error": 0.3})
    assert suggestions.next("b")[TRIAL_INDEX] == 1


def test_a_search_algorithm_it_cannot_drive_is_refused() -> None:
    plan = dataclasses.replace(searchers.plan("random", GP_REQUEST), variants_seed=None)
    with pytest.raises(TypeError, match="BasicVariantGenerator"):
        Suggestions(plan, param_space(SPACE, trials=TRIALS))
