"""Verified rows over the API (issue 50), on SQLite and PostgreSQL: an operator queues replays of
a finished public submission (``POST /v1/submissions/{id}/verify``), the scheduler would run
them like any submission; once they end, ``GET .../verify``, the submission's leaderboard row
and its CSV show the mark; the replays are no leaderboard rows of their own. The runs' results
are committed here as a worker commits them (the real runs are tests/integration/test_verify_replays.py)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from services.core.uncertainty import ErrorInterval, Interval
from services.dashboard.server import create_server_app
from services.store.db import transaction
from services.store.db.models_coordinator import ScheduledSubmission, User
from services.store.db.models_scores import SubmissionInterval
from services.store.runs.interval_cache import as_document
from tests.integration.coordinator.test_refreshes import finish, learner, sessions, submit  # noqa: F401 - sessions: a fixture


def keep_interval(sessions, submission_id: int, low: float, high: float) -> None:  # noqa: F811
    """The original's interval of E, as its run's end keeps it on its leaderboard row."""
    with transaction(sessions) as session:
        row = session.get(SubmissionInterval, submission_id)
        estimate = (low + high) / 2
        row.interval = as_document(
            ErrorInterval(estimate, Interval(low, high, 0.95), 0.02, (estimate,), (Interval(low, high, 0.95),), 1000, 0)
        )


def test_an_operator_verifies_a_finished_public_submission(client, tokens, sessions, coord_settings):  # noqa: F811
    admin = tokens.auth("admin")
    alice = learner(client, tokens, "alice")
    original = submit(client, tokens, "alice", alice)
    unfinished = submit(client, tokens, "alice", alice)
    finish(sessions, original, 0.30)
    keep_interval(sessions, original, 0.25, 0.35)

    assert (
        client.post(f"/v1/submissions/{original}/verify", json={"seeds": 2}, headers=tokens.auth("alice")).status_code
        == 403
    )
    refused = client.post(f"/v1/submissions/{unfinished}/verify", json={"seeds": 2}, headers=admin)
    assert refused.status_code == 409 and "only a finished run" in refused.json()["detail"]
    assert client.post("/v1/submissions/999999/verify", json={}, headers=admin).status_code == 404
    too_many = client.post(f"/v1/submissions/{original}/verify", json={"seeds": 11}, headers=admin)
    assert too_many.status_code == 422 and "seeds" in too_many.text

    made = client.post(f"/v1/submissions/{original}/verify", json={"seeds": 2}, headers=admin)
    assert made.status_code == 202, made.text
    body = made.json()
    assert body["verdict"] == "pending" and body["mark"] is None
    replays = [r["id"] for r in body["replays"]]
    assert len(replays) == 2 and len({r["seed"] for r in body["replays"]}) == 2
    with sessions() as session:
        root = session.scalar(select(User).where(User.name == "root"))
        owners = session.scalars(
            select(ScheduledSubmission.user_id).where(ScheduledSubmission.submission_id.in_(replays))
        )
        assert set(owners) == {root.id}  # queued for the scheduler, owned by the operator
    again = client.post(f"/v1/submissions/{replays[0]}/verify", json={"seeds": 1}, headers=admin)
    assert again.status_code == 409 and f"replay of run {original}" in again.json()["detail"]

    finish(sessions, replays[0], 0.31)
    state = client.get(f"/v1/submissions/{original}/verify", headers=tokens.auth("bob")).json()
    assert state["verdict"] == "pending"  # one replay still queued
    finish(sessions, replays[1], 0.60)
    state = client.get(f"/v1/submissions/{original}/verify", headers=tokens.auth("bob")).json()
    assert state["verdict"] == "not_reproduced" and state["mark"] == "not_reproduced"
    assert state["interval"] == {"low": 0.25, "high": 0.35, "level": 0.95}
    assert [(r["error"], r["inside"]) for r in state["replays"]] == [(0.31, True), (0.60, False)]
    assert client.get(f"/v1/submissions/{replays[0]}/verify", headers=admin).json()["replay_of"] == original

    second = client.post(f"/v1/submissions/{original}/verify", json={"seeds": 1}, headers=admin).json()
    newest = [r["id"] for r in second["replays"] if r["request"] == 2]
    finish(sessions, newest[0], 0.29)
    state = client.get(f"/v1/submissions/{original}/verify", headers=admin).json()
    assert state["verdict"] == "verified" and state["note"] is None  # judged by the latest request's replays

    detail = client.get(f"/v1/submissions/{original}", headers=admin).json()
    assert detail["e"] == pytest.approx(0.30)  # the replays never change the original's numbers
    assert detail["verification"]["mark"] == "verified" and len(detail["verification"]["replays"]) == 3
    replay_detail = client.get(f"/v1/submissions/{newest[0]}", headers=admin).json()
    assert replay_detail["verification"]["replay_of"] == original

    board = client.get("/v1/leaderboard", params={"stream": "tiny2"}, headers=admin).json()
    rows = {r["submission_id"]: r for r in board["items"]}
    assert set(rows) == {original, unfinished}  # three finished replays, no rows of their own
    assert rows[original]["verified_mark"] == "verified" and rows[original]["replays"] == [*replays, *newest]
    assert rows[unfinished]["verified_mark"] is None and rows[unfinished]["verification"] is None

    with TestClient(create_server_app(coord_settings)) as dashboard:
        page = dashboard.get("/", params={"stream": "tiny2"}).text
        assert 'class="badge badge-verified"' in page and f"replays: {', '.join(map(str, [*replays, *newest]))}" in page
        assert "not reproduced</span>: an operator replayed" in page  # the legend
        lines = dashboard.get("/leaderboard.csv", params={"stream": "tiny2"}).text.splitlines()
        assert lines[0].endswith(",verified_mark") and len(lines) == 3
        assert any(line.startswith(f"1,{original},") and line.endswith(",verified") for line in lines)
        shown = dashboard.get(f"/submissions/{original}").text
        assert 'id="verification"><span class="badge badge-verified">verified</span>' in shown
        assert f'href="/submissions/{newest[0]}"' in shown
        assert f'a replay of <a href="/submissions/{original}">' in dashboard.get(f"/submissions/{newest[0]}").text


def test_the_refresh_schedule_verifies_unverified_rows_and_settles_them(client, tokens, sessions, coord_settings):  # noqa: F811
    from services.coordinator.refresh.timer import RefreshTimer
    from services.store.db.models_verify import SubmissionReplay

    settings = coord_settings.model_copy(
        update={"refresh_cron": "@daily", "refresh_verify_seeds": 2, "refresh_verify_limit": 1, "refresh_baselines": ""}
    )
    alice = learner(client, tokens, "alice")
    first, second = submit(client, tokens, "alice", alice), submit(client, tokens, "alice", alice)
    for run in (first, second):
        finish(sessions, run, 0.30)
        keep_interval(sessions, run, 0.25, 0.35)
    timer = RefreshTimer(settings, sessions)
    timer.tick()  # the first pass is due: the oldest unverified row gets two replays (the limit is one row)
    with sessions() as session:
        links = session.scalars(select(SubmissionReplay).order_by(SubmissionReplay.replay_id)).all()
        assert [(r.original_id, r.requested_by) for r in links] == [(first, "refresh"), (first, "refresh")]
    assert client.get(f"/v1/submissions/{first}/verify", headers=tokens.auth("admin")).json()["verdict"] == "pending"
    for link in links:
        finish(sessions, link.replay_id, 0.32)
    timer.tick()  # not due again; it settles the verdict whose replays ended
    with sessions() as session:
        from services.store.db.models_verify import SubmissionVerdict

        assert session.get(SubmissionVerdict, first).verdict == "verified"
        assert session.get(SubmissionVerdict, second) is None
