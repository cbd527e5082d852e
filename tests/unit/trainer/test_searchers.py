"""Search strategies and schedulers by name; ``random`` samples exactly what the hard-wired
search did; ``gp_ucb`` is seeded, sequential, keeps the declared types and learns from results.

The GP searcher is driven as Tune drives it (``SearchGenerator``, ``suggest`` and
``on_trial_complete``), without a Ray cluster.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest
from ray import tune
from ray.tune.experiment import Experiment
from ray.tune.search import ConcurrencyLimiter, Searcher, SearchGenerator
from ray.tune.search.basic_variant import BasicVariantGenerator

from services.core import budget
from services.core.errors import UnknownNameError
from workers.learners.protocol import Choice, LogUniform, Uniform
from workers.trainer import searchers
from workers.trainer.gp_search import GpUcbSearch, dimension
from workers.trainer.search import param_space
from workers.trainer.searchers import SCHEDULERS, SEARCHERS, HarnessKeys, SearchPlan, SearchRequest
from workers.trainer.trial import TRIAL_INDEX, TRIAL_SEED

SPACE = {"lr": LogUniform(1e-4, 1e-1), "wd": Uniform(0.0, 0.1), "width": Choice((16, 32, 64))}
TRIALS = 5


def _trainable(config):  # never run: Tune needs a trainable to build trials
    return None


def configs(search_alg) -> list[dict]:
    """Every trial config ``search_alg`` proposes for SPACE, as Tune would ask for them."""
    search_alg.add_configurations([Experiment("searchers", _trainable, config=param_space(SPACE, trials=TRIALS))])
    out = []
    while (trial := search_alg.next_trial()) is not None:
        out.append(trial.config)
        search_alg.on_trial_complete(trial.trial_id)  # frees a max_concurrent slot
    return out


def test_random_is_registered() -> None:
    assert "random" in SEARCHERS and "random" in SEARCHERS.names()


def test_a_typo_says_did_you_mean() -> None:
    with pytest.raises(UnknownNameError, match=r"Unknown search strategy 'randon'\. Did you mean 'random'\?"):
        searchers.plan("randon", SearchRequest(seed=1, max_concurrent=1, trials=1, steps=10))


def test_random_plan_is_todays_seeded_basic_variant_generator() -> None:
    request = SearchRequest(seed=123, max_concurrent=2, trials=TRIALS, steps=10)
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
    request = SearchRequest(seed=1, max_concurrent=1, trials=1, steps=10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.seed = 2  # type: ignore[misc]
    assert (request.metric, request.mode) == ("dev_error", "min")


# --- the names the budget accepts are the ones registered ------------------------------


def test_registered_strategies_are_the_ones_a_budget_accepts() -> None:
    assert SEARCHERS.names() == tuple(sorted(budget.SEARCH_NAMES))


def test_registered_schedulers_are_the_ones_a_budget_accepts() -> None:
    assert SCHEDULERS.names() == tuple(sorted(budget.SCHEDULER_NAMES))


# --- gp_ucb through Tune's SearchGenerator -------------------------------------------------

GP_REQUEST = SearchRequest(seed=7, max_concurrent=4, trials=TRIALS, steps=10)


def error_of(config: dict) -> float:
    """A planted dev error: best at lr 1e-2, wd 0.05, width 32."""
    return (math.log10(config["lr"]) + 2) ** 2 + (config["wd"] - 0.05) ** 2 + (config["width"] != 32)


def run_plan(
    search_plan: SearchPlan, space: dict = SPACE, error: Callable[[dict], float | None] = error_of
) -> list[dict]:
    """Every trial config of ``search_plan`` as Tune would make them, each trial completing
    (with ``error``'s dev error, or failed without one) before the next is asked for."""
    generator = SearchGenerator(search_plan.search_alg)
    config = param_space(space, trials=TRIALS)
    assert generator.set_search_properties(None, None, config)
    generator.add_configurations([Experiment("gp", _trainable, config=config, num_samples=search_plan.num_samples)])
    out = []
    while (trial := generator.next_trial()) is not None:
        out.append(trial.config)
        value = error(trial.config)
        result = {"status": "failed"} if value is None else {"status": "ok", "dev_error": value}
        generator.on_trial_complete(trial.trial_id, result=result)
    assert generator.is_finished()
    return out


def test_gp_ucb_makes_one_trial_per_index_with_the_declared_types() -> None:
    search_plan = searchers.plan("gp_ucb", GP_REQUEST)
    assert search_plan.num_samples == TRIALS and search_plan.scheduler is None
    trials = run_plan(search_plan)
    assert [c[TRIAL_INDEX] for c in trials] == list(range(TRIALS))
    assert len({c[TRIAL_SEED] for c in trials}) == TRIALS
    assert all(type(c[TRIAL_SEED]) is int and 0 <= c[TRIAL_SEED] < 2**31 - 1 for c in trials)
    for c in trials:
        assert type(c["lr"]) is float and 1e-4 <= c["lr"] <= 1e-1
        assert type(c["wd"]) is float and 0.0 <= c["wd"] <= 0.1
        assert type(c["width"]) is int and c["width"] in (16, 32, 64)


def test_gp_ucb_is_deterministic_by_seed() -> None:
    first = run_plan(searchers.plan("gp_ucb", GP_REQUEST))
    assert run_plan(searchers.plan("gp_ucb", GP_REQUEST)) == first
    assert run_plan(searchers.plan("gp_ucb", dataclasses.replace(GP_REQUEST, seed=8))) != first


def test_gp_ucb_runs_one_trial_at_a_time() -> None:
    search_alg = searchers.plan("gp_ucb", GP_REQUEST).search_alg
    assert isinstance(search_alg, HarnessKeys) and isinstance(search_alg.searcher, ConcurrencyLimiter)
    assert search_alg.searcher.max_concurrent == 1
    assert search_alg.set_search_properties(None, None, param_space(SPACE, trials=TRIALS))
    assert search_alg.suggest("a")[TRIAL_INDEX] == 0
    assert search_alg.suggest("b") is None  # waits for "a": not counted as a trial
    search_alg.on_trial_complete("a", {"dev_error": 0.5})
    assert search_alg.suggest("b")[TRIAL_INDEX] == 1


def test_gp_ucb_finishes_after_the_budgeted_trials() -> None:
    search_alg = searchers.plan("gp_ucb", dataclasses.replace(GP_REQUEST, trials=2)).search_alg
    search_alg.set_search_properties(None, None, param_space(SPACE, trials=2))
    for trial_id in ("a", "b"):
        search_alg.suggest(trial_id)
        search_alg.on_trial_complete(trial_id, {"dev_error": 0.5})
    assert search_alg.suggest("c") == Searcher.FINISHED


def test_failed_trials_do_not_stop_the_search() -> None:
    every_other = run_plan(
        searchers.plan("gp_ucb", GP_REQUEST), error=lambda c: None if c[TRIAL_INDEX] % 2 else error_of(c)
    )
    all_failed = run_plan(searchers.plan("gp_ucb", GP_REQUEST), error=lambda c: None)
    assert [c[TRIAL_INDEX] for c in every_other] == [c[TRIAL_INDEX] for c in all_failed] == list(range(TRIALS))


def test_constant_domains_and_an_empty_space_need_no_gp() -> None:
    space = {"fixed": Choice(("adam",)), "flat": Uniform(0.5, 0.5)}
    trials = run_plan(searchers.plan("gp_ucb", GP_REQUEST), space=space, error=lambda c: 0.1)
    assert [(c["fixed"], c["flat"]) for c in trials] == [("adam", 0.5)] * TRIALS
    assert [sorted(c) for c in run_plan(searchers.plan("gp_ucb", GP_REQUEST), space={}, error=lambda c: 0.1)] == [
        [TRIAL_INDEX, TRIAL_SEED]
    ] * TRIALS


def test_a_saved_search_resumes_where_it_was(tmp_path) -> None:
    def fresh() -> SearchGenerator:
        generator = SearchGenerator(searchers.plan("gp_ucb", GP_REQUEST).search_alg)
        config = param_space(SPACE, trials=TRIALS)
        generator.set_search_properties(None, None, config)
        generator.add_configurations([Experiment("gp", _trainable, config=config, num_samples=TRIALS)])
        return generator

    generator = fresh()
    for _ in range(3):
        trial = generator.next_trial()
        generator.on_trial_complete(trial.trial_id, result={"dev_error": error_of(trial.config)})
    generator.save_to_dir(str(tmp_path), session_str="test")  # as Tune checkpoints an experiment
    restored = fresh()
    restored.restore_from_dir(str(tmp_path))
    resumed = restored.searcher.suggest("d")
    assert resumed == generator.searcher.suggest("d") and resumed[TRIAL_INDEX] == 3
    assert generator.searcher.suggest("e") is None  # "d" is running: one at a time


@pytest.mark.parametrize(
    "domain", [tune.randint(0, 4), tune.quniform(0.0, 1.0, 0.1), tune.qloguniform(1e-3, 1.0, 1e-3)]
)
def test_domains_the_gp_cannot_search_are_refused(domain) -> None:
    with pytest.raises(ValueError, match="GP-UCB searches log-uniform, uniform and choice domains"):
        dimension("x", domain)


# --- the GP learns from earlier results ------------------------------------------------------


def suggestions_for(optimum: float, *, seed: int, n: int = 10, failing_above: float = math.inf) -> list[float]:
    """``n`` sequential suggestions of x in [0, 1] for the planted error (x - optimum)^2;
    trials at x > ``failing_above`` fail without a dev error."""
    gp = GpUcbSearch(metric="dev_error", mode="min", seed=seed)
    gp.set_search_properties(None, None, {"x": tune.uniform(0.0, 1.0)})
    xs = []
    for i in range(n):
        x = gp.suggest(str(i))["x"]
        xs.append(x)
        gp.on_trial_complete(str(i), {"status": "failed"} if x > failing_above else {"dev_error": (x - optimum) ** 2})
    return xs


def test_suggestions_learn_from_results_and_concentrate_near_a_planted_optimum() -> None:
    near = 0
    for seed in (0, 1, 2):
        runs = {optimum: suggestions_for(optimum, seed=seed) for optimum in (0.3, 0.7)}
        assert runs[0.3][:2] == runs[0.7][:2]  # the random start: same seed, nothing learnt yet
        assert runs[0.3][2:] != runs[0.7][2:]  # then each follows its own results
        near += sum(abs(x - optimum) < 0.1 for optimum, xs in runs.items() for x in xs[5:])
    # Of the 30 later suggestions, a uniform draw puts 6 within 0.1 of the optimum on
    # average, and 15 or more with a chance of 2 in 10,000.
    assert near >= 15


def fourth_suggestion(third: dict | None, *, error: bool = False) -> dict:
    """What GP-UCB suggests after errors 0.1 and 0.3 and then ``third`` as the third result."""
    gp = GpUcbSearch(metric="dev_error", mode="min", seed=5)
    gp.set_search_properties(None, None, {"x": tune.uniform(0.0, 1.0)})
    for trial_id, result in (("1", {"dev_error": 0.1}), ("2", {"dev_error": 0.3}), ("3", third)):
        gp.suggest(trial_id)
        gp.on_trial_complete(trial_id, result=result, error=error and trial_id == "3")
    return gp.suggest("4")


def test_a_failed_trial_counts_as_the_worst_value_seen() -> None:
    as_worst = fourth_suggestion({"dev_error": 0.3})
    assert fourth_suggestion({"status": "failed", "error": "boom"}) == as_worst
    assert fourth_suggestion({"status": "ok", "dev_error": math.nan}) == as_worst
    assert fourth_suggestion(None, error=True) == as_worst  # the trial process died
    assert fourth_suggestion({"dev_error": 0.0}) != as_worst  # the value does matter


# --- schedulers ------------------------------------------------------------------------------


def test_fifo_is_tunes_default_scheduler() -> None:
    assert searchers.plan("random", GP_REQUEST, scheduler="fifo").scheduler is None


def test_asha_is_the_harness_rule_at_a_ninth_and_a_third_of_the_steps() -> None:
    assert searchers.plan("gp_ucb", dataclasses.replace(GP_REQUEST, steps=200), scheduler="asha").scheduler is None
    rule = searchers.stopping_rule("asha", 200)
    assert (rule.rungs, rule.eta) == ((22, 67), 3)
    assert searchers.stopping_rule("asha", 1).rungs == ()
    assert searchers.stopping_rule("fifo", 200).rungs == ()


def test_an_unknown_scheduler_says_did_you_mean() -> None:
    with pytest.raises(UnknownNameError, match=r"Unknown trial scheduler 'ashaa'\. Did you mean 'asha'\?"):
        searchers.plan("random", GP_REQUEST, scheduler="ashaa")
