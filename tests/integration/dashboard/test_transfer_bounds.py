"""A learner state forged to bloat the anonymous submission page (issue 44): 3,000 fake
transfer "choices" of 400 candidates each, committed as the run's latest state. The page
must render in under a second, showing only records of tasks the run committed."""

from __future__ import annotations

import pickle
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from services.dashboard.server import create_server_app
from services.store.db import transaction
from services.store.db.models import TaskResult, TaskRun
from services.store.objects import store_from_settings
from services.store.runs.transfer import MAX_STATE_BYTES

GENUINE = {"chosen": 1, "knn_error": {1: 0.25, 2: 0.375}, "fresh_error": 0.125, "fresh_would_win": True}


@pytest.fixture
def forged(seed_board):
    """(settings, submission id) of a 6-task run whose latest state holds the forged choices."""
    settings, sessions, stream = seed_board(submissions=1, tasks=6, seed=3)
    state = {t: {"chosen": 1, "knn_error": {c: 0.5 for c in range(1, 401)}, "fresh_error": 0.5} for t in range(2, 3002)}
    state[3] = GENUINE
    data = pickle.dumps(state)
    assert len(data) < MAX_STATE_BYTES  # read, not refused for its size
    key = "runs/forged/state.pkl"
    store_from_settings(settings).put_bytes(key, data)
    [submission_id] = stream.submission_ids
    with transaction(sessions) as session:
        latest = session.scalar(
            select(TaskResult.task_run_id)
            .where(TaskResult.submission_id == submission_id)
            .order_by(TaskResult.id.desc())
            .limit(1)
        )
        session.execute(update(TaskRun).where(TaskRun.id == latest).values(learner_state_key=key))
    return settings, submission_id


def test_a_state_of_3000_forged_choices_renders_its_page_in_under_a_second(forged):
    settings, submission_id = forged
    with TestClient(create_server_app(settings)) as client:
        assert client.get("/").status_code == 200  # the app and its templates warm
        started = time.perf_counter()
        page = client.get(f"/submissions/{submission_id}")
        took = time.perf_counter() - started
        report = client.get(f"/submissions/{submission_id}/transfer.json").json()
    assert page.status_code == 200 and took < 1.0, took
    assert 'data-task="3"' in page.text and 'data-task="7"' not in page.text
    assert report["transfer_matrix"]["targets"] == [3]
    assert report["transfer_matrix"]["sources"] == [1, 2, -1]
