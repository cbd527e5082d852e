"""A submission's storage quota through a real run (issue 44, finding 8): a learner whose
state would take its submission past ``NEVIS_SUBMISSION_STORAGE_MB`` has that trial fail with
the quota named, nothing of the state stored, and the task fails with the reason."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.core.errors import TaskFailedError
from services.store.db.models import Trial
from workers.trainer.run_plan import RunRequest

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]


def test_a_state_over_the_submission_quota_fails_its_trial_naming_the_setting(runner, tiny_stream, monkeypatch):
    from nevis_bloat_learners import BLOAT_BYTES

    from tests.integration.conftest import tiny_manifest

    quota_mb = 2
    assert quota_mb << 20 < BLOAT_BYTES  # the state alone passes the quota
    limited = runner.settings.model_copy(update={"submission_storage_mb": quota_mb})
    monkeypatch.setattr(runner, "settings", limited)
    monkeypatch.setattr(runner.actors, "settings", limited)  # the run's harness actor is made from these
    stream = str(tiny_manifest(tiny_stream.parent / "one.json", tasks=1))
    budget = RunBudget(trials=1, steps=1, checkpoint_fractions=(1.0,))
    with pytest.raises(TaskFailedError, match="NEVIS_SUBMISSION_STORAGE_MB"):
        runner.start(RunRequest(stream=stream, learner="nevis_hostile_learners:state_bloater", budget=budget))
    with runner.sessions() as session:
        trial = session.scalars(select(Trial)).one()
    assert trial.status == "failed" and "storage quota" in trial.error_text
    assert not [key for key in runner.store.list("runs/") if key.endswith("/state.pkl")]
