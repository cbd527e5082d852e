"""A synthetic benchmark for checking the calibration of the service's intervals and flags.

27 tasks with fixed true error rates p_t and test sizes N_t; a *run* of a learner is a seed
offset δ_t per task (normal, SD ``seed_sd``) and, on each test example, a wrong/right outcome
with P(wrong) = p_t + δ_t. Runs of one learner agree on most examples (with probability
``shared`` an example's outcome follows its fixed difficulty, as hard images are hard for every
seed), so a paired comparison sees little example noise and the seed noise dominates: the
situation that made per-task flags over-fire (issue 47). The fixed-benchmark E of a run is the
mean of its p_t + δ_t: what its error on each task's whole distribution would be.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from services.core.predictions import TaskPredictions

TASKS = 27
PAPER_E_SD = 0.003  # the paper's SD of E over seeds
TASK_SEED_SD = PAPER_E_SD * np.sqrt(TASKS)  # the per-task seed SD that E SD implies


@dataclass(frozen=True)
class Benchmark:
    """The tasks: true error rates, test sizes and each test example's difficulty."""

    errors: np.ndarray  # (T,) p_t
    difficulty: tuple[np.ndarray, ...]  # per task (N_t,) in [0, 1): wrong when below the run's rate

    @property
    def sizes(self) -> list[int]:
        return [d.size for d in self.difficulty]


def benchmark(rng: np.random.Generator, *, low: int, high: int, tasks: int = TASKS) -> Benchmark:
    """Tasks with error rates in [0.05, 0.6] and test sizes drawn in [low, high]."""
    sizes = rng.integers(low, high + 1, size=tasks)
    return Benchmark(errors=rng.uniform(0.05, 0.6, size=tasks), difficulty=tuple(rng.random(n) for n in sizes))


def run(
    bench: Benchmark, rng: np.random.Generator, *, seed_sd: float = TASK_SEED_SD, shared: float = 0.7
) -> tuple[list[TaskPredictions], float]:
    """One run's predictions (single-label: class 0 is right, 1 wrong) and its fixed-benchmark E."""
    rates = np.clip(bench.errors + rng.normal(0.0, seed_sd, size=bench.errors.size), 0.0, 1.0)
    tasks = []
    for rate, difficulty in zip(rates, bench.difficulty, strict=True):
        follows = rng.random(difficulty.size) < shared
        wrong = np.where(follows, difficulty < rate, rng.random(difficulty.size) < rate)
        tasks.append(TaskPredictions("single", wrong.astype(np.int64), np.zeros(difficulty.size, dtype=np.int64)))
    return tasks, float(rates.mean())


def fresh_examples(bench: Benchmark, rng: np.random.Generator) -> Benchmark:
    """The same tasks (error rates and test sizes) with a new draw of test examples."""
    return Benchmark(errors=bench.errors, difficulty=tuple(rng.random(n) for n in bench.sizes))


__all__ = ["PAPER_E_SD", "TASKS", "TASK_SEED_SD", "Benchmark", "benchmark", "fresh_examples", "run"]
