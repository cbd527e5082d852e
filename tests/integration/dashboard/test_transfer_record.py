"""The transfer report's learner part is read once, at commit, and served stored (issue 44):
a state of 3,000 forged choices is read by :func:`keep_transfer_record` (what the harness
calls after each commit) into a bounded record; the anonymous page then shows the genuine
choice from that record even with the state gone from the store, so no view reads a state."""

from __future__ import annotations

import json
import pickle

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from services.core.transfer import Choice
from services.dashboard.server import create_server_app
from services.store.db import transaction
from services.store.db.models import TaskResult, TaskRun
from services.store.objects import store_from_settings
from services.store.runs.transfer import keep_transfer_record
from services.store.runs.transfer_record import MAX_RECORD_BYTES, decode_record, encode_record, latest_record_key

GENUINE = {"chosen": 1, "knn_error": {1: 0.25, 2: 0.375}, "fresh_error": 0.125, "fresh_would_win": True}


@pytest.fixture
def committed(seed_board):
    """(settings, submission id, state key) of a 6-task run whose latest state holds 3,000
    forged choices and one genuine one, its transfer record kept as a commit keeps it."""
    settings, sessions, stream = seed_board(submissions=1, tasks=6, seed=3)
    state = {t: {"chosen": 1, "knn_error": {c: 0.5 for c in range(1, 401)}, "fresh_error": 0.5} for t in range(2, 3002)}
    state[3] = GENUINE
    key = "runs/forged/state.pkl"
    store = store_from_settings(settings)
    store.put_bytes(key, pickle.dumps(state))
    [submission_id] = stream.submission_ids
    with transaction(sessions) as session:
        latest = session.scalar(
            select(TaskResult.task_run_id)
            .where(TaskResult.submission_id == submission_id)
            .order_by(TaskResult.id.desc())
            .limit(1)
        )
        session.execute(update(TaskRun).where(TaskRun.id == latest).values(learner_state_key=key))
    with sessions() as session:
        record = keep_transfer_record(session, store, submission_id=submission_id)
        assert record == latest_record_key(session, submission_id=submission_id)
    return settings, submission_id, key, record


def test_the_page_is_served_from_the_bounded_record_kept_at_commit(committed):
    settings, submission_id, state_key, record = committed
    store = store_from_settings(settings)
    assert store.info(record).size <= MAX_RECORD_BYTES  # bounded, however large the state's claims
    assert [c["task"] for c in json.loads(store.get_bytes(record))["choices"]] == [3]
    store.delete(state_key)  # a view that read the state would now find nothing
    with TestClient(create_server_app(settings)) as client:
        page = client.get(f"/submissions/{submission_id}")
        report = client.get(f"/submissions/{submission_id}/transfer.json").json()
    assert page.status_code == 200 and 'data-task="3"' in page.text and 'data-task="7"' not in page.text
    assert report["transfer_matrix"]["targets"] == [3]
    assert report["transfer_matrix"]["sources"] == [1, 2, -1]


def test_a_record_of_more_choices_than_fit_keeps_the_first_and_says_so():
    wide = {t: Choice(t, 1, {c: 0.5 for c in range(1, t)}, 0.5, False) for t in range(2, 700)}
    data = encode_record(wide, None, state_sha256=None)
    assert len(data) <= MAX_RECORD_BYTES
    choices, reason = decode_record(data)
    assert 0 < len(choices) < len(wide) and sorted(choices) == list(range(2, 2 + len(choices)))
    assert reason is not None and f"of the {len(wide)} tasks" in reason
    assert choices[5] == wide[5]  # what is kept reads back exactly
