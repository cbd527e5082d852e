"""A meta-test run's prediction-job logs are withheld (issue 44): a learner that prints the
test images in ``predict`` gets none of them back from ``GET /v1/submissions/{id}/logs`` or
the logs page; a failed job shows only its traceback's last bytes. Trial logs (train and dev
data, the learner's own) and a meta-train run's prediction logs stay readable."""

from __future__ import annotations

import base64

from fastapi.testclient import TestClient
from sqlalchemy import select

from services.store.db import make_engine, session_factory, transaction
from services.store.db.models import StreamTask, Submission, TaskRun, Trial
from services.store.objects import open_store
from services.store.runs import run_keys
from services.store.runs.logs import WITHHELD_TRACEBACK_BYTES

LEARNER = {"entrypoint": "nevis_test_learners:nearest_mean", "name": "nm-printer"}
IMAGES = base64.b64encode(bytes(range(256)) * 40).decode()  # what a printing learner writes
TRACE = "Traceback (most recent call last):\n" + '  File "learner.py", line 1\n' * 200 + "RuntimeError: boom\n"


def _ran(settings, submission_id: int) -> None:
    """Tasks 1 (succeeded) and 2 (failed in predict) each printed the images in its prediction job."""
    engine = make_engine(settings.database_url)
    try:
        with transaction(session_factory(engine)) as session:
            submission = session.get(Submission, submission_id)
            for order, status in ((1, "succeeded"), (2, "failed")):
                task = session.scalar(
                    select(StreamTask).where(
                        StreamTask.stream_version_id == submission.stream_version_id, StreamTask.order == order
                    )
                )
                run = TaskRun(submission_id=submission_id, stream_task_id=task.id, status=status, attempt=1)
                session.add(run)
                session.flush()
                session.add(Trial(task_run_id=run.id, trial_index=0, seed=0, status="succeeded"))
    finally:
        engine.dispose()
    store = open_store(settings.store_url)
    for order, tail in ((1, ""), (2, IMAGES + "\n" + TRACE)):
        prefix = run_keys.attempt_prefix(submission_id, order, 1)
        store.put_bytes(f"{run_keys.trial_prefix(prefix, 0)}/{run_keys.LOG_FILE}", b"epoch 1 loss 0.5\n")
        store.put_bytes(f"{prefix}/{run_keys.PREDICT_LOG_FILE}", f"{IMAGES}\n{tail}".encode())


def _submission(client: TestClient, headers: dict[str, str], phase: str) -> int:
    learner = client.post("/v1/learners", json={**LEARNER, "name": f"nm-{phase}"}, headers=headers).json()
    made = client.post(
        "/v1/submissions",
        headers=headers,
        json={"learner_id": learner["id"], "stream": "tiny2", "phase": phase, "budget": {"trials": 1, "steps": 1}},
    )
    assert made.status_code == 201, made.text
    return made.json()["id"]


def test_a_meta_test_runs_prediction_logs_carry_no_test_images(coord_settings, tokens) -> None:
    from services.dashboard.server import create_server_app

    alice = tokens.auth("alice")
    with TestClient(create_server_app(coord_settings)) as client:
        sid = _submission(client, alice, "meta_test")
        _ran(coord_settings, sid)
        for who in ("alice", "admin"):
            items = client.get(f"/v1/submissions/{sid}/logs", headers=tokens.auth(who)).json()["items"]
            assert [(i["task"], i["kind"]) for i in items] == [
                (1, "trial"),
                (1, "prediction"),
                (2, "trial"),
                (2, "prediction"),
            ]
            assert items[0]["text"] == "epoch 1 loss 0.5\n"  # a trial's log is the learner's own
            for item in items:
                assert IMAGES[:64] not in item["text"]
            assert "withheld" in items[1]["text"] and "Traceback" not in items[1]["text"]
            failed = items[3]["text"]
            assert failed.endswith("RuntimeError: boom\n") and "withheld" in failed
            assert len(failed.encode()) <= WITHHELD_TRACEBACK_BYTES + 400
        page = client.get(f"/submissions/{sid}/logs", headers=alice)
        assert page.status_code == 200 and IMAGES[:64] not in page.text and "withheld" in page.text


def test_a_meta_train_runs_prediction_logs_stay_readable(client: TestClient, tokens, coord_settings) -> None:
    alice = tokens.auth("alice")
    sid = _submission(client, alice, "meta_train")
    _ran(coord_settings, sid)
    items = client.get(f"/v1/submissions/{sid}/logs", headers=alice, params={"task": 1}).json()["items"]
    assert items[1]["kind"] == "prediction" and items[1]["text"] == f"{IMAGES}\n"


def test_a_retired_stream_versions_prediction_logs_are_returned(coord_settings, tokens) -> None:
    """NEVIS_RETIRED_STREAMS names the version whose test images may now be public."""
    from services.dashboard.server import create_server_app

    alice = tokens.auth("alice")
    retired = coord_settings.model_copy(update={"retired_streams": "other@1, tiny2@test-1"})
    assert ("tiny2", "test-1") in retired.retired_stream_versions
    with TestClient(create_server_app(retired)) as client:
        sid = _submission(client, alice, "meta_test")
        _ran(coord_settings, sid)
        items = client.get(f"/v1/submissions/{sid}/logs", headers=alice, params={"task": 1}).json()["items"]
        assert items[1]["kind"] == "prediction" and items[1]["text"] == f"{IMAGES}\n"
        page = client.get(f"/submissions/{sid}/logs", headers=alice, params={"task": 1})
        assert IMAGES[:64] in page.text
