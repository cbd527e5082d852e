"""The plan of a Pareto study: a grid learner × budget × seed, kept in ``DIR/study.json``.

Why a plan file: a study is many ordinary runs (one submission per point), hours long on
real streams. The plan records the grid and, as soon as a point's submission is created,
its id, so a rerun of the same command knows which points are finished (skipped), which
were started (resumed from their cursor) and which are new. The grid may only grow between
reruns (more learners, budgets or seeds): a rerun that drops or changes anything else is
refused, since the study's table would no longer be the one its plan describes.

This module is pure bookkeeping (no Ray, no database): parsing the command's lists,
building, merging, reading and writing the plan. :mod:`workers.trainer.study` runs it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from services.core.budget import RunBudget
from services.core.errors import BudgetError, NevisError

PLAN_FILE = "study.json"
PLAN_FORMAT = 1
PHASES = ("meta_test", "meta_train")
_BUDGET = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")


class StudyPlanError(NevisError, ValueError):
    """A study's plan file is unreadable, or does not match the command that reran it."""


@dataclass(frozen=True, order=True)
class StudyBudget:
    """A per-task budget of the study: ``trials`` hyper-parameter trials of ``steps`` steps."""

    trials: int
    steps: int

    @property
    def label(self) -> str:
        """How the command line and the plan file write it: ``TRIALSxSTEPS``."""
        return f"{self.trials}x{self.steps}"


@dataclass(frozen=True)
class StudyPoint:
    """One point of the grid and the submission that runs it (None until created)."""

    learner: str
    budget: StudyBudget
    seed: int
    submission_id: int | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.learner, self.budget.label, self.seed)

    @property
    def label(self) -> str:
        return f"{self.learner} {self.budget.label} seed {self.seed}"

    def run_budget(self) -> RunBudget:
        """The budget of this point's submission."""
        return RunBudget(trials=self.budget.trials, steps=self.budget.steps, seed=self.seed)


@dataclass(frozen=True)
class StudyGrid:
    """What the command asks for; the plan's grid must contain it (it may hold more)."""

    stream: str
    phase: str
    learners: tuple[str, ...]
    budgets: tuple[StudyBudget, ...]
    seeds: tuple[int, ...]


@dataclass(frozen=True)
class StudyPlan:
    """The grid and each point's submission, as ``study.json`` holds them."""

    grid: StudyGrid
    points: tuple[StudyPoint, ...] = field(default=())

    def with_submission(self, point: StudyPoint, submission_id: int) -> StudyPlan:
        """This plan with ``point``'s submission recorded."""
        points = tuple(replace(p, submission_id=submission_id) if p.key == point.key else p for p in self.points)
        return replace(self, points=points)


# --- parsing the command's lists ----------------------------------------------------------


def _items(text: str, option: str) -> list[str]:
    """The comma-separated items of ``text``; an empty list or a repeated item is an error."""
    items = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise BudgetError(
            f"{option} must be a comma-separated list with no empty item; got {text!r}.", field=option.lstrip("-")
        )
    repeated = sorted({item for item in items if items.count(item) > 1})
    if repeated:
        raise BudgetError(
            f"{option} names {', '.join(repeated)} more than once; got {text!r}.", field=option.lstrip("-")
        )
    return items


def parse_learners(text: str) -> tuple[str, ...]:
    """``indep,ft_prev`` → ("indep", "ft_prev"). Whether each exists is checked by the runner
    (a learner host), before any run starts."""
    return tuple(_items(text, "--learners"))


def parse_budget(text: str) -> StudyBudget:
    """``2x30`` → 2 trials of 30 steps per task; the numbers are checked as a RunBudget's.

    Examples:
        >>> parse_budget("2x30")
        StudyBudget(trials=2, steps=30)
    """
    match = _BUDGET.match(text)
    if match is None:
        raise BudgetError(f"A budget is TRIALSxSTEPS per task, e.g. 4x60; got {text!r}.", field="budgets")
    trials, steps = int(match[1]), int(match[2])
    try:
        RunBudget(trials=trials, steps=steps)  # the same limits as any run
    except BudgetError as exc:
        raise BudgetError(f"Budget {text.strip()!r}: {exc}", field="budgets") from None
    return StudyBudget(trials, steps)


def parse_budgets(text: str) -> tuple[StudyBudget, ...]:
    """``2x30,4x60`` → two budgets; ``2x30,02x30`` is one budget named twice (an error)."""
    budgets = tuple(parse_budget(item) for item in _items(text, "--budgets"))
    labels = [b.label for b in budgets]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise BudgetError(f"--budgets names {', '.join(repeated)} more than once; got {text!r}.", field="budgets")
    return budgets


def parse_seeds(text: str) -> tuple[int, ...]:
    """``0,1`` → (0, 1); each a run seed (an integer in [0, 2**31))."""
    seeds = []
    for item in _items(text, "--seeds"):
        if not item.isdigit():
            raise BudgetError(f"--seeds must be non-negative integers; got {item!r} in {text!r}.", field="seeds")
        seeds.append(RunBudget(seed=int(item)).seed)
    return tuple(seeds)


def make_grid(*, stream: str, phase: str, learners: str, budgets: str, seeds: str) -> StudyGrid:
    """The grid the command asks for, every list checked (nothing runs before this passes)."""
    if phase not in PHASES:
        raise BudgetError(f"--phase must be one of {', '.join(PHASES)}; got {phase!r}.", field="phase")
    if not stream.strip():
        raise BudgetError("--stream must name a stream or a manifest file.", field="stream")
    return StudyGrid(
        stream=stream,
        phase=phase,
        learners=parse_learners(learners),
        budgets=parse_budgets(budgets),
        seeds=parse_seeds(seeds),
    )


# --- building and merging plans -------------------------------------------------------------


def grid_points(grid: StudyGrid) -> tuple[StudyPoint, ...]:
    """Every point of ``grid``, cheapest budgets first (a partial study then already has
    every learner at its small budgets), then by seed, then by learner."""
    return tuple(
        StudyPoint(learner, budget, seed) for budget in grid.budgets for seed in grid.seeds for learner in grid.learners
    )


def _union(old: Sequence[Any], new: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(old) + tuple(item for item in new if item not in old)


def merge_plan(stored: StudyPlan | None, grid: StudyGrid) -> StudyPlan:
    """The plan to run for ``grid``: a new one, or ``stored`` grown by what ``grid`` adds.

    Raises:
        StudyPlanError: ``grid`` runs another stream or phase than ``stored``, or leaves out
            a learner, budget or seed of it (the plan may only grow).
    """
    if stored is None:
        return StudyPlan(grid=grid, points=grid_points(grid))
    old = stored.grid
    problems = [
        f"--{name} {mine!r} (the study was planned with {theirs!r})"
        for name, mine, theirs in (("stream", grid.stream, old.stream), ("phase", grid.phase, old.phase))
        if mine != theirs
    ]
    for name, mine, theirs in (
        ("learners", grid.learners, old.learners),
        ("budgets", [b.label for b in grid.budgets], [b.label for b in old.budgets]),
        ("seeds", grid.seeds, old.seeds),
    ):
        dropped = [str(item) for item in theirs if item not in mine]
        if dropped:
            problems.append(f"--{name} leaves out {', '.join(dropped)} of the plan")
    if problems:
        raise StudyPlanError(
            f"This folder holds another study: {'; '.join(problems)}. A rerun may only add learners, "
            "budgets or seeds; use another --out folder for a different grid."
        )
    merged = StudyGrid(
        stream=old.stream,
        phase=old.phase,
        learners=_union(old.learners, grid.learners),
        budgets=_union(old.budgets, grid.budgets),
        seeds=_union(old.seeds, grid.seeds),
    )
    known = {p.key: p for p in stored.points}
    return StudyPlan(grid=merged, points=tuple(known.get(p.key, p) for p in grid_points(merged)))


# --- the plan file ----------------------------------------------------------------------------


def plan_to_dict(plan: StudyPlan, *, database: str | None = None) -> dict[str, Any]:
    """The JSON document of ``study.json``."""
    grid = plan.grid
    return {
        "format": PLAN_FORMAT,
        "stream": grid.stream,
        "phase": grid.phase,
        "learners": list(grid.learners),
        "budgets": [b.label for b in grid.budgets],
        "seeds": list(grid.seeds),
        "database": database,
        "points": [
            {
                "learner": p.learner,
                "budget": p.budget.label,
                "trials": p.budget.trials,
                "steps": p.budget.steps,
                "seed": p.seed,
                "submission_id": p.submission_id,
            }
            for p in plan.points
        ],
    }


def plan_from_dict(doc: dict[str, Any]) -> StudyPlan:
    """The plan a ``study.json`` document holds; anything malformed is a StudyPlanError."""
    try:
        if doc.get("format") != PLAN_FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, expected {PLAN_FORMAT}")
        grid = StudyGrid(
            stream=str(doc["stream"]),
            phase=str(doc["phase"]),
            learners=tuple(str(x) for x in doc["learners"]),
            budgets=tuple(parse_budget(str(x)) for x in doc["budgets"]),
            seeds=tuple(int(x) for x in doc["seeds"]),
        )
        ids = {
            (str(p["learner"]), parse_budget(str(p["budget"])).label, int(p["seed"])): p.get("submission_id")
            for p in doc["points"]
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StudyPlanError(
            f"The study plan is malformed ({exc}); fix it, or start over in another --out folder."
        ) from None
    points = tuple(
        replace(p, submission_id=None if ids.get(p.key) is None else int(ids[p.key])) for p in grid_points(grid)
    )
    return StudyPlan(grid=grid, points=points)


def read_plan(folder: Path) -> StudyPlan | None:
    """The plan in ``folder``, or None where there is none yet."""
    path = Path(folder) / PLAN_FILE
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise StudyPlanError(f"Cannot read the study plan {path}: {exc}.") from None
    if not isinstance(doc, dict):
        raise StudyPlanError(f"The study plan {path} is not a JSON object.")
    return plan_from_dict(doc)


def write_plan(folder: Path, plan: StudyPlan, *, database: str | None = None) -> Path:
    """Write ``study.json`` atomically (a crash leaves the old plan or the new, never half)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / PLAN_FILE
    scratch = folder / f".{PLAN_FILE}.tmp"
    scratch.write_text(json.dumps(plan_to_dict(plan, database=database), indent=2) + "\n")
    os.replace(scratch, path)
    return path


__all__ = [
    "PHASES",
    "PLAN_FILE",
    "PLAN_FORMAT",
    "StudyBudget",
    "StudyGrid",
    "StudyPlan",
    "StudyPlanError",
    "StudyPoint",
    "grid_points",
    "make_grid",
    "merge_plan",
    "parse_budget",
    "parse_budgets",
    "parse_learners",
    "parse_seeds",
    "plan_from_dict",
    "plan_to_dict",
    "read_plan",
    "write_plan",
]
