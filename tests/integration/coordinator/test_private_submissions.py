"""Private submissions (issue 11): shown on the leaderboard, the front and the dashboard's
pages only to their owner and admins; a 404 worded as for a missing id to everyone else; and
no cached answer of an owner's is ever served to another reader."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from services.coordinator.api import answers
from services.coordinator.crud.submission_create import SubmissionRequest
from services.core.budget import RunBudget
from services.dashboard.server import create_server_app

LEARNER = {"entrypoint": "nevis_test_learners:nearest_mean"}
MISSING = 10**9
DETAIL_PAGES = (
    "/submissions/{id}",
    "/submissions/{id}/tasks.csv",
    "/submissions/{id}/tasks.json",
    "/submissions/{id}/probes",
    "/submissions/{id}/probes.json",
    "/submissions/{id}/transfer.json",
)
API_DETAILS = ("/v1/submissions/{id}", "/v1/submissions/{id}/events", "/v1/submissions/{id}/probes")


@dataclass(frozen=True)
class Board:
    client: TestClient
    auth: dict[str, dict[str, str]]  # who -> headers ("anonymous": none)
    private: int  # alice's private submission
    public: int  # alice's public one
    others: int  # bob's public one


def _submit(client: TestClient, headers: dict[str, str], name: str, **extra) -> dict:
    learner = client.post("/v1/learners", json={**LEARNER, "name": name}, headers=headers)
    learner_id = (
        learner.json()["id"]
        if learner.status_code == 201
        else next(
            item["id"] for item in client.get("/v1/learners", headers=headers).json()["items"] if item["name"] == name
        )
    )
    created = client.post(
        "/v1/submissions",
        headers=headers,
        json={"learner_id": learner_id, "stream": "tiny2", "budget": {"trials": 1, "steps": 2}, **extra},
    )
    assert created.status_code == 201, created.text
    return created.json()


@pytest.fixture
def board(coord_settings, tokens, monkeypatch) -> Iterator[Board]:
    monkeypatch.setattr(answers, "FINGERPRINT_TTL_S", 0.0)  # see every change at once
    auth = {"anonymous": {}, **{who: tokens.auth(who) for who in ("alice", "bob", "admin")}}
    with TestClient(create_server_app(coord_settings), raise_server_exceptions=False) as client:
        private = _submit(client, auth["alice"], "nm-alice", visibility="private")
        public = _submit(client, auth["alice"], "nm-alice")
        others = _submit(client, auth["bob"], "nm-bob", visibility="public")
        assert (private["visibility"], public["visibility"], others["visibility"]) == ("private", "public", "public")
        yield Board(client, auth, private["id"], public["id"], others["id"])


def _rows(board: Board, who: str) -> dict[int, str]:
    response = board.client.get("/v1/leaderboard", headers=board.auth[who])
    assert response.status_code == 200, response.text
    return {item["submission_id"]: item["visibility"] for item in response.json()["items"]}


def _csv_rows(text: str) -> dict[int, str]:
    return {int(row["submission_id"]): row["visibility"] for row in csv.DictReader(io.StringIO(text))}


def _page_ids(html: str) -> set[int]:
    return {int(part.split('"', 1)[0]) for part in html.split('data-submission="')[1:]}


def test_a_private_submission_is_on_the_leaderboard_of_its_owner_and_admins_only(board):
    public = {board.public: "public", board.others: "public"}
    everyone = {**public, board.private: "private"}
    assert {who: _rows(board, who) for who in board.auth} == {
        "anonymous": public,
        "bob": public,
        "alice": everyone,
        "admin": everyone,
    }
    pages = {who: board.client.get("/", headers=headers).text for who, headers in board.auth.items()}
    assert _page_ids(pages["anonymous"]) == _page_ids(pages["bob"]) == set(public)
    assert _page_ids(pages["alice"]) == _page_ids(pages["admin"]) == set(everyone)
    assert "badge-private" in pages["alice"] and "badge-private" not in pages["anonymous"]
    downloads = {who: board.client.get("/leaderboard.csv", headers=headers).text for who, headers in board.auth.items()}
    assert {who: _csv_rows(text) for who, text in downloads.items()} == {
        "anonymous": public,
        "bob": public,
        "alice": everyone,
        "admin": everyone,
    }


def test_a_private_submissions_pages_are_404_to_others_as_if_it_did_not_exist(board):
    client = board.client
    for template in (*DETAIL_PAGES, "/compare?ids={id}", "/compare.csv?ids={pub},{id}"):
        for who in ("anonymous", "bob"):
            hidden = client.get(template.format(id=board.private, pub=board.public), headers=board.auth[who])
            missing = client.get(template.format(id=MISSING, pub=board.public), headers=board.auth[who])
            assert (hidden.status_code, missing.status_code) == (404, 404), (template, who)
            assert hidden.text == missing.text.replace(str(MISSING), str(board.private)), (template, who)
        for who in ("alice", "admin"):
            shown = client.get(template.format(id=board.private, pub=board.public), headers=board.auth[who])
            assert shown.status_code == 200, (template, who, shown.text)
        assert client.get(template.format(id=board.public, pub=board.others)).status_code == 200, template
    page = client.get(f"/submissions/{board.private}", headers=board.auth["alice"])
    assert "badge" in page.text and ">private<" in page.text
    assert page.headers["cache-control"] == "private, no-cache"
    for template in API_DETAILS:  # the /v1 routes: the owner's (or an admin's) only, always
        url = template.format(id=board.private)
        assert [client.get(url, headers=board.auth[who]).status_code for who in board.auth] == [401, 200, 404, 200]
    mine = client.get("/v1/submissions", headers=board.auth["alice"]).json()["items"]
    assert {item["id"]: item["visibility"] for item in mine} == {board.private: "private", board.public: "public"}


def test_the_owners_cached_answer_is_never_served_to_anyone_else(board):
    client = board.client
    mine = client.get("/v1/leaderboard", headers=board.auth["alice"])  # the owner asks first
    anonymous = client.get("/v1/leaderboard")
    bob = client.get("/v1/leaderboard", headers=board.auth["bob"])
    assert board.private in {i["submission_id"] for i in mine.json()["items"]}
    assert board.private not in {i["submission_id"] for i in anonymous.json()["items"]}
    assert mine.headers["cache-control"].startswith("private") and mine.headers["vary"] == "Authorization"
    assert anonymous.headers["cache-control"].startswith("public")
    # Readers without private rows share the anonymous answer; the owner's has its own ETag.
    assert bob.headers["etag"] == anonymous.headers["etag"] != mine.headers["etag"]
    again = client.get("/v1/leaderboard", headers={"If-None-Match": mine.headers["etag"]})
    assert again.status_code == 200 and board.private not in {i["submission_id"] for i in again.json()["items"]}
    assert (
        client.get(
            "/v1/leaderboard", headers={**board.auth["alice"], "If-None-Match": mine.headers["etag"]}
        ).status_code
        == 304
    )
    # The same for the dashboard's cached pages: the board and a submission's page.
    page = client.get("/", headers=board.auth["alice"])
    assert board.private in _page_ids(page.text) and page.headers["cache-control"] == "private, no-cache"
    assert board.private not in _page_ids(client.get("/").text)
    assert client.get(f"/submissions/{board.private}", headers=board.auth["alice"]).status_code == 200
    assert client.get(f"/submissions/{board.private}").status_code == 404


def test_a_bad_token_is_refused_even_on_a_public_leaderboard(board):
    bad = {"Authorization": "Bearer nvs_" + "x" * 40}
    assert board.client.get("/v1/leaderboard", headers=bad).status_code == 401
    assert board.client.get("/", headers=bad).status_code == 401
    assert board.client.get("/v1/leaderboard", headers={"Authorization": "Basic eDp5"}).status_code == 200


def test_an_invalid_visibility_is_422_naming_the_field(board):
    response = board.client.post(
        "/v1/submissions",
        headers=board.auth["alice"],
        json={"learner_id": 1, "stream": "tiny2", "visibility": "secret"},
    )
    problem = response.json()
    assert response.status_code == 422 and problem["field"] == "visibility", problem
    assert "'public' or 'private'" in problem["detail"]


def test_visibility_is_part_of_an_idempotent_request():
    """A key replays only the same request; stored keys of requests made before visibility
    existed (all public) still match theirs."""
    request = SubmissionRequest(learner_id=1, stream="tiny2", phase="meta_test", budget=RunBudget())
    before = json.dumps(
        {
            "learner_id": 1,
            "stream": "tiny2",
            "phase": "meta_test",
            "budget": RunBudget().to_dict(),
            "stream_version": None,
            "image_size": None,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    assert request.sha256() == hashlib.sha256(before.encode()).hexdigest()
    private = SubmissionRequest(
        learner_id=1, stream="tiny2", phase="meta_test", budget=RunBudget(), visibility="private"
    )
    assert private.sha256() != request.sha256()


def test_an_idempotent_replay_must_repeat_the_visibility(coord_settings, tokens):
    with TestClient(create_server_app(coord_settings), raise_server_exceptions=False) as client:
        alice = {**tokens.auth("alice"), "Idempotency-Key": "private-once"}
        first = _submit(client, alice, "nm-alice", visibility="private")
        replay = client.post(
            "/v1/submissions",
            headers=alice,
            json={
                "learner_id": first["learner"]["id"],
                "stream": "tiny2",
                "budget": {"trials": 1, "steps": 2},
                "visibility": "private",
            },
        )
        assert replay.status_code == 200 and replay.json()["id"] == first["id"]
        changed = client.post(
            "/v1/submissions",
            headers=alice,
            json={"learner_id": first["learner"]["id"], "stream": "tiny2", "budget": {"trials": 1, "steps": 2}},
        )
        assert changed.status_code == 409 and changed.json()["field"] == "Idempotency-Key"
