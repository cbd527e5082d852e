"""Bootstrap intervals of E and ΔE (services/core/uncertainty.py) against a slow, obvious
reference: Python loops over resamples and tasks, the task error recomputed by
``services.core.metrics.task_error`` (sklearn's average precision) on the resampled examples,
with the same draws."""

from __future__ import annotations

import time

import numpy as np
import pytest

from services.core.metrics import task_error
from services.core.multiplicity import holm, normal_p_value
from services.core.predictions import TaskPredictions, decode, encode
from services.core.uncertainty import error_interval, over_seeds, paired_delta
from tests.support.bootstrap_reference import fixed_totals, reference_totals


def _single(rng: np.random.Generator, n: int, classes: int, skill: float) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, classes, size=n)
    scores = rng.normal(size=(n, classes))
    scores[np.arange(n), labels] += skill
    return scores, labels


def _multi(rng: np.random.Generator, n: int, labels_k: int, skill: float) -> tuple[np.ndarray, np.ndarray]:
    labels = (rng.random((n, labels_k)) < 0.3).astype(np.int64)
    scores = np.round(rng.normal(size=(n, labels_k)) + skill * labels, 1)  # rounding makes ties
    return scores, labels


def _stored(scores: np.ndarray, labels: np.ndarray, kind: str) -> TaskPredictions:
    return decode(encode(scores, labels, kind))


@pytest.fixture(scope="module")
def runs() -> tuple[list[TaskPredictions], list[TaskPredictions]]:
    rng = np.random.default_rng(7)
    a, b = [], []
    for n, kind in [(40, "single"), (25, "multi"), (60, "single"), (30, "multi")]:
        make = _single if kind == "single" else _multi
        scores, labels = make(rng, n, 4, 1.5)
        a.append(_stored(scores, labels, kind))
        other = scores + rng.normal(scale=1.0, size=scores.shape)
        b.append(_stored(other, labels, kind))
    return a, b


@pytest.mark.parametrize("kind", ["single", "multi"])
def test_stored_predictions_reproduce_the_task_error_exactly(kind: str) -> None:
    rng = np.random.default_rng(1)
    make = _single if kind == "single" else _multi
    scores, labels = make(rng, 300, 5, 0.8)
    stored = _stored(scores, labels, kind)
    assert stored.error == task_error(scores, labels, kind)


def test_multi_label_predictions_are_two_byte_ranks_and_packed_labels() -> None:
    rng = np.random.default_rng(2)
    scores, labels = _multi(rng, 1000, 20, 1.0)
    blob = encode(scores, labels, "multi")
    assert len(blob) < 1000 * 20 * 2 + 1000 * 20 / 8 + 2000
    assert np.array_equal(decode(blob).labels, labels)


def test_error_interval_matches_the_loop_reference(runs) -> None:
    a, _ = runs
    got = error_interval(a, resamples=60, seed=3)
    totals, per_task = reference_totals(a, None, 60, 3)
    fixed = fixed_totals(per_task)  # the default: the tasks kept, examples resampled within each
    assert got.estimate == pytest.approx(np.mean([t.error for t in a]), abs=1e-15)
    assert got.interval.low == pytest.approx(np.nanquantile(fixed, 0.025), abs=1e-12)
    assert got.interval.high == pytest.approx(np.nanquantile(fixed, 0.975), abs=1e-12)
    assert got.standard_error == pytest.approx(np.std(fixed[np.isfinite(fixed)], ddof=1), abs=1e-12)
    assert got.generalisation.low == pytest.approx(np.nanquantile(totals, 0.025), abs=1e-12)
    assert got.generalisation.high == pytest.approx(np.nanquantile(totals, 0.975), abs=1e-12)
    for i, interval in enumerate(got.task_intervals):
        assert interval.low == pytest.approx(np.nanquantile(per_task[:, i], 0.025), abs=1e-12)
        assert interval.high == pytest.approx(np.nanquantile(per_task[:, i], 0.975), abs=1e-12)


def test_paired_delta_matches_the_loop_reference(runs) -> None:
    a, b = runs
    got = paired_delta(a, b, resamples=60, seed=5)
    totals, per_task = reference_totals(a, b, 60, 5)
    fixed = fixed_totals(per_task)
    assert got.delta == pytest.approx(np.mean([x.error - y.error for x, y in zip(a, b)]), abs=1e-15)
    assert got.interval.low == pytest.approx(np.nanquantile(fixed, 0.025), abs=1e-12)
    assert got.interval.high == pytest.approx(np.nanquantile(fixed, 0.975), abs=1e-12)
    assert got.generalisation.low == pytest.approx(np.nanquantile(totals, 0.025), abs=1e-12)
    p = [
        normal_p_value(t.delta, np.std(per_task[:, i][np.isfinite(per_task[:, i])], ddof=1))
        for i, t in enumerate(got.tasks)
    ]
    for i, (task, adjusted) in enumerate(zip(got.tasks, holm(p))):
        assert task.interval.low == pytest.approx(np.nanquantile(per_task[:, i], 0.025), abs=1e-12)
        assert task.p_value == pytest.approx(p[i], abs=1e-12)
        assert task.differs == (adjusted <= 0.05)
    assert got.correction == "Holm" and "seed variance not covered" in got.noise


def test_a_run_paired_with_itself_has_a_zero_interval(runs) -> None:
    a, _ = runs
    got = paired_delta(a, a, resamples=50)
    assert (got.delta, got.interval.low, got.interval.high) == (0.0, 0.0, 0.0)
    assert not any(t.differs for t in got.tasks)


def test_a_much_better_run_differs_beyond_noise_on_every_task() -> None:
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, size=500)
    perfect = TaskPredictions("single", labels.copy(), labels)
    chance = TaskPredictions("single", (labels + 1) % 3, labels)
    got = paired_delta([chance, chance], [perfect, perfect], resamples=100)
    assert got.delta == 1.0 and got.differs and all(t.differs for t in got.tasks)


def test_runs_on_different_test_examples_cannot_be_paired(runs) -> None:
    a, b = runs
    with pytest.raises(ValueError, match="same test examples"):
        paired_delta(a, list(reversed(b)), resamples=10)


def test_same_seed_same_interval_bit_for_bit(runs) -> None:
    a, _ = runs
    assert error_interval(a, resamples=30, seed=9) == error_interval(a, resamples=30, seed=9)


@pytest.mark.parametrize("resamples, level", [(1, 0.95), (10, 0.0), (10, 1.0)])
def test_bad_bootstrap_settings_are_a_value_error(runs, resamples: int, level: float) -> None:
    with pytest.raises(ValueError, match="parameter"):
        error_interval(runs[0], resamples=resamples, level=level)


def test_no_tasks_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="at least one task"):
        error_interval([])


def test_over_seeds_is_the_student_t_interval_of_the_mean() -> None:
    got = over_seeds([0.2, 0.3, 0.4])
    assert got.mean == pytest.approx(0.3) and got.sd == pytest.approx(0.1)
    assert got.interval.high - got.mean == pytest.approx(4.302652729911275 * 0.1 / np.sqrt(3))
    single = over_seeds([0.25])
    assert (single.sd, single.interval) == (None, None)


def test_the_full_size_bootstrap_takes_seconds() -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, size=10_000)
    tasks = [TaskPredictions("single", rng.integers(0, 10, size=10_000), labels) for _ in range(27)]
    start = time.perf_counter()
    error_interval(tasks, resamples=1000)
    assert time.perf_counter() - start < 30  # about 3 s on one loaded core


def test_holm_adjusts_step_down_and_keeps_the_order() -> None:
    from services.core.multiplicity import holm

    assert holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx((0.04, 0.09, 0.09, 0.2))
    assert holm([]) == ()


def test_seeds_delta_flags_a_real_difference_and_only_it() -> None:
    from services.core.seed_compare import seeds_delta

    rng = np.random.default_rng(11)
    labels = [rng.integers(0, 2, size=400) for _ in range(5)]

    def seed_run(worse: float) -> list[TaskPredictions]:
        tasks = []
        for t, y in enumerate(labels):
            rate = 0.2 + rng.normal(0, 0.01) + (worse if t == 0 else 0.0)
            wrong = rng.random(y.size) < rate
            tasks.append(TaskPredictions("single", np.where(wrong, 1 - y, y), y))
        return tasks

    a = [seed_run(0.0) for _ in range(4)]
    b = [seed_run(0.25) for _ in range(4)]
    got = seeds_delta(a, b, resamples=200)
    assert [t.differs for t in got.tasks] == [True, False, False, False, False]
    assert got.improvement > 0.55 and got.improvement_interval.low <= got.improvement <= got.improvement_interval.high
    assert got.interval.high < 0 and got.delta == pytest.approx(np.mean([t.delta for t in got.tasks]))
    assert "seeds" in got.noise and got.correction == "Holm"
    with pytest.raises(ValueError, match="two runs or more per side"):
        seeds_delta(a[:1], b, resamples=10)


def test_seeds_delta_refuses_runs_on_other_test_examples() -> None:
    from services.core.seed_compare import seeds_delta

    y = np.arange(20) % 2
    run = [TaskPredictions("single", y, y)]
    other = [TaskPredictions("single", y, 1 - y)]
    with pytest.raises(ValueError, match="same test examples"):
        seeds_delta([run, run], [run, other], resamples=10)


def test_nevis_compare_reads_one_run_or_seeds_per_side_and_names_bad_input() -> None:
    import typer

    from services.cli.uncertainty_cmd import run_ids

    assert run_ids("3", "A") == [3] and run_ids("3,4,5", "B") == [3, 4, 5]
    for bad in ("3,x", "0", ""):
        with pytest.raises(typer.BadParameter, match="Side A"):
            run_ids(bad, "A")
