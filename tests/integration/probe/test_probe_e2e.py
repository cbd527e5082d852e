"""End to end: a tiny stream run on Ray, then `nevis probe run`, then `nevis results --probes`.

One run per database dialect. One checkpoint object is deleted and another overwritten
before probing: their jobs must fail with a clear reason while every other job finishes.
Then the stored curves and metrics are checked, the CLI output is read, and probing again
is a no-op (idempotent).
"""

from __future__ import annotations

import json
import math

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from services.cli.main import app
from services.core.budget import RunBudget
from services.core.config import get_settings
from services.store.db.models import Checkpoint, Trial
from services.store.db.models_probe import (
    ProbeCheckpointResult,
    ProbeCorrelationRow,
    ProbeFitRow,
    ProbeJob,
    ProbeMismatchRow,
    TrialCurve,
)
from services.store.objects import open_store
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

# On PostgreSQL, the production database: the queue itself is tested on both dialects (test_probe_queue.py).
pytestmark = [
    pytest.mark.usefixtures("ray_local"),
    pytest.mark.postgres,
    pytest.mark.parametrize("database_url", ["postgres"], indirect=True),
]

CI_OPTIONS = [
    "--preset",
    "ci",
    "--kinds",
    "linear,mlp2,mlp3",
    "--folds",
    "3",
    "--max-examples",
    "120",
    "--lidar-n",
    "16",
    "--lidar-q",
    "3",
]


def _count(session, model, **where) -> int:
    query = select(func.count()).select_from(model)
    for key, value in where.items():
        query = query.where(getattr(model, key) == value)
    return session.scalar(query)


def test_probe_run_fills_curves_metrics_and_results(settings_env, database_url, monkeypatch, tiny_stream) -> None:
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    runner = StreamRunner(get_settings())
    budget = RunBudget(trials=2, steps=6, checkpoint_fractions=(0.0, 0.5, 1.0))
    run_id = runner.start(RunRequest(stream=str(tiny_stream), learner="nevis_probe_learners:growing", budget=budget))
    store = open_store(runner.settings.store_url)
    with runner.sessions() as session:
        checkpoints = session.scalars(select(Checkpoint).order_by(Checkpoint.id)).all()
        assert len(checkpoints) == 3 * 2 * 3
        missing, corrupted = checkpoints[4], checkpoints[7]  # of task 1 and task 2
        store.delete(missing.object_key)
        store.put_bytes(corrupted.object_key, b"not a checkpoint")
        assert _count(session, TrialCurve) == 6
        curve = session.get(TrialCurve, checkpoints[0].trial_id)
        assert curve.steps == list(range(7)) and curve.losses[0] is None

    cli = CliRunner()
    result = cli.invoke(app, ["probe", "run", "--submission", str(run_id), *CI_OPTIONS])
    assert result.exit_code == 0, result.output
    assert "25 new probe job(s) queued" in " ".join(result.output.split())

    with runner.sessions() as session:
        jobs = session.scalars(select(ProbeJob)).all()
        assert len(jobs) == 18 + 6 + 1  # checkpoints, trials, the summary
        failed = {j.checkpoint_id: j.error for j in jobs if j.status == "failed"}
        assert set(failed) == {missing.id, corrupted.id}
        assert "is missing" in failed[missing.id] and missing.object_key in failed[missing.id]
        assert "is corrupted" in failed[corrupted.id]
        assert all(j.status == "done" for j in jobs if j.checkpoint_id not in failed)
        assert all(j.attempts == 1 for j in jobs)
        assert _count(session, ProbeCheckpointResult) == 16
        # Task 3 probes targets 3, 2 and 1 with three kinds; task 1 only itself.
        assert _count(session, ProbeFitRow) == (6 * 1 + 6 * 2 + 6 * 3) * 3 - 3 * (1 + 2)
        ranks = session.scalars(select(ProbeCheckpointResult)).all()
        assert all(1.0 <= r.lidar <= r.feature_dim and 1.0 <= r.rankme <= r.feature_dim for r in ranks)
        assert all(r.lidar_n == 16 and r.lidar_q == 3 for r in ranks)
        # The representation grows with the step, and so do the label-free ranks.
        first_trial = [r for r in ranks if r.trial_id == checkpoints[0].trial_id]
        by_step = sorted(first_trial, key=lambda r: r.step)
        assert by_step[0].rankme < by_step[-1].rankme
        mismatch = session.scalars(select(ProbeMismatchRow)).all()
        assert len(mismatch) == 2 * 3 * (1 + 2 + 3)  # trials × kinds × targets per task
        for row in mismatch:
            assert row.conv_step in (0, 3, 6)
            assert row.msm3 >= 0 and row.csm3 >= 0 and row.mofm >= 0
            assert all(not math.isnan(getattr(row, k)) for k in ("msm3", "mofm", "cofm"))
            own = row.target_order == session.get(Trial, row.trial_id).task_run.stream_task.order
            assert (row.mm3 is not None and not math.isnan(row.mm3)) if own else row.mm3 is None
            assert row.curves["pretext_loss_source"] == "held_out_loss"
            assert len(row.curves["pretext_loss"]) == row.num_checkpoints
            assert len(row.curves["ofm"]) == len(row.curves["scored_steps"])
        trial_of_missing = session.get(Trial, missing.trial_id)
        partial = [m for m in mismatch if m.trial_id == trial_of_missing.id]
        assert partial and all(m.num_checkpoints == 2 for m in partial)
        corr = session.scalars(select(ProbeCorrelationRow)).all()
        assert {(c.scope, c.proxy) for c in corr} >= {("task", "lidar"), ("pooled", "rankme"), ("task_mean", "lidar")}
        task_rows = [c for c in corr if c.scope == "task"]
        assert len(task_rows) == 3 * 2
        assert any(c.spearman is not None and -1 <= c.spearman <= 1 for c in task_rows)
        counts = (_count(session, ProbeFitRow), _count(session, ProbeMismatchRow))

    shown = cli.invoke(app, ["results", str(run_id), "--probes"])
    assert shown.exit_code == 0, shown.output
    for text in ("Mismatch", "MOFM", "LiDAR", "Spearman", "failed", "is missing"):
        assert text in shown.output
    as_json = cli.invoke(app, ["results", str(run_id), "--probes", "--json"])
    doc = json.loads(as_json.output)
    assert doc["submission_id"] == run_id and len(doc["probes"]["checkpoints"]) == 16
    assert doc["probes"]["settings"]["lidar_q"] == 3

    again = cli.invoke(app, ["probe", "run", "--submission", str(run_id), *CI_OPTIONS])
    assert again.exit_code == 0, again.output
    assert "0 new probe job(s)" in " ".join(again.output.split())
    with runner.sessions() as session:
        assert (_count(session, ProbeFitRow), _count(session, ProbeMismatchRow)) == counts
        assert _count(session, ProbeJob, status="failed") == 2
