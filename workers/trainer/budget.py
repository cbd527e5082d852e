"""The budget of a run: how many trials and steps per task, and the caps that stop it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from services.core.errors import BudgetError
from workers.learners.protocol import CHECKPOINT_DEFAULT_FRACTIONS


@dataclass(frozen=True)
class RunBudget:
    """Per-task search budget and whole-run caps; checked on construction."""

    trials: int = 4
    steps: int = 200
    max_concurrent: int | None = None  # default: as many as the CPUs / GPUs allow
    threads_per_trial: int = 1
    seed: int = 0
    checkpoint_fractions: tuple[float, ...] = field(default=tuple(CHECKPOINT_DEFAULT_FRACTIONS))
    flop_cap: float | None = None  # stop before a task once cFLOP reaches this
    wall_cap_s: float | None = None  # stop before a task once this much wall time is spent

    def __post_init__(self) -> None:
        _int_at_least("trials", self.trials, 1, 10_000)
        _int_at_least("steps", self.steps, 1, 10_000_000)
        _int_at_least("threads_per_trial", self.threads_per_trial, 1, 1024)
        if self.max_concurrent is not None:
            _int_at_least("max_concurrent", self.max_concurrent, 1, 10_000)
        if not 0 <= self.seed < 2**31:
            raise BudgetError(f"The 'seed' of a budget must be an int in [0, 2**31). Got {self.seed} instead.")
        bad = [f for f in self.checkpoint_fractions if not 0.0 <= f <= 1.0]
        if bad or not self.checkpoint_fractions:
            raise BudgetError(
                "The 'checkpoint_fractions' of a budget must be a non-empty list of numbers in "
                f"[0, 1]. Got {list(self.checkpoint_fractions)} instead."
            )
        for name in ("flop_cap", "wall_cap_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise BudgetError(f"The '{name}' of a budget must be > 0 when set. Got {value} instead.")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["checkpoint_fractions"] = list(self.checkpoint_fractions)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunBudget":
        data = dict(data)
        if "checkpoint_fractions" in data:
            data["checkpoint_fractions"] = tuple(data["checkpoint_fractions"])
        return cls(**data)


def _int_at_least(name: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise BudgetError(
            f"The '{name}' of a budget must be an int in [{low}, {high}]. Got {value!r} instead."
        )
