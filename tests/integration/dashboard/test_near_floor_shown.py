"""A submission a trial of which counted just over its floor (issue 44, finding 5: the
floor-topping learner) is marked near-floor wherever its numbers are shown: the leaderboard
API and page, the submission API and page, and ``nevis results``; an estimated CPU time is
shown as such."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.dashboard.server import create_server_app
from services.store.db import transaction
from tests.support.board_marks import board_row, mark_first_result, owner_auth


def test_a_near_floor_submission_is_marked_where_its_numbers_show(seed_board, database_url, monkeypatch):
    settings, sessions, stream = seed_board(submissions=3, tasks=3, seed=7)
    marked, honest = stream.submission_ids[0], stream.submission_ids[1]
    with transaction(sessions) as session:
        mark_first_result(session, marked, flops_near_floor=True, cpu_estimated=True)
        auth = owner_auth(session, [marked, honest])
    with TestClient(create_server_app(settings), raise_server_exceptions=False) as client:
        rows = {r["submission_id"]: r for r in client.get("/v1/leaderboard", params={"limit": 100}).json()["items"]}
        assert rows[marked]["near_floor"] and not rows[honest]["near_floor"]
        page = client.get("/").text
        assert ">near floor</span>" in board_row(page, marked)
        assert ">near floor</span>" not in board_row(page, honest)
        detail = client.get(f"/v1/submissions/{marked}", headers=auth).json()
        assert (detail["near_floor"], detail["near_floor_tasks"]) == (True, 1)
        assert [(t["flops_near_floor"], t["cpu_estimated"]) for t in detail["tasks"]].count((True, True)) == 1
        assert client.get(f"/v1/submissions/{honest}", headers=auth).json()["near_floor"] is False
        shown = client.get(f"/submissions/{marked}").text
        assert ">near floor</span>" in shown and ">est.</span>" in shown
        assert ">near floor</span>" not in client.get(f"/submissions/{honest}").text
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    cli = CliRunner()
    out = cli.invoke(app, ["results", str(marked)])
    assert out.exit_code == 0, out.output
    assert "near floor" in out.output and " est." in out.output
    assert "near floor" not in cli.invoke(app, ["results", str(honest)]).output
    doc = json.loads(cli.invoke(app, ["results", str(marked), "--json"]).output)
    assert doc["near_floor"] and doc["near_floor_tasks"] == 1
    assert sum(t["flops_near_floor"] and t["cpu_estimated"] for t in doc["tasks"]) == 1
