"""Response bodies of the uncertainty figures: a run's E interval and a paired comparison
(the read models are :mod:`services.store.runs.uncertainty`; the method is docs/uncertainty.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field


# A run's E with its two-level bootstrap interval; every figure null with 'unavailable' saying why.
class ErrorIntervalOut(BaseModel):
    low: float | None = Field(description="Lower end of the interval of E; null: see 'unavailable'.")
    high: float | None = Field(description="Upper end of the interval of E; null: see 'unavailable'.")
    level: float = Field(description="Coverage of the interval (0.95: 95 %).")
    standard_error: float | None = Field(description="SD of E over the bootstrap resamples.")
    resamples: int
    seed: int = Field(description="Seed of the resampling: the same predictions always give the same interval.")
    tasks: int = Field(description="Tasks E and its interval are over (the phase's committed tasks).")
    method: str
    unavailable: str | None = Field(description=(
        "Why there is no interval (e.g. tasks committed before test predictions were kept); null when there is."))


# ΔE = E(a) − E(b) with its paired bootstrap interval.
class DeltaIntervalOut(BaseModel):
    low: float | None
    high: float | None
    level: float
    standard_error: float | None
    resamples: int
    seed: int
    tasks: int
    method: str
    unavailable: str | None


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
    low: float | None = Field(description="Paired interval of delta (test examples resampled).")
    high: float | None
    differs: bool | None = Field(description="The interval excludes 0: a difference beyond sampling noise.")
    flops_a: float
    flops_b: float
    delta_flops: float


class CompareOut(BaseModel):
    a: int
    b: int
    stream: str
    stream_version: str
    phase: str
    error_a: float | None
    error_b: float | None
    delta_error: float | None = Field(description="E(a) − E(b) over the tasks both committed.")
    delta_error_interval: DeltaIntervalOut
    cflop_a: float
    cflop_b: float
    delta_cflop: float
    delta_cflop_interval: CflopIntervalOut
    tasks: list[CompareTaskOut]
    differing_tasks: list[int] = Field(description="Orders of the tasks whose interval excludes 0.")


# One leaderboard row's uncertainty: its E interval, and its learner's spread over seeds.
class BoardUncertaintyOut(BaseModel):
    submission_id: int
    e_low: float | None = Field(description="95 % bootstrap interval of E; null: see 'e_unavailable'.")
    e_high: float | None
    e_unavailable: str | None = Field(description="Why the row has no interval; null when it has one.")
    seeds_runs: int = Field(description="Complete runs of the learner on this stream version (seeds).")
    seeds_mean: float | None = Field(description="Mean E over those runs; null for fewer than two.")
    seeds_sd: float | None = Field(description="Sample SD of their E; null for fewer than two.")
    seeds_low: float | None = Field(description="Student t 95 % interval of the mean E; null for fewer than two.")
    seeds_high: float | None

    @classmethod
    def of(cls, submission_id: int, found) -> BoardUncertaintyOut:
        """From :class:`services.store.runs.board_uncertainty.RowUncertainty`."""
        interval, seeds = found.interval.interval, found.seeds
        return cls(submission_id=submission_id, e_low=interval.low if interval else None,
                   e_high=interval.high if interval else None,
                   e_unavailable=None if interval else found.interval.reason,
                   seeds_runs=seeds.runs if seeds else 1, seeds_mean=seeds.mean if seeds else None,
                   seeds_sd=seeds.sd if seeds else None,
                   seeds_low=seeds.interval.low if seeds and seeds.interval else None,
                   seeds_high=seeds.interval.high if seeds and seeds.interval else None)


__all__ = ["BoardUncertaintyOut", "CflopIntervalOut", "CompareOut", "CompareTaskOut", "DeltaIntervalOut", "ErrorIntervalOut"]
