"""Each ruleset's own board on the dashboard (issue 50): a switcher lists the rulesets of the
stream version, a board shows only its ruleset's rows (the CSV too), and a submission's page
names its ruleset; performance profiles can be read within one ruleset."""

from __future__ import annotations

import csv
import io
import re

from fastapi.testclient import TestClient
from sqlalchemy import update

from services.dashboard.server import create_server_app
from services.store.db import transaction
from services.store.db.models import Submission


def test_the_dashboard_switches_between_ruleset_boards(seed_board):
    settings, sessions, stream = seed_board(submissions=6, tasks=3, seed=2)
    tiered = stream.submission_ids[:2]
    with transaction(sessions) as session:
        session.execute(update(Submission).where(Submission.id.in_(tiered)).values(ruleset="budget-1e12"))
    with TestClient(create_server_app(settings), raise_server_exceptions=False) as client:
        opened = client.get("/").text
        switcher = re.search(r'<nav class="rulesets".*?</nav>', opened, re.S).group(0)
        assert re.findall(r">([\w.+-]+)</a>", switcher) == ["open", "budget-1e12"]
        assert 'aria-current="page">open</a>' in switcher
        shown = {int(i) for i in re.findall(r'data-submission="(\d+)"', opened)}
        assert shown == set(stream.submission_ids) - set(tiered)
        board = client.get("/", params={"ruleset": "budget-1e12"}).text
        assert {int(i) for i in re.findall(r'data-submission="(\d+)"', board)} == set(tiered)
        assert '<strong id="board-ruleset">budget-1e12</strong>' in board
        rows = list(csv.DictReader(io.StringIO(client.get("/leaderboard.csv", params={"ruleset": "budget-1e12"}).text)))
        assert {(int(r["submission_id"]), r["ruleset"]) for r in rows} == {(i, "budget-1e12") for i in tiered}
        page = client.get(f"/submissions/{tiered[0]}").text
        assert re.search(r'<dd id="ruleset"[^>]*>budget-1e12</dd>', page)
        assert client.get("/", params={"ruleset": "budget-"}).status_code == 422
        profiled = client.get("/v1/leaderboard/profiles", params={"ruleset": "budget-1e12"}).json()
        assert profiled["ruleset"] == "budget-1e12"
        assert {r["submission_id"] for r in profiled["profiles"]["rows"]} == set(tiered)  # within the ruleset
        assert (
            '<strong id="profiles-ruleset">budget-1e12</strong>'
            in client.get("/profiles", params={"ruleset": "budget-1e12"}).text
        )
        assert "ruleset=budget-1e12" in re.search(r'id="profiles-link" href="([^"]+)"', board).group(1)
        everyone = client.get("/v1/leaderboard/profiles").json()["profiles"]["rows"]
        assert {r["submission_id"] for r in everyone} == set(stream.submission_ids)
