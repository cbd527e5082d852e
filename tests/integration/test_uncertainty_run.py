"""Uncertainty end to end (issue 23, item 1): two tiny runs on a real local Ray keep each task's
test predictions; the stored predictions reproduce every stored task error exactly, and what
``nevis results`` and ``nevis compare`` print (E's interval, the paired ΔE interval) matches a
loop reference computed on those stored predictions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.core.budget import RunBudget
from services.core.predictions import decode
from services.core.uncertainty import RESAMPLES, SEED
from services.store.runs.comparison import compare
from services.store.runs.predictions import committed_attempts, predictions_key
from services.store.runs.summary import load_summary
from services.store.runs.uncertainty import clear_cache, headline_rows, run_interval
from tests.integration.conftest import tiny_manifest
from tests.support.bootstrap_reference import fixed_totals, reference_interval, reference_totals
from workers.trainer.run_plan import RunRequest

pytestmark = pytest.mark.usefixtures("ray_local")
NUMBER = r"([+-]?\d+\.\d+)"


def _stored_predictions(runner, run_id: int):
    """Order → stored predictions of the run's meta-test tasks, and the summary."""
    with runner.sessions() as session:
        summary = load_summary(session, submission_id=run_id)
        attempts = committed_attempts(session, submission_id=run_id)
    orders = [r.order for r in headline_rows(summary)]
    return summary, {o: decode(runner.store.get_bytes(predictions_key(run_id, o, attempts[o]))) for o in orders}


def _one_meta_train_task(path: Path) -> Path:
    """The 4-task tiny stream less its second meta-train task: the intervals are over the
    meta-test tasks (a multi-label and a single-label one), so one meta-train task is enough
    and each run has a task fewer to train."""
    doc = json.loads(path.read_text())
    doc["tasks"] = [task for task in doc["tasks"] if task["order"] != 2]
    for order, task in enumerate(doc["tasks"], start=1):
        task["order"] = order
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_stored_predictions_give_the_intervals_results_and_compare_print(runner, tmp_path) -> None:
    stream = _one_meta_train_task(tiny_manifest(tmp_path / "tiny.json", tasks=4))
    budget = RunBudget(trials=1, steps=1, checkpoint_fractions=(1.0,))
    a = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:nearest_mean", budget=budget))
    b = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:graded", budget=budget))

    summary_a, tasks_a = _stored_predictions(runner, a)
    summary_b, tasks_b = _stored_predictions(runner, b)
    assert {t.kind for t in tasks_a.values()} == {"single", "multi"}
    for summary, tasks in ((summary_a, tasks_a), (summary_b, tasks_b)):
        for row in headline_rows(summary):
            assert tasks[row.order].error == row.error  # bit for bit, the stored task error
    orders = sorted(tasks_a)

    assert list(runner.store.list(f"runs/{a}/uncertainty"))  # kept as the run ended
    clear_cache()  # computed anew below, from the stored predictions
    for key in list(runner.store.list(f"runs/{a}/uncertainty")):
        runner.store.delete(key)
    with runner.sessions() as session:
        interval = run_interval(session, runner.store, summary=summary_a)
    totals, per_task_a = reference_totals([tasks_a[o] for o in orders], None, RESAMPLES, SEED)
    low, high = reference_interval(fixed_totals(per_task_a))  # the default: the tasks kept
    general = reference_interval(totals)
    assert interval.estimate == summary_a.mean_error
    assert (interval.interval.low, interval.interval.high) == pytest.approx((low, high), abs=1e-12)
    assert low <= summary_a.mean_error <= high
    assert (interval.result.generalisation.low, interval.result.generalisation.high) == pytest.approx(
        general, abs=1e-12
    )

    cli = CliRunner()
    printed = cli.invoke(app, ["results", str(a)])
    assert printed.exit_code == 0, printed.output
    line = next(x for x in printed.output.splitlines() if x.startswith("E ("))
    match = re.search(rf"= {NUMBER} ± {NUMBER} \[{NUMBER}, {NUMBER}\] 95 %", line)
    assert match, line
    assert float(match[1]) == pytest.approx(summary_a.mean_error, abs=5e-5)
    assert (float(match[3]), float(match[4])) == pytest.approx((low, high), abs=5e-5)
    flat = " ".join(printed.output.split())  # the console wraps long lines
    assert "this benchmark: tasks kept" in flat and "generalisation to other tasks (tasks resampled too)" in flat

    paired, per_task = reference_totals([tasks_a[o] for o in orders], [tasks_b[o] for o in orders], RESAMPLES, SEED)
    dlow, dhigh = reference_interval(fixed_totals(per_task))
    with runner.sessions() as session:
        comparison = compare(session, runner.store, a=a, b=b)
    assert comparison.delta_error == pytest.approx(summary_a.mean_error - summary_b.mean_error, abs=1e-15)
    assert (comparison.interval.low, comparison.interval.high) == pytest.approx((dlow, dhigh), abs=1e-12)
    for i, task in enumerate(comparison.tasks):
        assert (task.interval.low, task.interval.high) == pytest.approx(reference_interval(per_task[:, i]), abs=1e-12)
        assert task.differs == (task.p_adjusted <= 0.05)  # Holm over the family of tasks
    assert comparison.to_dict()["flags"]["correction"] == "Holm"
    assert comparison.to_dict()["delta_error_interval"]["generalisation"]["low"] == pytest.approx(
        reference_interval(paired)[0], abs=1e-12
    )
    assert comparison.delta_cflop == summary_a.cflop - summary_b.cflop

    printed = cli.invoke(app, ["compare", str(a), str(b)])
    assert printed.exit_code == 0, printed.output
    line = next(x for x in printed.output.splitlines() if x.startswith("ΔE ="))
    match = re.search(rf"= {NUMBER} ± {NUMBER} \[{NUMBER}, {NUMBER}\] 95 % over 2 tasks", line)
    assert match, line
    assert (float(match[3]), float(match[4])) == pytest.approx((dlow, dhigh), abs=5e-5)
    assert "Δ cFLOP" in printed.output

    # A run without stored predictions (committed before they were kept) says so, with no number.
    with runner.sessions() as session:
        attempts = committed_attempts(session, submission_id=b)
    runner.store.delete(predictions_key(b, orders[0], attempts[orders[0]]))
    for key in list(runner.store.list(f"runs/{b}/uncertainty")):  # the interval kept as the run ended
        runner.store.delete(key)
    clear_cache()
    with runner.sessions() as session:
        missing = run_interval(session, runner.store, summary=summary_b)
        unpaired = compare(session, runner.store, a=a, b=b)
    assert missing.interval is None and "no stored test predictions" in missing.reason
    assert missing.to_dict()["low"] is None and missing.to_dict()["unavailable"] == missing.reason
    assert (
        unpaired.interval is None
        and unpaired.delta_error is not None
        and all(t.differs is None for t in unpaired.tasks)
    )
    assert np.isfinite(unpaired.delta_cflop)
    printed = cli.invoke(app, ["results", str(b)])
    assert "no 95 % interval: no stored test predictions" in printed.output
