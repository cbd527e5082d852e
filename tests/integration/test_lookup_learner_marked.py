"""Issue 44's public-labels attack through a real run: a learner carrying a table of the test
split's labels (computed from a public, unsalted preparation) scores 0 on a meta-test task and
is marked inconsistent; the honest nearest-mean learner on the same task is not.
SQLite only: the subject is the check, not the dialect."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.store.db.models import TaskResult
from services.store.runs.summary import load_summary
from workers.stream.task_data import load_task_data
from workers.trainer.run_plan import RunRequest

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

BUDGET = RunBudget(trials=1, steps=2, checkpoint_fractions=(1.0,), max_concurrent=1)


def test_a_lookup_table_of_test_labels_is_marked_and_an_honest_learner_is_not(runner, tiny_stream, learner_dir):
    from tests.integration.conftest import tiny_manifest

    stream = str(tiny_manifest(tiny_stream.parent / "one.json", tasks=1, image_size=32))
    honest = runner.start(RunRequest(stream=stream, learner="nevis_test_learners:nearest_mean", budget=BUDGET))
    plan = runner.plan(honest)
    images, labels = load_task_data(runner.store, plan.tasks[0], image_size=plan.image_size, splits=("test",)).splits[
        "test"
    ]
    table = {hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest(): int(y) for x, y in zip(images, labels)}
    (learner_dir / "nevis_lookup_table.py").write_text(f"TABLE = {table!r}\n")
    cheat = runner.start(RunRequest(stream=stream, learner="nevis_lookup_learners:lookup", budget=BUDGET))
    with runner.sessions() as session:
        results = {r.submission_id: r for r in session.scalars(select(TaskResult))}
        cheated, fair = load_summary(session, submission_id=cheat), load_summary(session, submission_id=honest)
    assert len(images) >= 16
    assert results[cheat].error == 0.0 and results[cheat].inconsistent and results[cheat].consistency_jump > 0.5
    assert cheated.inconsistent
    assert results[honest].error > 0.0 and not results[honest].inconsistent
    assert results[honest].consistency_jump is not None and results[honest].consistency_jump < 0.15
    assert not fair.inconsistent
