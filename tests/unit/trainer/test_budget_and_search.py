"""Budgets that make no sense and search spaces that are malformed are refused up front."""

from __future__ import annotations

import pytest
from ray import tune

from services.core.budget import RunBudget
from services.core.checkpoint_plan import checkpoint_steps
from services.core.errors import BudgetError, LearnerError
from workers.learners.protocol import PAPER_SEARCH_SPACE, Choice, LogUniform, Uniform
from workers.trainer.search import param_space
from workers.trainer.task_job import search_seed
from workers.trainer.trial import TRIAL_INDEX, TRIAL_SEED


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"trials": 0}, "trials"),
        ({"steps": -1}, "steps"),
        ({"trials": 2.5}, "trials"),
        ({"max_concurrent": 0}, "max_concurrent"),
        ({"seed": -3}, "seed"),
        ({"checkpoint_fractions": (0.5, 1.5)}, "checkpoint_fractions"),
        ({"checkpoint_fractions": ()}, "checkpoint_fractions"),
        ({"flop_cap": 0.0}, "flop_cap"),
        ({"threads_per_trial": True}, "threads_per_trial"),
        ({"search": "bayes"}, "search"),
        ({"search": 1}, "search"),
        ({"scheduler": "hyperband"}, "scheduler"),
        ({"scheduler": None}, "scheduler"),
    ],
)
def test_bad_budgets_name_the_field(kwargs, field) -> None:
    with pytest.raises(BudgetError, match=f"'{field}'"):
        RunBudget(**kwargs)


def test_budget_round_trips_through_json_dict() -> None:
    budget = RunBudget(
        trials=3, steps=7, checkpoint_fractions=(0.0, 1.0), flop_cap=1e12, search="gp_ucb", scheduler="asha"
    )
    assert RunBudget.from_dict(budget.to_dict()) == budget


def test_cap_reached_names_every_cap_the_committed_totals_reach() -> None:
    assert RunBudget().cap_reached(flops=1e30, wall_s=1e9) is None  # no cap, never stopped
    budget = RunBudget(flop_cap=1e9, wall_cap_s=3600)
    assert budget.capped and not RunBudget().capped
    assert budget.cap_reached(flops=9.9e8, wall_s=3599.9) is None
    assert budget.cap_reached(flops=1e9, wall_s=10) == "FLOP cap 1e+09 reached (1e+09 spent)"
    assert budget.cap_reached(flops=2e9, wall_s=3612.4) == (
        "FLOP cap 1e+09 reached (2e+09 spent); wall-time cap 3600 s reached (3612.4 s spent)"
    )


def test_an_unknown_strategy_names_the_known_ones_and_the_closest() -> None:
    with pytest.raises(
        BudgetError,
        match=r"Unknown search strategy 'gp-ucb'\. Did you mean 'gp_ucb'\? "
        r"Known: gp_ucb, random\. Got 'gp-ucb' instead\.",
    ) as caught:
        RunBudget(search="gp-ucb")
    assert caught.value.field == "search"


def test_a_budget_stored_before_search_and_scheduler_loads_with_their_defaults() -> None:
    stored = {
        "trials": 2,
        "steps": 5,
        "max_concurrent": None,
        "threads_per_trial": 1,
        "seed": 3,
        "checkpoint_fractions": [0.0, 1.0],
        "flop_cap": None,
        "wall_cap_s": None,
    }
    budget = RunBudget.from_dict(stored)
    assert (budget.search, budget.scheduler) == ("random", "fifo") == (RunBudget().search, RunBudget().scheduler)


def test_checkpoint_steps_cover_untrained_and_final() -> None:
    assert checkpoint_steps(200, (0.0, 0.125, 0.25, 0.5, 0.75, 1.0)) == (0, 25, 50, 100, 150, 200)
    assert checkpoint_steps(3, (0.0, 0.5, 1.0)) == (0, 2, 3)
    with pytest.raises(ValueError, match="total_steps"):
        checkpoint_steps(0, (1.0,))


def test_param_space_adds_trial_index_and_seed() -> None:
    space = param_space(PAPER_SEARCH_SPACE, trials=5)
    assert space[TRIAL_INDEX] == tune.grid_search([0, 1, 2, 3, 4])
    assert isinstance(space[TRIAL_SEED], tune.search.sample.Integer)
    lr = space["learning_rate"]
    assert (lr.lower, lr.upper) == (1e-4, 1e-1) and isinstance(lr.get_sampler(), tune.search.sample.LogUniform)


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"lr": LogUniform(0.0, 1.0)}, "LogUniform needs 0 < low < high"),
        ({"lr": Uniform(1.0, 0.0)}, "Uniform needs finite low <= high"),
        ({"opt": Choice(())}, "at least one value"),
        ({"lr": (1e-3, 1e-1)}, "expected LogUniform, Uniform or Choice"),
        ({TRIAL_SEED: Choice((1,))}, "reserved by the harness"),
    ],
)
def test_malformed_search_spaces_are_learner_errors(space, message) -> None:
    with pytest.raises(LearnerError, match=message):
        param_space(space, trials=1)


def test_search_seed_depends_on_run_seed_and_task_only() -> None:
    assert search_seed(0, 3) == search_seed(0, 3)
    assert len({search_seed(0, 1), search_seed(0, 2), search_seed(1, 1)}) == 3
