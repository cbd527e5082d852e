"""A submission whose meta-test answers jumped on shifted copies of test images (issue 44's
consistency check, workers/trainer/consistency.py) is marked wherever its numbers are shown:
the leaderboard API and page, the submission API and page, and ``nevis results``."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.dashboard.server import create_server_app
from services.store.db import transaction
from tests.support.board_marks import board_row, mark_first_result, owner_auth


def test_an_inconsistent_submission_is_marked_on_every_page_that_shows_its_numbers(
    seed_board, database_url, settings_env, monkeypatch
):
    settings, sessions, stream = seed_board(submissions=4, tasks=3, seed=5)
    marked, honest = stream.submission_ids[0], stream.submission_ids[1]
    with transaction(sessions) as session:
        mark_first_result(session, marked, phase="meta_test", inconsistent=True, consistency_jump=0.8)
        auth = owner_auth(session, [marked, honest])
    with TestClient(create_server_app(settings), raise_server_exceptions=False) as client:
        rows = {r["submission_id"]: r for r in client.get("/v1/leaderboard", params={"limit": 100}).json()["items"]}
        assert rows[marked]["inconsistent"] and not rows[honest]["inconsistent"]
        page = client.get("/").text
        assert ">inconsistent</span>" in board_row(page, marked)
        assert ">inconsistent</span>" not in board_row(page, honest)
        detail = client.get(f"/v1/submissions/{marked}", headers=auth).json()
        assert (detail["inconsistent"], detail["inconsistent_tasks"]) == (True, 1)
        assert [t["consistency_jump"] for t in detail["tasks"] if t["inconsistent"]] == [0.8]
        assert client.get(f"/v1/submissions/{honest}", headers=auth).json()["inconsistent"] is False
        assert 'id="inconsistent"' in client.get(f"/submissions/{marked}").text
        assert 'id="inconsistent"' not in client.get(f"/submissions/{honest}").text
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    cli = CliRunner()
    shown = cli.invoke(app, ["results", str(marked)])
    assert shown.exit_code == 0, shown.output
    assert "inconsistent: on 1 task(s)" in shown.output and "INCONSISTENT" in shown.output
    assert "inconsistent" not in cli.invoke(app, ["results", str(honest)]).output.lower()
    doc = json.loads(cli.invoke(app, ["results", str(marked), "--json"]).output)
    assert doc["inconsistent"] and doc["inconsistent_tasks"] == 1
    assert [t["consistency_jump"] for t in doc["tasks"] if t["inconsistent"]] == [0.8]
