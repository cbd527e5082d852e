"""A learner asking for two workers runs each trial as a Ray Train group inside Tune."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.core.config import get_settings
from services.store.db.models import Trial
from services.store.runs.summary import load_summary
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

# Learner-side: the dialect is not what these tests test (the runner's records are dialect-tested elsewhere).
pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]


def test_two_worker_trials_sum_flops_over_workers(settings_env, database_url, tmp_path, monkeypatch) -> None:
    import json

    monkeypatch.setenv("NEVIS_SANDBOX", "none")  # the researcher's own code, trusted: no sandbox

    doc = {
        "format": 1,
        "name": "one",
        "version": "t",
        "description": "d",
        "source": "tests",
        "meta_test_from_year": 2019,
        "image_size": 16,
        "tasks": [
            {
                "order": 1,
                "year": 2020,
                "dataset": "shapes:shape",
                "title": "s",
                "domain": "shape",
                "kind": "single",
                "num_classes": 4,
                "split": {
                    "kind": "random",
                    "fractions": {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2},
                    "seed": 0,
                },
            }
        ],
    }
    stream = tmp_path / "one.json"
    stream.write_text(json.dumps(doc))
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    runner = StreamRunner(get_settings())
    budget = RunBudget(trials=1, steps=2, checkpoint_fractions=(0.0, 1.0))
    before = {p for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith("nevis-train-")}
    single = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:nearest_mean", budget=budget))
    double = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:two_workers", budget=budget))
    with runner.sessions() as session:
        assert load_summary(session, submission_id=double).status == "succeeded"
        flops = {t.task_run.submission_id: t for t in session.scalars(select(Trial))}
        assert flops[double].status == "succeeded", flops[double].traceback
        # Every rank fits the same data, so the group spends exactly twice one worker's FLOPs
        # on training; validation runs on rank 0 only.
        train_flops_single = flops[single].flops
        assert flops[double].flops == pytest.approx(2 * train_flops_single, rel=0.5)
        assert flops[double].flops > train_flops_single
        assert [c.step for c in flops[double].checkpoints] == [0, 2]
    # Ray Train's run folder does not outlive its trial.
    left = {p for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith("nevis-train-")}
    assert not left - before, sorted(left - before)


@pytest.mark.parametrize(
    ("sandbox", "submitted", "words"),
    [
        ("none", True, "no uploaded bundle or image")  # an upload never leaves a host (bwrap: one per rank)
    ],
)
def test_a_multi_worker_learner_is_refused_wherever_its_ranks_would_leave_the_sandbox(
    settings_env, database_url, monkeypatch, sandbox, submitted, words
) -> None:
    from services.core.errors import LearnerError

    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    monkeypatch.setenv("NEVIS_SANDBOX", sandbox)
    get_settings.cache_clear()
    runner = StreamRunner(get_settings(), submitted=submitted)
    with pytest.raises(LearnerError, match=words):
        runner.start(
            RunRequest(stream="mini", learner="nevis_test_learners:two_workers", budget=RunBudget(trials=1, steps=1))
        )
    with runner.sessions() as session:
        assert session.scalar(select(Trial.id)) is None  # nothing of it ran


def test_ddp_trials_train_one_network_and_charge_the_work_of_all_ranks(
    settings_env, database_url, tmp_path, monkeypatch
) -> None:
    """Two gloo ranks each take half of every batch (DDP averages the gradients; the learner
    fails the trial if the ranks' weights differ), so their summed FLOPs match one worker
    doing the whole batches."""
    from tests.integration.conftest import tiny_manifest

    stream = tiny_manifest(tmp_path / "one.json", tasks=1)
    monkeypatch.setenv("NEVIS_SANDBOX", "none")  # the researcher's own code, trusted: no sandbox
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    runner = StreamRunner(get_settings())
    budget = RunBudget(trials=1, steps=4, checkpoint_fractions=(1.0,))
    single = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:one_worker_indep", budget=budget))
    double = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:ddp_indep", budget=budget))
    with runner.sessions() as session:
        trials = {t.task_run.submission_id: t for t in session.scalars(select(Trial))}
        assert trials[double].status == "succeeded", trials[double].traceback
        assert trials[double].flops == pytest.approx(trials[single].flops, rel=0.05)
        assert trials[double].config == trials[single].config


def test_an_uploaded_two_rank_learner_trains_in_learner_hosts_under_the_default_sandbox(
    settings_env, database_url, tmp_path, monkeypatch
) -> None:
    """Issue 46: an upload (submitted) asking for two workers, under bwrap (the default where
    bubblewrap is installed), runs one learner host per rank; DDP's ranks agree on the weights
    (the learner checks with an all_gather over the trial's private loopback) and each rank's
    log is kept beside the trial's."""
    from tests.integration.conftest import tiny_manifest

    stream = tiny_manifest(tmp_path / "one.json", tasks=1)
    monkeypatch.setenv("NEVIS_SANDBOX", "bwrap")
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    runner = StreamRunner(get_settings(), submitted=True)
    budget = RunBudget(trials=1, steps=2, checkpoint_fractions=(1.0,))
    double = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:ddp_indep", budget=budget))
    with runner.sessions() as session:
        trial = session.scalars(select(Trial).where(Trial.task_run.has(submission_id=double))).one()
        assert trial.status == "succeeded", trial.traceback
        assert trial.flops > 0 and [c.step for c in trial.checkpoints] == [2]
        assert load_summary(session, submission_id=double).status == "succeeded"
    logs = [k for k in runner.store.list() if k.endswith("/log-rank-1.txt")]
    assert len(logs) == 1, logs
