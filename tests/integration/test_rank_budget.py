"""A task's FLOP cap hears every sandboxed rank: rank 1's work alone stops the trial (issue 46)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.core.config import get_settings
from services.core.errors import TaskFailedError
from services.store.db.models import Submission, Trial
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]


def test_a_cap_reached_by_rank_one_alone_stops_the_trial(settings_env, database_url, tmp_path, monkeypatch) -> None:
    """Rank 1 reports 1e12 FLOPs at once, rank 0 next to nothing and then idles for 8 s: under
    ``budget-1e9`` the running charge (every rank's reports) passes the cap while the trial runs,
    so it is stopped with the cap's message, not finished and charged afterwards."""
    from tests.integration.conftest import tiny_manifest

    stream = tiny_manifest(tmp_path / "one.json", tasks=1)
    monkeypatch.setenv("NEVIS_SANDBOX", "bwrap")
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    runner = StreamRunner(get_settings(), submitted=True)
    budget = RunBudget(trials=1, steps=1, checkpoint_fractions=(1.0,))
    request = RunRequest(
        stream=str(stream), learner="nevis_test_learners:rank_one_spends", budget=budget, ruleset="budget-1e9"
    )
    with pytest.raises(TaskFailedError, match="budget-1e9 cap of 1e\\+09 cFLOP is reached") as failed:
        runner.start(request)  # its only trial was stopped: the task has no trial to choose
    assert "stopped by the harness" in str(failed.value)
    run = _only_submission(runner)
    with runner.sessions() as session:
        trial = session.scalars(select(Trial).where(Trial.task_run.has(submission_id=run))).one()
        assert trial.status == "stopped", (trial.status, trial.error_text, trial.traceback)
        assert "budget-1e9 cap" in (trial.error_text or ""), trial.error_text
        assert trial.flops >= 10**12  # rank 1's work is charged with the trial's


def _only_submission(runner: StreamRunner) -> int:
    with runner.sessions() as session:
        return session.scalars(select(Submission.id)).one()
