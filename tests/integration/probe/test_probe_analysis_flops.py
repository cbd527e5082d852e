"""Analysis FLOPs: what probing costs is metered (the learner's passes in its host, the probe
fits in the worker), recorded on each job, reported apart per checkpoint, per task and in
total (report, CLI, dashboard, API), and never added to a submission's cFLOP."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from torch.utils.flop_counter import FlopCounterMode
from typer.testing import CliRunner

from services.cli.main import app
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.crud import users
from services.core.budget import RunBudget
from services.core.config import get_settings
from services.dashboard.server import create_server_app
from services.store.db import transaction
from services.store.db.models import Checkpoint, Submission, TaskResult, TaskRun, Trial
from services.store.db.models_coordinator import ScheduledSubmission
from services.store.db.models_probe import ProbeCheckpointResult, ProbeJob
from services.store.objects import open_store
from services.store.probes import queue, queue_plans
from services.store.probes.report import load_probe_report
from services.store.probes.settings import ProbeSettings
from services.store.runs.leaderboard import leaderboard
from services.store.runs.summary import load_summary
from tests.integration.conftest import tiny_manifest
from workers.probe.runtime.checkpoint_jobs import target_orders, write_checkpoint_measures
from workers.probe.runtime.context import ProbeContext
from workers.probe.runtime.data import TaskCache
from workers.probe.runtime.measure import CheckpointMeasures, measure_checkpoint
from workers.probe.runtime.planner import enqueue_submission
from workers.probe.runtime.trial_fits import features_key, fit_trial, load_features
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

CI_OPTIONS = [
    "--preset",
    "ci",
    "--kinds",
    "linear,mlp2",
    "--folds",
    "3",
    "--max-examples",
    "60",
    "--lidar-n",
    "8",
    "--lidar-q",
    "2",
]


def _charged(sessions, run_id: int) -> dict:
    """Every FLOP figure of the run that cFLOP or a leaderboard reads."""
    with sessions() as session:
        summary = load_summary(session, submission_id=run_id)
        board = leaderboard(session, stream=summary.stream, version=summary.stream_version)
        return {
            "cflop": summary.cflop,
            "retried": summary.retried_flops,
            "tasks": [t.flops for t in summary.tasks],
            "results": sorted(session.scalars(select(TaskResult.flops).where(TaskResult.submission_id == run_id))),
            "trials": sorted(session.scalars(select(Trial.flops).join(TaskRun).where(TaskRun.submission_id == run_id))),
            "board": [r.cflop for r in board.rows if r.submission_id == run_id],
        }


def _same_calls_in_process(session, store, job: ProbeJob) -> tuple[int, int]:
    """The checkpoint job's learner calls again, in this process with the learner object:
    (what a FlopMeter around them counts, the forward FLOPs of ``features_and_predict`` on the
    current task's probe examples and ``features`` on every earlier target's, as FlopCounterMode
    counts them)."""
    from nevis_test_learners import one_worker_indep

    settings = queue_plans.load_settings(session, job.settings_hash)
    ckpt = session.get(Checkpoint, job.checkpoint_id)
    submission = session.get(Submission, job.submission_id)
    tasks = TaskCache(store)
    manifest = tasks.manifest(submission.stream_version)
    targets = [
        tasks.samples(
            manifest,
            o,
            image_size=submission.image_size,
            max_examples=settings.max_examples,
            lidar_n=settings.lidar_n,
            seed=settings.seed,
        )
        for o in target_orders([t.order for t in manifest.tasks], job.task_order, settings)
    ]
    learner, ctx = one_worker_indep(), ProbeContext(seed=settings.seed)
    predictor = learner.load_predictor(store.get_bytes(ckpt.object_key), targets[0].info, ctx)
    measure_checkpoint(learner, predictor, current=targets[0], targets=targets, settings=settings, ctx=ctx, fit=False)
    ctx.close()
    other = ProbeContext(seed=0)
    with FlopCounterMode(display=False) as mode:
        learner.features_and_predict(predictor, targets[0].probe_images, other)  # one pass: both
        for target in targets[1:]:
            learner.features(predictor, target.probe_images, other)
    other.close()
    return ctx.flops.total, mode.get_total_flops()


def _fits_in_process(session, store, job: ProbeJob) -> int:
    """What one FlopCounterMode around the trial job's fits counts."""
    settings = queue_plans.load_settings(session, job.settings_hash)
    steps = session.execute(
        select(ProbeCheckpointResult.checkpoint_id, ProbeCheckpointResult.step).where(
            ProbeCheckpointResult.trial_id == job.trial_id, ProbeCheckpointResult.settings_hash == job.settings_hash
        )
    ).all()
    features = {step: load_features(store, features_key(job.settings_hash, cid)) for cid, step in steps}
    with FlopCounterMode(display=False) as mode:
        fit_trial(features, settings)
    return mode.get_total_flops()


@pytest.mark.usefixtures("ray_local")
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_probing_a_run_meters_every_checkpoint_and_leaves_its_cflop_alone(
    settings_env, database_url, monkeypatch, tiny_stream
) -> None:
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    runner = StreamRunner(get_settings())
    stream = tiny_manifest(tiny_stream.parent / "two.json", tasks=2)
    budget = RunBudget(trials=1, steps=4, checkpoint_fractions=(0.0, 0.5, 1.0))
    run_id = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:one_worker_indep", budget=budget))
    before = _charged(runner.sessions, run_id)
    assert before["cflop"] > 0 and len(before["board"]) == 1

    cli = CliRunner()
    probed = cli.invoke(app, ["probe", "run", "--submission", str(run_id), *CI_OPTIONS])
    assert probed.exit_code == 0, probed.output
    assert "Analysis FLOPs (not in cFLOP)" in probed.output
    assert _charged(runner.sessions, run_id) == before  # cFLOP, task and trial FLOPs, leaderboard

    store = open_store(runner.settings.store_url)
    with runner.sessions() as session:
        jobs = session.scalars(select(ProbeJob).order_by(ProbeJob.id)).all()
        assert [j.status for j in jobs] == ["done"] * len(jobs)
        by_kind = {kind: [j for j in jobs if j.kind == kind] for kind in ("checkpoint", "trial", "summary")}
        assert len(by_kind["checkpoint"]) == 2 * 3 and len(by_kind["trial"]) == 2
        details = dict(
            session.execute(select(ProbeCheckpointResult.checkpoint_id, ProbeCheckpointResult.details)).all()
        )
        for job in by_kind["checkpoint"]:
            metered, forward = _same_calls_in_process(session, store, job)
            assert job.analysis_flops > 0
            assert job.analysis_flops == metered  # what a FlopMeter around the same calls counts
            assert job.analysis_flops >= forward > 0  # at least the features (and scores) passes
            assert details[job.checkpoint_id]["analysis_flops"] == {
                "measured": job.analysis_flops,
                "reported": 0,
                "untracked": 0,
                "total": job.analysis_flops,
            }
        for job in by_kind["trial"]:
            assert job.analysis_flops == _fits_in_process(session, store, job) > 0
        assert by_kind["summary"][0].analysis_flops == 0

        report = load_probe_report(session, submission_id=run_id)
        flops = report.analysis_flops
        assert flops.in_cflop is False and flops.unmetered_jobs == 0
        assert flops.total == pytest.approx(sum(j.analysis_flops for j in jobs))
        assert [t.task_order for t in flops.by_task] == [1, 2]
        for t in flops.by_task:
            mine = [j for j in jobs if j.task_order == t.task_order]
            assert t.learner_passes == pytest.approx(sum(j.analysis_flops for j in mine if j.kind == "checkpoint"))
            assert t.probe_fits == pytest.approx(sum(j.analysis_flops for j in mine if j.kind == "trial"))
            assert t.total == pytest.approx(t.learner_passes + t.probe_fits) and t.metered_jobs == 4
        spent = {j.checkpoint_id: j.analysis_flops for j in by_kind["checkpoint"]}
        ids = {(c.trial_id, c.step): c.id for c in session.scalars(select(Checkpoint))}
        assert len(report.checkpoints) == 6
        assert all(c.analysis_flops == spent[ids[(c.trial_id, c.step)]] for c in report.checkpoints)

    shown = cli.invoke(app, ["results", str(run_id), "--probes"])
    assert shown.exit_code == 0 and "Analysis FLOPs (not in cFLOP)" in shown.output
    assert f"{flops.total:.3e}" in shown.output
    doc = json.loads(cli.invoke(app, ["results", str(run_id), "--probes", "--json"]).output)
    assert doc["cflop"] == before["cflop"]
    assert doc["probes"]["analysis_flops"]["in_cflop"] is False
    assert doc["probes"]["analysis_flops"]["total"] == pytest.approx(flops.total)

    with transaction(runner.sessions) as session:  # the API serves runs with an owner: give it one
        owner = users.create_user(session, name="alice", role="submitter")
        _, token = users.create_token(session, user=owner, label="test")
        session.add(ScheduledSubmission(submission_id=run_id, user_id=owner.id))
    settings = CoordinatorSettings(data_dir=settings_env, database_url=database_url, streams_dir=tiny_stream.parent)
    with TestClient(create_server_app(settings), raise_server_exceptions=False) as client:
        page = client.get(f"/submissions/{run_id}/probes")
        assert page.status_code == 200
        assert "Analysis FLOPs (not in cFLOP)" in page.text and f"{flops.total:.3e}" in page.text
        served = client.get(f"/submissions/{run_id}/probes.json").json()["analysis_flops"]
        assert served["total"] == pytest.approx(flops.total) and served["in_cflop"] is False
        api = client.get(f"/v1/submissions/{run_id}/probes", headers={"Authorization": f"Bearer {token}"})
        assert api.status_code == 200, api.text
        assert [t["total"] for t in api.json()["analysis_flops"]["by_task"]] == pytest.approx(
            [t.total for t in flops.by_task]
        )
        detail = client.get(f"/submissions/{run_id}")  # the submission's cFLOP, as before probing
        assert detail.status_code == 200 and f'<dd class="num" id="cflop">{before["cflop"]:.3e}</dd>' in detail.text
    assert _charged(runner.sessions, run_id) == before


def _measures() -> CheckpointMeasures:
    return CheckpointMeasures(
        lidar=2.0, rankme=3.0, pretext_error=0.5, feature_dim=4, lidar_n=2, lidar_q=2, rankme_n=8, fits=()
    )


def _finish(sessions, job, flops: float) -> None:
    with transaction(sessions) as session:
        queue.record_analysis_flops(session, job, flops)
        queue.complete(session, job)


def test_analysis_flops_are_fenced_summed_per_task_and_missing_for_old_rows(sessions, seed) -> None:
    submission_id, _, _ = seed(tasks=2, trials=1, checkpoints=2)
    settings = ProbeSettings.ci()
    with transaction(sessions) as session:
        enqueue_submission(session, submission_id=submission_id, settings=settings)
    claimed = []
    with transaction(sessions) as session:
        while (job := queue.claim(session, owner="w")) is not None:
            claimed.append(job)
    assert [j.kind for j in claimed] == ["checkpoint"] * 4
    stolen, *others = claimed
    with transaction(sessions) as session:  # another worker took the first job over
        session.execute(update(ProbeJob).where(ProbeJob.id == stolen.id).values(lease_owner="thief"))
    with pytest.raises(queue.LeaseLostError):
        _finish(sessions, stolen, 1e9)
    with sessions() as session:
        assert session.get(ProbeJob, stolen.id).analysis_flops is None  # fenced: nothing recorded
    for job in others:
        with transaction(sessions) as session:
            write_checkpoint_measures(
                session,
                checkpoint_id=job.checkpoint_id,
                trial_id=job.trial_id,
                step=0,
                settings_hash=job.settings_hash,
                measures=_measures(),
            )
        _finish(sessions, job, 100.0 * job.task_order)
    with sessions() as session:
        report = load_probe_report(session, submission_id=submission_id)
    flops = report.analysis_flops
    assert flops.total == 100.0 + 2 * 200.0 and flops.learner_passes == flops.total and flops.probe_fits == 0
    assert [(t.task_order, t.total, t.metered_jobs) for t in flops.by_task] == [(1, 100.0, 1), (2, 400.0, 2)]
    assert sorted(c.analysis_flops for c in report.checkpoints) == [100.0, 200.0, 200.0]
    with sessions() as session:
        one_task = load_probe_report(session, submission_id=submission_id, task_order=2).analysis_flops
    assert one_task.total == 400.0 and [t.task_order for t in one_task.by_task] == [2]

    with transaction(sessions) as session:  # a job done before analysis FLOPs were counted
        session.execute(update(ProbeJob).where(ProbeJob.id == others[0].id).values(analysis_flops=None))
        queue_plans.reopen(session, job_keys=[others[1].job_key])  # queued again: its figure goes too
    with sessions() as session:
        assert session.get(ProbeJob, others[1].id).analysis_flops is None
        flops = load_probe_report(session, submission_id=submission_id).analysis_flops
    assert flops.unmetered_jobs == 1 and flops.total == 200.0
    assert [(t.task_order, t.metered_jobs, t.unmetered_jobs) for t in flops.by_task] == [(1, 0, 1), (2, 1, 0)]
    with transaction(sessions) as session:
        session.execute(update(ProbeJob).values(analysis_flops=None))
    with sessions() as session:
        assert load_probe_report(session, submission_id=submission_id).analysis_flops.total is None
