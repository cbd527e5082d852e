"""Rulesets (issue 50): names parsed once, each ruleset's rules applied to a budget, and the
task's running charge that the harness stops trials by."""

from __future__ import annotations

import pytest

from services.core.budget import RunBudget
from services.core.errors import BudgetError, UnknownNameError
from services.core.rulesets import RULESETS, cap_message, known_rulesets, ruleset, stopped_at_cap
from workers.trainer.task_budget import TaskCharge


@pytest.mark.parametrize(
    "name, cap, total",
    [
        ("budget-1e12", 1e12, None),
        ("budget-2.5T", 2.5e12, None),
        ("budget-300G-total-1.5P", 3e11, 1.5e15),
        ("budget-2.5e+10", 2.5e10, None),
    ],
)
def test_a_budget_tier_reads_its_caps_from_its_name(name, cap, total):
    rules = ruleset(name)
    assert (rules.task_flop_cap, rules.stream_flop_cap, rules.one_trial) == (cap, total, False)
    assert rules.task_rules.task_flop_cap == cap and rules.task_rules.ruleset == name


@pytest.mark.parametrize(
    "name, words",
    [
        ("opne", "Did you mean 'open'?"),
        ("budget", "needs its cap"),
        ("budget-", "not a budget tier"),
        ("budget-1e12-total", "not a budget tier"),
        ("budget-0", "positive, finite"),
        ("budget-1e400", "positive, finite"),
        ("x" * 49, "at most 48"),
        (None, "a string"),
    ],
)
def test_a_name_that_is_no_ruleset_is_refused_with_the_reason(name, words):
    with pytest.raises(UnknownNameError, match=words.replace("?", r"\?").replace("(", r"\(")):
        ruleset(name)


def test_the_registry_declares_each_ruleset_once():
    assert RULESETS.names() == ("budget", "open", "self-tuning")
    assert known_rulesets() == ("budget-<X>", "open", "self-tuning")
    with pytest.raises(ValueError, match="already registered"):
        RULESETS.register("open", lambda name: ruleset("open"))


def test_open_leaves_a_budget_as_it_is():
    budget = RunBudget(trials=7, flop_cap=1e9)
    assert ruleset("open").apply(budget) == (budget, None)
    assert not ruleset("open").task_rules.enforced


def test_self_tuning_collapses_a_default_search_and_refuses_an_asked_one():
    collapsed, note = ruleset("self-tuning").apply(RunBudget(steps=9))
    assert (collapsed.trials, collapsed.steps) == (1, 9) and "collapsed from 4 trials to 1" in note
    assert ruleset("self-tuning").apply(RunBudget(trials=1))[0].trials == 1
    with pytest.raises(BudgetError, match="must be 1 under ruleset 'self-tuning'") as refused:
        ruleset("self-tuning").apply(RunBudget(trials=2))
    assert refused.value.field == "trials"
    assert ruleset("self-tuning").task_rules.defaults_only


def test_a_tier_total_becomes_the_run_cap_unless_the_submitter_asked_for_less():
    tier = ruleset("budget-1e9-total-5e9")
    assert tier.apply(RunBudget())[0].flop_cap == 5e9
    assert tier.apply(RunBudget(flop_cap=1e10))[0].flop_cap == 5e9
    assert tier.apply(RunBudget(flop_cap=2e9)) == (RunBudget(flop_cap=2e9), None)


def test_the_task_charge_stops_trials_at_the_cap_and_counts_settled_ones_once():
    charge = TaskCharge(cap=100)
    assert charge.report(0, 40) and charge.report(1, 30)
    assert charge.report(0, 20) and charge.total == 70  # reports only grow
    charge.settle(0, 45)  # the floor can charge more than the last report
    assert charge.total == 75 and charge.report(0, 99) and charge.total == 75  # an ended trial's late report is ignored
    assert not charge.report(1, 55) and charge.reached and charge.total == 100
    assert "budget-100 cap of 100 cFLOP is reached (100 cFLOP spent" in cap_message(
        "budget-100", 100, 100, started=True
    )
    assert cap_message("budget-100", 100, 100, started=False).startswith("not started")


@pytest.mark.parametrize(
    "status, error, capped",
    [
        ("stopped", cap_message("budget-9", 9, 9, started=True), True),
        ("stopped", cap_message("budget-9", 9, 0, started=False), True),
        ("stopped", "stopped by early stopping at step 4 (dev error 0.5000)", False),
        ("failed", "not started: x", False),
        ("stopped", None, False),
    ],
)
def test_a_row_stopped_at_the_cap_is_told_from_other_stops(status, error, capped):
    assert stopped_at_cap(status, error) is capped
