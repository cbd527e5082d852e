"""The worker pool as separate processes: watch mode queues committed tasks, two workers
drain the queue, every job is taken once, and unusable checkpoints fail without blocking."""

from __future__ import annotations

from sqlalchemy import select

from services.store.db.models_probe import ProbeJob
from services.store.probes.settings import ProbeSettings
from workers.probe.runtime.pool import WorkerConfig, run_pool


def test_two_worker_processes_queue_and_drain_a_submission(database_url, sessions, seed, tmp_path) -> None:
    _, trial_ids, _ = seed(tasks=2, trials=1, checkpoints=2)
    config = WorkerConfig(
        database_url=database_url,
        store_url=(tmp_path / "store").as_uri(),
        lease_s=30,
        poll_s=0.2,
        stop_when_idle=True,
        watch=ProbeSettings.ci().to_dict(),
    )
    assert run_pool(config, 2) == [0, 0]
    with sessions() as session:
        jobs = session.scalars(select(ProbeJob).order_by(ProbeJob.id)).all()
    assert [j.kind for j in jobs].count("checkpoint") == 4 and len(jobs) == 4 + 2 + 1
    assert all(j.attempts == 1 for j in jobs)  # each job taken exactly once
    # The seeded rows name a learner that does not exist: a permanent failure, at once.
    checkpoint_jobs = [j for j in jobs if j.kind == "checkpoint"]
    assert all(j.status == "failed" and "Cannot load learner 'seed:learner'" in j.error for j in checkpoint_jobs)
    # Their trials and the summary still ran (with nothing to score), so nothing hangs.
    assert all(j.status == "done" for j in jobs if j.kind != "checkpoint")
    assert {j.trial_id for j in jobs if j.kind == "trial"} == set(trial_ids)
    assert len({j.lease_owner for j in jobs}) == 1 and jobs[0].lease_owner is None  # released


def test_probe_workers_command_runs_the_pool_until_the_queue_is_empty(
    settings_env, database_url, seed, monkeypatch
) -> None:
    from typer.testing import CliRunner

    from services.cli.main import app
    from services.core.config import get_settings

    seed(tasks=1, trials=1, checkpoints=1)
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    result = CliRunner().invoke(app, ["probe-workers", "-n", "1", "--once", "--preset", "ci", "--poll-s", "0.2"])
    assert result.exit_code == 0, result.output
    assert "exited with codes [0]" in result.output
    shown = CliRunner().invoke(app, ["results", "1", "--probes"])
    assert "jobs: done 2, failed 1" in shown.output  # watch mode queued them; the learner is fake
