"""Rulesets through the API (issue 50): a submission names its ruleset (default ``open``), the
answer and the list show it, a ruleset's rules are checked at the door (an unknown name, a
search under ``self-tuning``: 422 naming the field), and meta-test submissions per user and
ruleset are capped (429 naming the cap and when it resets) while meta-train is not.

Run on SQLite and PostgreSQL (the ``database_url`` fixture).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from services.coordinator.app import create_app
from services.coordinator.common.config import CoordinatorSettings

LIMIT, DAYS = 2, 7.0


@pytest.fixture
def capped(kit, settings_env, database_url, streams_dir, tokens) -> CoordinatorSettings:
    return kit.make_settings(
        database_url,
        settings_env,
        streams_dir,
        meta_test_quota=50,
        meta_test_ruleset_quota=LIMIT,
        meta_test_ruleset_quota_days=DAYS,
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


def _submit(
    api: TestClient,
    headers: dict[str, str],
    learner: int,
    *,
    ruleset: str | None,
    phase: str = "meta_test",
    budget: dict | None = None,
):
    body = {"learner_id": learner, "stream": "tiny2", "phase": phase, "budget": budget or {"steps": 2}}
    if ruleset is not None:
        body["ruleset"] = ruleset
    return api.post("/v1/submissions", headers=headers, json=body)


def test_a_submission_names_its_ruleset_and_the_api_shows_it(api, tokens):
    alice = tokens.auth("alice")
    learner = _learner(api, alice, "nm-alice")
    default = _submit(api, alice, learner, ruleset=None)
    assert default.status_code == 201 and default.json()["ruleset"] == "open"
    tier = _submit(api, alice, learner, ruleset="budget-5e9-total-2e10")
    assert tier.status_code == 201, tier.text
    assert tier.json()["ruleset"] == "budget-5e9-total-2e10"
    assert tier.json()["budget"]["flop_cap"] == 2e10  # the tier's run total, enforced as the run's cap
    listed = api.get("/v1/submissions", headers=alice).json()["items"]
    assert {s["id"]: s["ruleset"] for s in listed} == {
        default.json()["id"]: "open",
        tier.json()["id"]: tier.json()["ruleset"],
    }


def test_self_tuning_collapses_a_default_search_and_refuses_an_asked_one(api, tokens):
    alice = tokens.auth("alice")
    learner = _learner(api, alice, "nm-alice")
    collapsed = _submit(api, alice, learner, ruleset="self-tuning", phase="meta_train")
    assert collapsed.status_code == 201 and collapsed.json()["budget"]["trials"] == 1
    refused = _submit(api, alice, learner, ruleset="self-tuning", phase="meta_train", budget={"trials": 3, "steps": 2})
    assert refused.status_code == 422 and refused.json()["field"] == "budget.trials"
    assert "must be 1 under ruleset 'self-tuning'" in refused.json()["detail"]


@pytest.mark.parametrize(
    "name, words",
    [
        ("opne", "Did you mean 'open'?"),
        ("budget", "needs its cap"),
        ("budget-lots", "not a budget tier"),
        ("x" * 49, "at most 48"),
    ],
)
def test_an_unknown_ruleset_is_a_422_naming_the_field(api, tokens, name, words):
    alice = tokens.auth("alice")
    refused = _submit(api, alice, _learner(api, alice, "nm-alice"), ruleset=name)
    assert refused.status_code == 422, refused.text
    assert refused.json()["field"].endswith("ruleset") and words in refused.text


def test_meta_test_submissions_per_ruleset_are_capped_and_meta_train_is_not(api, tokens):
    alice = tokens.auth("alice")
    first, second = _learner(api, alice, "nm-a"), _learner(api, alice, "nm-b")
    assert [_submit(api, alice, lid, ruleset="budget-1e12").status_code for lid in (first, second)] == [201, 201]
    refused = _submit(api, alice, _learner(api, alice, "nm-c"), ruleset="budget-1e12")
    assert refused.status_code == 429, refused.text
    problem = refused.json()
    assert problem["field"] == "quota.meta_test_ruleset"
    for words in (
        f"used {LIMIT} of {LIMIT} meta-test submissions under ruleset 'budget-1e12'",
        "per 7 days",
        "NEVIS_META_TEST_RULESET_QUOTA",
        "the cap resets for one more at",
    ):
        assert words in problem["detail"], (words, problem["detail"])
    assert int(refused.headers["retry-after"]) > DAYS * 86_400 - 120
    shown = api.get("/v1/users/me/quota", headers=alice).json()["meta_test_by_ruleset"]  # what is enforced is shown
    assert (shown["budget-1e12"]["used"], shown["budget-1e12"]["limit"], shown["budget-1e12"]["window_days"]) == (
        LIMIT,
        LIMIT,
        DAYS,
    )
    assert shown["budget-1e12"]["next_allowed_at"] is not None
    assert _submit(api, alice, first, ruleset="budget-1e12", phase="meta_train").status_code == 201
    assert _submit(api, alice, first, ruleset="open").status_code == 201  # another ruleset: its own cap
    assert _submit(api, tokens.auth("admin"), first, ruleset="budget-1e12").status_code == 201  # another user


def test_each_ruleset_has_its_own_leaderboard(api, tokens):
    alice = tokens.auth("alice")
    learner = _learner(api, alice, "nm-alice")
    opened = _submit(api, alice, learner, ruleset=None).json()["id"]
    tiered = _submit(api, alice, learner, ruleset="budget-1e12").json()["id"]
    default = api.get("/v1/leaderboard", params={"stream": "tiny2"}).json()
    assert default["ruleset"] == "open" and [r["submission_id"] for r in default["items"]] == [opened]
    assert default["rulesets"] == ["open", "budget-1e12"]
    board = api.get("/v1/leaderboard", params={"stream": "tiny2", "ruleset": "budget-1e12"}).json()
    assert [(r["submission_id"], r["ruleset"]) for r in board["items"]] == [(tiered, "budget-1e12")]
    assert board["total"] == 1 and board["ruleset"] == "budget-1e12"
    front = api.get("/v1/leaderboard/front", params={"stream": "tiny2", "ruleset": "self-tuning"}).json()
    assert front["ruleset"] == "self-tuning" and front["points"] == []
    refused = api.get("/v1/leaderboard", params={"stream": "tiny2", "ruleset": "budgte-1e12"})
    assert refused.status_code == 422 and "ruleset" in refused.text
