"""Response bodies of the uncertainty figures: a run's E interval and a paired comparison
(the read models are :mod:`services.store.runs.uncertainty`; the method is docs/uncertainty.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from services.store.runs.board_uncertainty import RowUncertainty


# The task-resampled figure: how E (or ΔE) would move on a stream of other, similar tasks.
class GeneralisationOut(BaseModel):
    low: float | None = Field(description="Lower end; null where it was not computed (seeds comparisons).")
    high: float | None
    standard_error: float | None = None
    method: str = Field(description="Says what it answers: generalisation to other tasks (tasks resampled).")


# A run's E with its interval on this benchmark (the tasks kept, test examples resampled within
# each); every figure null with 'unavailable' saying why.
class ErrorIntervalOut(BaseModel):
    low: float | None = Field(description="Lower end of the interval of E; null: see 'unavailable'.")
    high: float | None = Field(description="Upper end of the interval of E; null: see 'unavailable'.")
    level: float = Field(description="Coverage of the interval (0.95: 95 %).")
    standard_error: float | None = Field(description="SD of E over the bootstrap resamples.")
    resamples: int
    seed: int = Field(description="Seed of the resampling: the same predictions always give the same interval.")
    tasks: int = Field(description="Tasks E and its interval are over (the phase's committed tasks).")
    method: str
    question: str | None = Field(default=None, description="What the interval answers: this benchmark, the tasks kept.")
    unavailable: str | None = Field(
        description=(
            "Why there is no interval (e.g. tasks committed before test predictions were kept); null when there is."
        )
    )
    generalisation: GeneralisationOut | None = Field(
        default=None,
        description=("The two-level (task-resampled) interval: generalisation to other tasks, not this benchmark."),
    )


# ΔE = E(a) − E(b) with its interval on this benchmark (paired; over seeds too with several runs a side).
class DeltaIntervalOut(BaseModel):
    low: float | None
    high: float | None
    level: float
    standard_error: float | None
    resamples: int
    seed: int
    tasks: int
    method: str
    question: str | None = None
    unavailable: str | None
    generalisation: GeneralisationOut | None = Field(
        default=None,
        description=("One run a side: the task-resampled interval (generalisation to other tasks); null with seeds."),
    )


# P(a < b): the probability of improvement, with two runs or more (seeds) on each side.
class ImprovementOut(BaseModel):
    estimate: float | None = Field(
        description="Mean over tasks of P(task error of a random run of a < one of b), ties ½."
    )
    low: float | None
    high: float | None
    level: float
    method: str
    unavailable: str | None


# Which noise the per-task flags cover and how the family of tasks is controlled.
class FlagsOut(BaseModel):
    noise: str | None = Field(description="The noise a flag is beyond: test examples only, or seeds and test examples.")
    correction: str = Field(description="The family-wise correction over the tasks (Holm).")
    alpha: float
    family: int = Field(description="Tasks tested.")


# Δ cFLOP is counted, not sampled: its interval is the point itself.
class CflopIntervalOut(BaseModel):
    low: float
    high: float
    level: float
    note: str


class CompareTaskOut(BaseModel):
    order: int
    dataset: str
    error_a: float
    error_b: float
    delta: float = Field(description="error_a − error_b on this task.")
    low: float | None = Field(
        description="Interval of delta (test examples, and seeds where there are several, resampled)."
    )
    high: float | None
    differs: bool | None = Field(description="Flagged: the Holm-adjusted p-value is at most alpha (see 'flags').")
    p_value: float | None = None
    p_adjusted: float | None = Field(default=None, description="Holm-adjusted p-value over the family of tasks.")
    flops_a: float
    flops_b: float
    delta_flops: float


class CompareOut(BaseModel):
    a: int = Field(description="The first run of side a.")
    b: int = Field(description="The first run of side b.")
    runs_a: list[int] = Field(default_factory=list, description="Every run of side a (its seeds).")
    runs_b: list[int] = Field(default_factory=list)
    stream: str
    stream_version: str
    phase: str
    error_a: float | None
    error_b: float | None
    delta_error: float | None = Field(description="E(a) − E(b) over the tasks both committed.")
    delta_error_interval: DeltaIntervalOut
    probability_of_improvement: ImprovementOut | None = None
    flags: FlagsOut | None = None
    cflop_a: float
    cflop_b: float
    delta_cflop: float
    delta_cflop_interval: CflopIntervalOut
    tasks: list[CompareTaskOut]
    differing_tasks: list[int] = Field(description="Orders of the flagged tasks (Holm-adjusted p at most alpha).")


# One leaderboard row's uncertainty: its E interval, and its learner's spread over seeds.
class BoardUncertaintyOut(BaseModel):
    submission_id: int
    e_low: float | None = Field(
        description=(
            "95 % interval of E on this benchmark (tasks kept, test examples resampled); null: see 'e_unavailable'."
        )
    )
    e_high: float | None
    e_unavailable: str | None = Field(description="Why the row has no interval; null when it has one.")
    seeds_runs: int = Field(
        description=(
            "Complete runs of this configuration on this stream version (seeds): same learner, budget, image size "
            "and options digest."
        )
    )
    seeds_mean: float | None = Field(description="Mean E over those runs; null for fewer than two.")
    seeds_sd: float | None = Field(description="Sample SD of their E; null for fewer than two.")
    seeds_low: float | None = Field(description="Student t 95 % interval of the mean E; null for fewer than two.")
    seeds_high: float | None

    @classmethod
    def of(cls, submission_id: int, found: RowUncertainty) -> BoardUncertaintyOut:
        """From :class:`services.store.runs.board_uncertainty.RowUncertainty`."""
        interval, seeds = found.interval.interval, found.seeds
        return cls(
            submission_id=submission_id,
            e_low=interval.low if interval else None,
            e_high=interval.high if interval else None,
            e_unavailable=None if interval else found.interval.reason,
            seeds_runs=seeds.runs if seeds else 1,
            seeds_mean=seeds.mean if seeds else None,
            seeds_sd=seeds.sd if seeds else None,
            seeds_low=seeds.interval.low if seeds and seeds.interval else None,
            seeds_high=seeds.interval.high if seeds and seeds.interval else None,
        )


__all__ = [
    "BoardUncertaintyOut",
    "CflopIntervalOut",
    "CompareOut",
    "CompareTaskOut",
    "DeltaIntervalOut",
    "ErrorIntervalOut",
    "FlagsOut",
    "GeneralisationOut",
    "ImprovementOut",
]
