"""Meta-test hygiene (issue 9, item 7): meta-test submissions are limited per user, learner
and stream version; the limit is shown by the API and the CLI; leaderboards rank meta-test only.

Run on SQLite and PostgreSQL (the ``database_url`` fixture). The app here allows 2 meta-test
submissions per learner and stream version in 7 days, and enough of everything else.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from services.coordinator.app import create_app
from services.coordinator.common.config import CoordinatorSettings
from services.store.db import make_engine, session_factory, transaction
from services.store.db.models import StreamTask, Submission, TaskRun
from services.store.db.types import utcnow

LIMIT, DAYS = 2, 7.0
WINDOW_S = int(DAYS * 86_400)


@pytest.fixture
def capped(kit, settings_env, database_url, streams_dir, tokens) -> CoordinatorSettings:
    return kit.make_settings(
        database_url,
        settings_env,
        streams_dir,
        meta_test_quota=LIMIT,
        meta_test_quota_days=DAYS,
        quota_concurrent=50,
        quota_daily=100,
    )


@pytest.fixture
def api(capped) -> Iterator[TestClient]:
    with TestClient(create_app(capped), raise_server_exceptions=False) as client:
        yield client


def _learner(api: TestClient, headers: dict[str, str], name: str) -> int:
    made = api.post(
        "/v1/learners", headers=headers, json={"name": name, "entrypoint": "nevis_test_learners:nearest_mean"}
    )
    assert made.status_code == 201, made.text
    return made.json()["id"]


def _submit(api: TestClient, headers: dict[str, str], learner: int, *, stream: str = "tiny2", phase: str = "meta_test"):
    return api.post(
        "/v1/submissions",
        headers=headers,
        json={"learner_id": learner, "stream": stream, "phase": phase, "budget": {"trials": 1, "steps": 2}},
    )


def _fill(api: TestClient, headers: dict[str, str], learner: int) -> list[int]:
    made = [_submit(api, headers, learner) for _ in range(LIMIT)]
    assert [m.status_code for m in made] == [201] * LIMIT, [m.text for m in made]
    return [m.json()["id"] for m in made]


def _change(
    url: str, submission_id: int, *, status: str | None = None, age: timedelta | None = None, task_ran: bool = False
) -> None:
    """End a submission (``status``), move its creation back by ``age``, or record a task run
    of it (its first task started), as the scheduler and worker would."""
    engine = make_engine(url)
    try:
        with transaction(session_factory(engine)) as session:
            submission = session.get(Submission, submission_id)
            if status is not None:
                submission.status, submission.finished_at = status, utcnow()
            if age is not None:
                submission.created_at = utcnow() - age
            if task_ran:
                task = session.scalar(
                    select(StreamTask)
                    .where(StreamTask.stream_version_id == submission.stream_version_id)
                    .order_by(StreamTask.order)
                )
                session.add(
                    TaskRun(
                        submission_id=submission_id,
                        stream_task_id=task.id,
                        status="failed",
                        started_at=utcnow(),
                        finished_at=utcnow(),
                    )
                )
    finally:
        engine.dispose()


def test_the_next_meta_test_submission_is_refused_with_the_limit_and_retry_after(api, tokens):
    alice = tokens.auth("alice")
    learner = _learner(api, alice, "nm-alice")
    _fill(api, alice, learner)
    refused = _submit(api, alice, learner)
    assert refused.status_code == 429, refused.text
    problem = refused.json()
    assert (problem["type"], problem["field"]) == ("urn:nevis:problem:quota-exceeded", "quota.meta_test")
    for words in (
        f"has used {LIMIT} of {LIMIT} meta-test submissions",
        "learner 'nm-alice'",
        "stream 'tiny2' version 'test-1'",
        "per 7 days",
        "NEVIS_META_TEST_QUOTA",
        "the next is allowed at",
    ):
        assert words in problem["detail"], (words, problem["detail"])
    assert WINDOW_S - 120 <= int(refused.headers["retry-after"]) <= WINDOW_S + 1
    assert refused.headers["content-type"].startswith("application/problem+json")


def test_meta_train_other_learners_streams_and_users_are_not_limited(api, tokens, capped):
    alice = tokens.auth("alice")
    learner = _learner(api, alice, "nm-alice")
    _fill(api, alice, learner)
    assert _submit(api, alice, learner).status_code == 429
    assert _submit(api, alice, learner, phase="meta_train").status_code == 201  # unlimited
    assert _submit(api, alice, learner, phase="meta_train").status_code == 201
    assert _submit(api, alice, _learner(api, alice, "nm-alice-2")).status_code == 201  # another learner
    assert _submit(api, alice, learner, stream="tiny3").status_code == 201  # another stream version
    # A new version of the same stream is another stream version: its own quota.
    manifest = capped.streams_dir / "tiny2.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "version": "test-2"}))
    newer = _submit(api, alice, learner)
    assert newer.status_code == 201 and newer.json()["stream"]["version"] == "test-2"
    # Another user's meta-test submissions of the same learner row are that user's (an admin
    # may submit any learner): alice's do not count for it, nor its for alice.
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "version": "test-1"}))
    assert _submit(api, tokens.auth("admin"), learner).status_code == 201
    assert _submit(api, alice, learner).status_code == 429


def test_what_counts_started_runs_do_unstarted_ends_and_old_ones_do_not(api, tokens, capped):
    alice, url = tokens.auth("alice"), capped.database_url
    learner = _learner(api, alice, "nm-alice")
    first, second = _fill(api, alice, learner)
    # Cancelled before any task ran: it never evaluated, so it stops counting.
    assert api.post(f"/v1/submissions/{first}/cancel", headers=alice).status_code == 200
    third = _submit(api, alice, learner)
    assert third.status_code == 201
    # Failed before any task ran (launches refused): does not count either.
    _change(url, second, status="failed")
    fourth = _submit(api, alice, learner)
    assert fourth.status_code == 201
    # Failed or cancelled after a task ran: it evaluated, it counts.
    _change(url, third.json()["id"], status="failed", task_ran=True)
    _change(url, fourth.json()["id"], status="cancelled", task_ran=True)
    assert _submit(api, alice, learner).status_code == 429
    # Older than the window: no longer counted.
    _change(url, third.json()["id"], age=timedelta(days=DAYS, minutes=1))
    assert _submit(api, alice, learner).status_code == 201
    assert _submit(api, alice, learner).status_code == 429


def test_a_run_stopped_by_its_cap_counts_like_a_finished_one(api, tokens, capped):
    """``stopped`` (its FLOP or wall-time cap ended it after a committed task) spent the
    evaluation: it counts in the meta-test quota for good, and no longer as open."""
    alice, url = tokens.auth("alice"), capped.database_url
    learner = _learner(api, alice, "nm-alice")
    first, second = _fill(api, alice, learner)
    _change(url, first, status="stopped", task_ran=True)
    _change(url, second, status="stopped", task_ran=True)
    assert _submit(api, alice, learner).status_code == 429
    body = api.get("/v1/users/me/quota", headers=alice).json()
    assert body["concurrent"]["used"] == 0 and body["meta_test"][0]["use"]["used"] == LIMIT


def test_retry_after_is_until_the_oldest_counted_one_leaves_the_window(api, tokens, capped):
    alice = tokens.auth("alice")
    learner = _learner(api, alice, "nm-alice")
    older, _ = _fill(api, alice, learner)
    _change(capped.database_url, older, age=timedelta(days=DAYS - 1))
    refused = _submit(api, alice, learner)
    assert refused.status_code == 429
    assert 86_400 - 120 <= int(refused.headers["retry-after"]) <= 86_401


def test_the_quota_endpoint_reports_each_quota_for_the_caller_only(api, tokens):
    alice, bob = tokens.auth("alice"), tokens.auth("bob")
    learner = _learner(api, alice, "nm-alice")
    _fill(api, alice, learner)
    _submit(api, alice, learner, phase="meta_train")
    mine = api.get("/v1/users/me/quota", headers=alice)
    assert mine.status_code == 200, mine.text
    body = mine.json()
    assert (body["user"], body["meta_test_limit"], body["meta_test_window_days"]) == ("alice", LIMIT, DAYS)
    assert body["concurrent"] == {"used": LIMIT + 1, "limit": 50}
    assert (body["daily"]["used"], body["daily"]["limit"], body["daily"]["next_allowed_at"]) == (LIMIT + 1, 100, None)
    (pair,) = body["meta_test"]  # the meta-train submission is not listed
    assert pair["learner"] == {"id": learner, "name": "nm-alice"}
    assert pair["stream"] == {"name": "tiny2", "version": "test-1"}
    assert (pair["use"]["used"], pair["use"]["limit"], pair["use"]["window_days"]) == (LIMIT, LIMIT, DAYS)
    assert pair["use"]["next_allowed_at"] is not None
    theirs = api.get("/v1/users/me/quota", headers=bob).json()
    assert (theirs["user"], theirs["meta_test"], theirs["concurrent"]["used"]) == ("bob", [], 0)
    assert api.get("/v1/users/me/quota").status_code == 401


def test_a_zero_quota_refuses_every_meta_test_submission(kit, settings_env, database_url, streams_dir, tokens):
    settings = kit.make_settings(database_url, settings_env, streams_dir, meta_test_quota=0)
    with TestClient(create_app(settings), raise_server_exceptions=False) as api:
        alice = tokens.auth("alice")
        learner = _learner(api, alice, "nm-alice")
        refused = _submit(api, alice, learner)
        assert refused.status_code == 429 and refused.json()["field"] == "quota.meta_test"
        assert "turned off" in refused.json()["detail"] and "retry-after" not in refused.headers
        assert _submit(api, alice, learner, phase="meta_train").status_code == 201


def test_the_cli_shows_a_user_s_quota(api, tokens, capped, monkeypatch):
    from typer.testing import CliRunner

    from services.cli.main import app
    from services.coordinator.common.config import get_coordinator_settings

    alice = tokens.auth("alice")
    _fill(api, alice, _learner(api, alice, "nm-alice"))
    for name, value in {
        "NEVIS_DATABASE_URL": capped.database_url,
        "NEVIS_META_TEST_QUOTA": str(LIMIT),
        "NEVIS_META_TEST_QUOTA_DAYS": str(DAYS),
    }.items():
        monkeypatch.setenv(name, value)
    get_coordinator_settings.cache_clear()
    try:
        shown = CliRunner().invoke(app, ["users", "quota", "alice"], env={"COLUMNS": "200"})
    finally:
        get_coordinator_settings.cache_clear()
    assert shown.exit_code == 0, shown.output
    assert f"at most {LIMIT} per learner and stream version in 7 days" in shown.stdout
    assert "nm-alice" in shown.stdout and "tiny2" in shown.stdout and "test-1" in shown.stdout
    assert "2 of 2 queued or running" in shown.stdout


@pytest.mark.parametrize("path", ["/v1/leaderboard", "/v1/leaderboard/front"])
def test_leaderboards_rank_meta_test_runs_only(api, path):
    assert api.get(f"{path}?phase=meta_test").status_code == 200
    refused = api.get(f"{path}?phase=meta_train")
    assert refused.status_code == 422 and refused.json()["field"] == "phase"
    assert "meta-test runs only" in refused.json()["detail"]
