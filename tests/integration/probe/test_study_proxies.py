"""``nevis study proxies`` on a really probed run: a tiny stream trained on Ray, every trial's
checkpoints probed, then each policy's E, cFLOP and regret replayed and read against the rows."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from services.cli.main import app
from services.core.budget import RunBudget
from services.core.config import get_settings
from services.store.db.models import TaskResult
from services.store.db.models_probe import ProbeCheckpointResult
from services.store.probes.report import load_probe_report
from tests.integration.conftest import tiny_manifest
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

# Learner-side: SQLite (the probe queue has its own tests on both dialects).
pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

PROBE = [
    "--preset",
    "ci",
    "--all-trials",
    "--kinds",
    "linear",
    "--folds",
    "2",
    "--max-examples",
    "40",
    "--lidar-n",
    "8",
    "--lidar-q",
    "2",
    "--targets",
    "current",
]
POLICIES = ("dev", "choose:lidar", "choose:rankme", "prune:lidar", "prune:rankme", "prune+choose:lidar")


def test_study_proxies_replays_every_policy_of_a_probed_run(settings_env, database_url, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    monkeypatch.setenv("COLUMNS", "250")
    get_settings.cache_clear()
    runner = StreamRunner(get_settings())
    budget = RunBudget(trials=4, steps=8, checkpoint_fractions=(0.0, 0.125, 0.25, 1.0))
    run_id = runner.start(
        RunRequest(
            stream=str(tiny_manifest(tmp_path / "tiny.json", tasks=2)),
            learner="nevis_probe_learners:growing",
            budget=budget,
        )
    )
    cli = CliRunner()
    unprobed = cli.invoke(app, ["study", "proxies", "--submission", str(run_id)])
    assert unprobed.exit_code == 2 and "has no probes" in unprobed.output
    probed = cli.invoke(app, ["probe", "run", "--submission", str(run_id), *PROBE])
    assert probed.exit_code == 0, probed.output

    shown = cli.invoke(app, ["study", "proxies", "--submission", str(run_id)])
    assert shown.exit_code == 0, shown.output
    for name in POLICIES:
        assert name in shown.output
    doc = json.loads(cli.invoke(app, ["study", "proxies", "--submission", str(run_id), "--json"]).output)
    rows = {r["policy"]: r for r in doc["policies"]}
    assert tuple(rows) == POLICIES and doc["skipped"] == [] and doc["tasks"] == [1, 2]
    with runner.sessions() as session:
        cflop = session.scalar(select(func.sum(TaskResult.flops)).where(TaskResult.submission_id == run_id))
        test_e = session.scalar(select(func.avg(TaskResult.error)).where(TaskResult.submission_id == run_id))
        assert session.scalar(select(func.count()).select_from(ProbeCheckpointResult)) == 2 * 4 * 4
    dev = rows["dev"]
    assert dev["cflop"] == pytest.approx(cflop) and dev["regret"] == 0 and dev["same_choice"] == 2
    assert doc["committed_e_test"] == pytest.approx(test_e)
    for name in POLICIES[1:]:
        row = rows[name]
        assert row["regret"] >= -1e-12  # dev error is the yardstick: dev selection is its minimum
        assert row["proxy_flops"] > 0  # the probe's passes at the checkpoints read are charged
        assert row["cflop"] == pytest.approx(cflop - row["flops_saved"])
        pruned_flops = row["flops_saved"] + row["proxy_flops"]  # what stopping trials saved
        assert (pruned_flops > 0) == (row["stopped_trials"] > 0)
    # Scored where selection did not look: each final checkpoint's held-out dev_test examples.
    assert "dev_test" in doc["heldout_scored_on"] and dev["regret_heldout"] == 0
    assert all(rows[name]["e_heldout"] is not None for name in POLICIES)
    assert "E (held out)" in shown.output and "regret (dev)" in shown.output
    with runner.sessions() as session:
        details = session.scalars(select(ProbeCheckpointResult.details)).all()
        report = load_probe_report(session, submission_id=run_id)
    assert all(d["heldout_split"] == "dev_test" and d["heldout_examples"] > 0 for d in details)
    # The across-trial ρ of each task comes with its n (4 trials), an exact null and (n ≥ 4) an interval.
    tests = {(r.task_order, r.proxy): r.test for r in report.across_trials}
    assert set(tests) == {(o, p) for o in (1, 2) for p in ("lidar", "rankme")}
    for test in tests.values():
        assert test.n == 4
        if test.rho is None:  # a constant side (a proxy or an accuracy tied across trials): no null
            assert test.p_value is None and test.permutations == 0
        else:  # every ordering of 4 trials; never below 1/12
            assert test.exact and test.permutations == 24 and test.p_value >= 1 / 12 - 1e-12
    missing = cli.invoke(app, ["study", "proxies", "--submission", "999"])
    assert missing.exit_code == 2 and "No run with id 999" in missing.output
