"""The budget of a run, declared once: the API's request schema, the coordinator's checks,
the stored submission and the runner all use this one model.

Per-task search budget (trials, steps, concurrency, seed, checkpoint fractions, search
strategy and trial scheduler) and the whole-run caps (FLOPs, wall time). Integers are strict (``true`` is not 1), floats finite,
lists bounded, unknown keys refused, strategy and scheduler names one of a fixed list. Built in Python, a bad value raises a
:class:`~services.core.errors.BudgetError` whose ``field`` names the key; validated by
FastAPI, the same rules give a 422 naming ``budget.<key>``.

The strategy and scheduler names are read from their registries
(:mod:`services.core.strategies`), where each is declared once. A budget stored before these
two fields existed loads with their defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError, field_validator

from services.core.checkpoint_plan import CHECKPOINT_DEFAULT_FRACTIONS
from services.core.errors import BudgetError, unknown_name_message
from services.core.strategies import SCHEDULERS, SEARCHERS

MAX_CHECKPOINTS = 64

StrictInt = Annotated[int, Strict()]

SEARCH_NAMES: tuple[str, ...] = SEARCHERS.names()
"""Names of the search strategies (:data:`services.core.strategies.SEARCHERS`)."""

SCHEDULER_NAMES: tuple[str, ...] = SCHEDULERS.names()
"""Names of the trial schedulers (:data:`services.core.strategies.SCHEDULERS`)."""

SearchName = Literal[SEARCH_NAMES]  # type: ignore[valid-type] - the registry's names, for the API schema
SchedulerName = Literal[SCHEDULER_NAMES]  # type: ignore[valid-type]


class RunBudget(BaseModel):
    """Per-task search budget and whole-run caps; checked on construction."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    trials: StrictInt = Field(default=4, ge=1, le=10_000, description="Hyper-parameter trials per task.")
    steps: StrictInt = Field(default=200, ge=1, le=10_000_000, description="Optimisation steps per trial.")
    max_concurrent: StrictInt | None = Field(
        default=None, ge=1, le=10_000, description="Trials at once (default: as many as the CPUs / GPUs allow)."
    )
    threads_per_trial: StrictInt = Field(default=1, ge=1, le=1024, description="torch threads of a trial.")
    seed: StrictInt = Field(default=0, ge=0, lt=2**31, description="Seed of the search and the trials.")
    checkpoint_fractions: tuple[Annotated[float, Field(ge=0.0, le=1.0)], ...] = Field(
        default=CHECKPOINT_DEFAULT_FRACTIONS,
        min_length=1,
        max_length=MAX_CHECKPOINTS,
        description="Fractions of a trial's steps at which it checkpoints, each in [0, 1].",
    )
    flop_cap: float | None = Field(
        default=None,
        gt=0,
        description="Stop the run (status 'stopped') once its committed tasks' cFLOP "
        "reaches this; the task that reaches it is kept.",
    )
    wall_cap_s: float | None = Field(
        default=None,
        gt=0,
        description="Stop the run (status 'stopped') once its committed tasks' wall "
        "time reaches this many seconds; the task that reaches it is kept.",
    )
    search: SearchName = Field(
        default="random",
        description="Search strategy of each task's trials: random (independent "
        "seeded samples) or gp_ucb (sequential Gaussian-process search, upper confidence bound).",
    )
    scheduler: SchedulerName = Field(
        default="fifo",
        description="Trial scheduler: fifo (every trial runs to the end), asha "
        "(asynchronous successive halving: stops trials that trail at intermediate reports) or proxy "
        "(the same rule on LiDAR of unlabelled train views at 1/8 and 1/4 of the steps: no dev label read).",
    )

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise budget_error(exc) from None

    @field_validator("search", mode="before")
    @classmethod
    def _known_search(cls, value: Any) -> Any:
        return _known_name("search strategy", value, SEARCH_NAMES)

    @field_validator("scheduler", mode="before")
    @classmethod
    def _known_scheduler(cls, value: Any) -> Any:
        return _known_name("trial scheduler", value, SCHEDULER_NAMES)

    @field_validator("checkpoint_fractions", mode="before")
    @classmethod
    def _list_to_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    def to_dict(self) -> dict[str, Any]:
        """The JSON document stored with a submission."""
        out = self.model_dump()
        out["checkpoint_fractions"] = list(self.checkpoint_fractions)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunBudget:
        return cls(**dict(data))

    @property
    def capped(self) -> bool:
        """Whether the run has a FLOP or wall-time cap at all."""
        return self.flop_cap is not None or self.wall_cap_s is not None

    def cap_reached(self, *, flops: float, wall_s: float) -> str | None:
        """Why a run whose committed tasks spent ``flops`` cFLOP and ``wall_s`` seconds must
        stop (the caps reached, as the run's ``error`` shows it), or None while it may go on."""
        reasons = []
        if self.flop_cap is not None and flops >= self.flop_cap:
            reasons.append(f"FLOP cap {self.flop_cap:.3g} reached ({flops:.3g} spent)")
        if self.wall_cap_s is not None and wall_s >= self.wall_cap_s:
            reasons.append(f"wall-time cap {self.wall_cap_s:g} s reached ({wall_s:.1f} s spent)")
        return "; ".join(reasons) or None


def _known_name(kind: str, value: Any, known: tuple[str, ...]) -> Any:
    """``value`` if it is one of ``known``; an unknown string is refused with the known names
    and the closest (a value of another type is left to the field's own type check)."""
    if isinstance(value, str) and value not in known:
        raise ValueError(unknown_name_message(kind, value, known).removesuffix("."))
    return value


def budget_error(exc: ValidationError) -> BudgetError:
    """The first problem of a validation error, as a BudgetError naming its field."""
    first = exc.errors()[0]
    loc = first.get("loc", ())
    field = str(loc[0]) if loc else "budget"
    message = first.get("msg", "invalid").removeprefix("Value error, ")
    value = first.get("input")
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    return BudgetError(f"The '{field}' of a budget is not valid: {message}. Got {shown} instead.", field=field)


__all__ = ["SCHEDULER_NAMES", "SEARCH_NAMES", "RunBudget", "SchedulerName", "SearchName", "budget_error"]
