"""``GET /v1/submissions/{id}/logs`` (issue 25, logs): a submission's trial and prediction-job
logs, read back from the object store for its owner and admins; another user gets the 404 of
an unknown id (a public submission's logs are private too), and anonymous readers a 401."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select

from services.store import key_layout
from services.store.db import make_engine, session_factory, transaction
from services.store.db.models import StreamTask, Submission, TaskRun, Trial
from services.store.objects import open_store
from services.store.runs import run_keys

LEARNER = {"entrypoint": "nevis_test_learners:nearest_mean", "name": "nm-logs"}


def _failed_trial(settings, submission_id: int) -> None:
    """Task 1 of the submission ran two trials (one failed), each with its log, and a prediction job."""
    engine = make_engine(settings.database_url)
    store = open_store(settings.store_url)
    try:
        with transaction(session_factory(engine)) as session:
            submission = session.get(Submission, submission_id)
            task = session.scalar(
                select(StreamTask).where(
                    StreamTask.stream_version_id == submission.stream_version_id, StreamTask.order == 1
                )
            )
            run = TaskRun(submission_id=submission_id, stream_task_id=task.id, status="failed", attempt=1)
            session.add(run)
            session.flush()
            session.add_all(
                [
                    Trial(task_run_id=run.id, trial_index=0, seed=0, status="succeeded"),
                    Trial(
                        task_run_id=run.id,
                        trial_index=1,
                        seed=1,
                        status="failed",
                        error_text="RuntimeError: boom",
                        traceback="Traceback ...\nRuntimeError: boom",
                    ),
                ]
            )
    finally:
        engine.dispose()
    prefix = run_keys.attempt_prefix(submission_id, 1, 1)
    store.put_bytes(f"{run_keys.trial_prefix(prefix, 0)}/{run_keys.LOG_FILE}", b"epoch 1 loss 0.5\n")
    store.put_bytes(
        f"{run_keys.trial_prefix(prefix, 1)}/{run_keys.LOG_FILE}",
        b"x" * 5000 + b"\n[nevis] trial 1 failed: RuntimeError: boom\nTraceback (most recent call last):\n",
    )
    store.put_bytes(f"{prefix}/{run_keys.PREDICT_LOG_FILE}", b"predicting\n")
    store.put_bytes(key_layout.prepare_log_key(prefix), b"preparing task 1\n")


def test_logs_are_the_owners_and_admins_only(client: TestClient, tokens, coord_settings) -> None:
    alice = tokens.auth("alice")
    learner = client.post("/v1/learners", json=LEARNER, headers=alice).json()
    created = client.post(
        "/v1/submissions",
        headers=alice,
        json={  # meta-train: its prediction logs are readable
            "learner_id": learner["id"],
            "stream": "tiny2",
            "phase": "meta_train",
            "budget": {"trials": 2, "steps": 1},
        },
    )
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    assert client.get(f"/v1/submissions/{sid}/logs", headers=alice).json()["items"] == []
    _failed_trial(coord_settings, sid)

    page = client.get(f"/v1/submissions/{sid}/logs", headers=alice)
    assert page.status_code == 200, page.text
    items = page.json()["items"]
    assert [(i["task"], i["trial"], i["kind"], i["status"]) for i in items] == [
        (1, None, "preparation", None),
        (1, 0, "trial", "succeeded"),
        (1, 1, "trial", "failed"),
        (1, None, "prediction", None),
    ]
    assert items[0]["text"] == "preparing task 1\n"  # prepare_task's output, before the trials
    assert items[1]["text"] == "epoch 1 loss 0.5\n" and items[3]["text"] == "predicting\n"
    assert "Traceback" in items[2]["text"] and items[2]["error"] == "RuntimeError: boom"

    one = client.get(
        f"/v1/submissions/{sid}/logs", params={"task": 1, "trial": 1, "tail_bytes": 100}, headers=tokens.auth("admin")
    )
    assert one.status_code == 200, one.text
    [item] = one.json()["items"]
    assert item["truncated"] and len(item["text"]) == 100 and item["text"].endswith("(most recent call last):\n")
    assert client.get(f"/v1/submissions/{sid}/logs", params={"task": 2}, headers=alice).json()["items"] == []

    for who, status in (("bob", 404), (None, 401)):
        refused = client.get(f"/v1/submissions/{sid}/logs", headers=tokens.auth(who) if who else {})
        assert refused.status_code == status, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert "boom" not in refused.text
    missing = client.get("/v1/submissions/999999/logs", headers=tokens.auth("bob"))
    assert (
        missing.status_code == 404
        and missing.json()["title"]
        == client.get(f"/v1/submissions/{sid}/logs", headers=tokens.auth("bob")).json()["title"]
    )


def test_the_dashboard_shows_logs_to_the_owner_only(coord_settings, tokens) -> None:
    """The submission page lists the owner's logs (a failed trial's traceback one click away);
    the same page for anyone else has no logs section, and the logs page is their 404."""
    from services.dashboard.server import create_server_app

    alice = tokens.auth("alice")
    with TestClient(create_server_app(coord_settings), raise_server_exceptions=False) as client:
        learner = client.post("/v1/learners", json=LEARNER, headers=alice).json()
        sid = client.post(
            "/v1/submissions",
            headers=alice,
            json={"learner_id": learner["id"], "stream": "tiny2", "budget": {"trials": 2, "steps": 1}},
        ).json()["id"]
        _failed_trial(coord_settings, sid)
        for who in (None, "bob", "alice"):  # the shared page first: the owner's must not be served from it
            page = client.get(f"/submissions/{sid}", headers=tokens.auth(who) if who else {})
            assert page.status_code == 200, page.text
            assert ('id="log-list"' in page.text) == (who == "alice"), who
        assert page.headers["cache-control"] == "private, no-cache"
        assert f'href="/submissions/{sid}/logs?task=1&amp;trial=1#log-1-1-1">traceback</a>' in page.text
        admin = client.get(f"/submissions/{sid}", headers=tokens.auth("admin"))
        assert 'id="log-list"' in admin.text

        shown = client.get(f"/submissions/{sid}/logs", params={"task": 1, "trial": 1}, headers=alice)
        assert shown.status_code == 200 and "Traceback (most recent call last)" in shown.text
        assert "epoch 1 loss" not in shown.text  # trial 0's log is on its own link
        for who in (None, "bob"):
            refused = client.get(f"/submissions/{sid}/logs", headers=tokens.auth(who) if who else {})
            assert refused.status_code == 404 and "boom" not in refused.text
