"""The Pareto study's plan: parsing the command's lists, and the plan file (grow, never change)."""

from __future__ import annotations

import json

import pytest

from services.core.errors import BudgetError
from workers.trainer.study_plan import (
    PLAN_FILE,
    StudyBudget,
    StudyPlanError,
    grid_points,
    make_grid,
    merge_plan,
    parse_budget,
    parse_budgets,
    parse_learners,
    parse_seeds,
    read_plan,
    write_plan,
)


def _grid(
    learners: str = "indep,ft_prev",
    budgets: str = "1x3,2x3",
    seeds: str = "0",
    *,
    stream: str = "mini",
    phase: str = "meta_test",
):
    return make_grid(stream=stream, phase=phase, learners=learners, budgets=budgets, seeds=seeds)


@pytest.mark.parametrize(("text", "expected"), [("2x30", (2, 30)), (" 4X60 ", (4, 60)), ("8 x 120", (8, 120))])
def test_a_budget_is_trials_by_steps(text: str, expected: tuple[int, int]) -> None:
    budget = parse_budget(text)
    assert (budget.trials, budget.steps) == expected
    assert budget.label == f"{expected[0]}x{expected[1]}"


@pytest.mark.parametrize("text", ["3x", "x3", "3", "3x4x5", "abc", "", "-1x3", "2.5x3"])
def test_a_malformed_budget_is_refused_with_the_expected_shape(text: str) -> None:
    with pytest.raises(BudgetError, match="TRIALSxSTEPS") as caught:
        parse_budget(text)
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize(("text", "field"), [("0x30", "trials"), ("3x0", "steps")])
def test_a_budget_out_of_range_names_the_budget_and_the_number(text: str, field: str) -> None:
    with pytest.raises(BudgetError, match=f"Budget '{text}'.*'{field}'"):
        parse_budget(text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no empty item"),
        ("2x30,", "no empty item"),
        ("2x30,2x30", "2x30 more than once"),
        ("2x30,02x30", "2x30 more than once"),
    ],
)
def test_a_budget_list_must_be_non_empty_and_without_repeats(text: str, problem: str) -> None:
    with pytest.raises(BudgetError, match=problem):
        parse_budgets(text)


def test_lists_are_parsed_in_order() -> None:
    assert parse_learners(" indep, ft_prev ,ft_d") == ("indep", "ft_prev", "ft_d")
    assert parse_budgets("2x30,4x60") == (StudyBudget(2, 30), StudyBudget(4, 60))
    assert parse_seeds("0,1,7") == (0, 1, 7)


@pytest.mark.parametrize(
    ("parse", "text", "problem"),
    [
        (parse_learners, "", "--learners must be a comma-separated list"),
        (parse_learners, "indep,,ft_d", "--learners must be a comma-separated list"),
        (parse_learners, "indep,indep", "--learners names indep more than once"),
        (parse_seeds, "0,-1", "non-negative integers"),
        (parse_seeds, "zero", "non-negative integers"),
        (parse_seeds, "1,1", "--seeds names 1 more than once"),
    ],
)
def test_empty_or_repeated_lists_name_the_option(parse, text: str, problem: str) -> None:
    with pytest.raises(BudgetError, match=problem):
        parse(text)


def test_an_unknown_phase_is_refused() -> None:
    with pytest.raises(BudgetError, match="--phase must be one of meta_test, meta_train"):
        _grid(phase="test")


def test_points_run_cheapest_budgets_first() -> None:
    points = grid_points(_grid(seeds="0,1"))
    assert [p.key for p in points] == [
        ("indep", "1x3", 0),
        ("ft_prev", "1x3", 0),
        ("indep", "1x3", 1),
        ("ft_prev", "1x3", 1),
        ("indep", "2x3", 0),
        ("ft_prev", "2x3", 0),
        ("indep", "2x3", 1),
        ("ft_prev", "2x3", 1),
    ]
    assert points[0].run_budget().model_dump(include={"trials", "steps", "seed"}) == {
        "trials": 1,
        "steps": 3,
        "seed": 0,
    }


def test_the_plan_file_round_trips_with_submission_ids(tmp_path) -> None:
    plan = merge_plan(None, _grid())
    plan = plan.with_submission(plan.points[1], 42)
    write_plan(tmp_path, plan, database="sqlite:///x.sqlite")
    doc = json.loads((tmp_path / PLAN_FILE).read_text())
    assert doc["budgets"] == ["1x3", "2x3"] and doc["learners"] == ["indep", "ft_prev"] and doc["seeds"] == [0]
    assert [p["submission_id"] for p in doc["points"]] == [None, 42, None, None]
    assert read_plan(tmp_path) == plan
    assert read_plan(tmp_path / "elsewhere") is None


def test_growing_the_grid_keeps_every_recorded_submission(tmp_path) -> None:
    stored = merge_plan(None, _grid())
    for i, point in enumerate(stored.points):
        stored = stored.with_submission(point, 10 + i)
    grown = merge_plan(stored, _grid("indep,ft_prev,ft_d", "1x3,2x3,4x3", "0,1"))
    assert grown.grid.learners == ("indep", "ft_prev", "ft_d")
    assert [b.label for b in grown.grid.budgets] == ["1x3", "2x3", "4x3"] and grown.grid.seeds == (0, 1)
    assert len(grown.points) == 3 * 3 * 2
    ids = {p.key: p.submission_id for p in grown.points}
    assert {k: v for k, v in ids.items() if v is not None} == {p.key: p.submission_id for p in stored.points}
    # The same grid, given in another order, is the same study.
    assert merge_plan(stored, _grid("ft_prev,indep", "2x3,1x3")) == stored


@pytest.mark.parametrize(
    ("grid", "problem"),
    [
        (dict(stream="nevis22-short"), "--stream 'nevis22-short' \\(the study was planned with 'mini'\\)"),
        (dict(phase="meta_train"), "--phase 'meta_train'"),
        (dict(learners="indep"), "--learners leaves out ft_prev"),
        (dict(budgets="2x3,4x3"), "--budgets leaves out 1x3"),
        (dict(seeds="1"), "--seeds leaves out 0"),
    ],
)
def test_changing_the_grid_in_the_same_folder_is_refused(grid: dict, problem: str) -> None:
    stored = merge_plan(None, _grid())
    with pytest.raises(StudyPlanError, match=problem) as caught:
        merge_plan(stored, _grid(**grid))
    assert "use another --out folder" in str(caught.value)


@pytest.mark.parametrize(
    "text", ["not json", "[]", json.dumps({"format": 99}), json.dumps({"format": 1, "stream": "mini"})]
)
def test_a_malformed_plan_file_is_a_clear_error(tmp_path, text: str) -> None:
    (tmp_path / PLAN_FILE).write_text(text)
    with pytest.raises(StudyPlanError, match="study plan"):
        read_plan(tmp_path)
