"""GPU and energy fields of a real run on this machine (issue 46): no GPU here, so the GPU
figures are NULL with the reason (never 0), and the energy is the labelled estimate, since this
machine exposes no RAPL counters (a machine that does gets ``rapl``)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from services.cli.main import app
from services.core.budget import RunBudget
from services.store.db.models import TaskResult, Trial
from workers.trainer.energy import POWERCAP, rapl_zones
from workers.trainer.run_plan import RunRequest

pytestmark = [
    pytest.mark.usefixtures("ray_local"),
    pytest.mark.parametrize("database_url", ["postgres"], indirect=True),
]


def test_a_run_here_stores_no_gpu_with_its_reason_and_an_energy_estimate(runner, tmp_path) -> None:
    from tests.integration.conftest import tiny_manifest

    stream = tiny_manifest(tmp_path / "one.json", tasks=1)
    budget = RunBudget(trials=2, steps=1)
    run = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:nearest_mean", budget=budget))
    expected = "rapl" if rapl_zones(POWERCAP) else "estimate"
    with runner.sessions() as session:
        trials = session.scalars(select(Trial).where(Trial.task_run.has(submission_id=run))).all()
        result = session.scalars(select(TaskResult).where(TaskResult.submission_id == run)).one()
        assert len(trials) == 2
        for trial in trials:
            assert trial.gpu_seconds is None and trial.gpu_peak_memory_bytes is None
            assert trial.gpu_note == "no GPU: the host was given none"
            assert trial.energy_source == expected and trial.energy_kwh > 0
        assert result.gpu_seconds is None and result.gpu_note == "no GPU: the host was given none"
        assert result.energy_source == expected
        assert result.energy_kwh == pytest.approx(sum(t.energy_kwh for t in trials))
    shown = CliRunner().invoke(app, ["results", str(run)])  # the runner's database (the fixture's setting)
    assert shown.exit_code == 0, shown.output
    assert "GPU = no GPU (no GPU: the host was given none)" in shown.output
    if expected == "estimate":
        assert "(estimate = CPU-seconds x 10 W, no RAPL on the node)" in shown.output and "~" in shown.output
    doc = json.loads(CliRunner().invoke(app, ["results", str(run), "--json"]).output)
    assert doc["gpu_seconds"] is None and doc["tasks"][0]["gpu_note"] == "no GPU: the host was given none"
    assert doc["energy_source"] == expected and doc["tasks"][0]["energy_kwh"] > 0
