"""The operator's public-code ranking (issue 44, public labels): under
``NEVIS_LEADERBOARD_CODE=public`` the default board, its front, CSV and page rank only rows whose
code is public (a baseline, or a code_url given); ``?code=any`` ranks every row again."""

from __future__ import annotations

import csv
import io
import re

from fastapi.testclient import TestClient
from sqlalchemy import update

from services.dashboard.server import create_server_app
from services.store.db import transaction
from services.store.db.models import Submission


def test_the_public_code_setting_ranks_only_rows_whose_code_is_public(seed_board):
    settings, sessions, stream = seed_board(submissions=6, tasks=3, seed=4)
    published = stream.submission_ids[:2]
    with transaction(sessions) as session:
        session.execute(
            update(Submission).where(Submission.id.in_(published)).values(code_url="https://example.org/learner")
        )
    public_only = settings.model_copy(update={"leaderboard_code": "public"})
    with TestClient(create_server_app(settings), raise_server_exceptions=False) as client:
        everyone = client.get("/v1/leaderboard", params={"limit": 100}).json()
        assert everyone["code"] == "any" and everyone["total"] == len(stream.submission_ids)
    public = {r["submission_id"] for r in everyone["items"] if r["code_public"]}
    assert set(published) <= public < set(stream.submission_ids)  # some rows are hidden by the setting
    with TestClient(create_server_app(public_only), raise_server_exceptions=False) as client:
        board = client.get("/v1/leaderboard", params={"limit": 100}).json()
        assert board["code"] == "public"
        assert {r["submission_id"] for r in board["items"]} == public
        assert sorted(r["rank"] for r in board["items"] if r["rank"] is not None) == list(
            range(1, 1 + sum(r["rank"] is not None for r in board["items"]))
        )  # ranked among themselves
        front = client.get("/v1/leaderboard/front").json()
        assert front["code"] == "public" and {p["submission_id"] for p in front["points"]} <= public
        every = client.get("/v1/leaderboard", params={"code": "any", "limit": 100}).json()
        assert {r["submission_id"] for r in every["items"]} == set(stream.submission_ids)
        assert client.get("/v1/leaderboard", params={"code": "secret"}).status_code == 422
        page = client.get("/").text
        assert {int(i) for i in re.findall(r'data-submission="(\d+)"', page)} == public
        assert "only submissions whose code is public" in page
        page_all = client.get("/", params={"code": "any"}).text
        assert {int(i) for i in re.findall(r'data-submission="(\d+)"', page_all)} == set(stream.submission_ids)
        rows = list(csv.DictReader(io.StringIO(client.get("/leaderboard.csv").text)))
        assert {int(r["submission_id"]) for r in rows} == public
