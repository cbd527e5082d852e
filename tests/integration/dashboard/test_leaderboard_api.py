"""The leaderboard API and the dashboard's pages without a browser: ETags, caching that
follows the database, privacy setting, downloads, and hostile query strings."""

from __future__ import annotations

import csv
import io
import re

import pytest
from fastapi.testclient import TestClient

from services.coordinator.crud import users
from services.dashboard.server import create_server_app
from services.store.db import transaction


@pytest.fixture
def seeded(seed_board):
    return seed_board(submissions=60, tasks=6, seed=1)


def test_pages_of_the_api_carry_etags_and_answer_304(seeded):
    settings, _, stream = seeded
    with TestClient(create_server_app(settings)) as client:
        first = client.get("/v1/leaderboard", params={"limit": 20})
        body = first.json()
        assert (body["stream"], body["version"], body["total"], len(body["items"])) == (
            stream.stream,
            stream.version,
            60,
            20,
        )
        assert [item["rank"] for item in body["items"]] == list(range(1, 21))
        assert first.headers["cache-control"].startswith("public") and first.headers["etag"]
        again = client.get("/v1/leaderboard", params={"limit": 20}, headers={"If-None-Match": first.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
        second = client.get("/v1/leaderboard", params={"limit": 20, "offset": 20}).json()
        assert [item["rank"] for item in second["items"]] == list(range(21, 41))
        front = client.get("/v1/leaderboard/front").json()["points"]
        assert len(front) == 60 and any(p["on_front"] for p in front)


def test_a_private_leaderboard_needs_a_token(seeded):
    settings, sessions, _ = seeded
    with transaction(sessions) as session:
        _, secret = users.create_token(
            session, user=users.create_user(session, name="reader", role="submitter"), label="t"
        )
    with TestClient(
        create_server_app(settings.model_copy(update={"dashboard_public": False})), raise_server_exceptions=False
    ) as client:
        assert client.get("/v1/leaderboard").status_code == 401
        assert client.get("/").status_code == 401
        ok = client.get("/v1/leaderboard", headers={"Authorization": f"Bearer {secret}"})
        assert ok.status_code == 200 and ok.headers["cache-control"].startswith("private")


def test_csv_downloads_match_the_pages_and_defuse_formulas(seeded):
    settings, _, stream = seeded
    with TestClient(create_server_app(settings)) as client:
        rows = list(csv.DictReader(io.StringIO(client.get("/leaderboard.csv", params={"sort": "cflop"}).text)))
        api = client.get("/v1/leaderboard", params={"sort": "cflop", "limit": 25}).json()["items"]
        assert [int(r["submission_id"]) for r in rows] == [i["submission_id"] for i in api]
        tasks = client.get(f"/submissions/{stream.submission_ids[0]}/tasks.csv")
        assert tasks.headers["content-disposition"].startswith("attachment") and len(tasks.text.splitlines()) == 7
    from services.dashboard.views import to_csv

    assert to_csv([{"learner": "=HYPERLINK(1)"}], ["learner"]).splitlines()[1] == "'=HYPERLINK(1)"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/leaderboard?limit=0",
        "/v1/leaderboard?limit=101",
        "/v1/leaderboard?sort=drop",
        "/v1/leaderboard?offset=-1",
        "/v1/leaderboard?since=2026-01-01T00:00:00",
        "/v1/leaderboard?stream=" + "x" * 200,
        "/?page=0",
        "/compare?ids=1;2",
        "/submissions/0",
        "/submissions/99999999999",
        "/static/..%2Fpages.py",
    ],
)
def test_hostile_queries_are_4xx(seeded, path):
    settings, _, _ = seeded
    with TestClient(create_server_app(settings), raise_server_exceptions=False) as client:
        assert 400 <= client.get(path).status_code < 500


def test_pages_render_with_their_data(seeded):
    settings, _, stream = seeded
    with TestClient(create_server_app(settings)) as client:
        board = client.get("/").text
        assert board.count("data-submission=") == 25 and 'id="pareto"' in board
        page = client.get(f"/submissions/{stream.submission_ids[0]}").text
        assert page.count('<tr class="phase-') == 6 and 'id="regret"' in page  # Indep runs exist
        assert client.get("/static/plotly.min.js").headers["content-type"].startswith("text/javascript")
        assert client.get(f"/compare?ids={stream.submission_ids[0]},{stream.submission_ids[1]}").status_code == 200


FLOOR_TITLE = "some trial's FLOP count was below what its measured CPU time implies; the harness charged a floor"


def _row(html: str, submission_id: int) -> str:
    """The leaderboard table's row of ``submission_id``, as rendered."""
    return re.search(rf'<tr data-submission="{submission_id}">(.*?)</tr>', html, re.S).group(1)


def test_cpu_seconds_and_the_floor_mark_follow_the_database(seeded, measured_run):
    """Unmeasured rows show CPU time as unknown; a run charged the floor is marked on cFLOP in the
    API, the pages and the downloads, as soon as it commits (the cached answers follow)."""
    settings, sessions, stream = seeded
    with TestClient(create_server_app(settings)) as client:
        before = client.get("/v1/leaderboard", params={"limit": 5}).json()["items"]
        assert all(i["cpu_seconds"] is None and i["flops_floored"] is False for i in before)
        board = client.get("/").text
        assert ">CPU s</th>" in board and "badge-floor" not in board
        assert "unknown" in _row(board, before[0]["submission_id"]) and ">0.0<" not in board
        with transaction(sessions) as session:
            floored = measured_run(
                session,
                stream=stream.stream,
                version=stream.version,
                error=0.0,
                cpu={1: (2.0, False), 6: (1234.5, True)},
            )
        after = client.get("/v1/leaderboard", params={"limit": 5}).json()["items"]
        assert (after[0]["submission_id"], after[0]["cpu_seconds"], after[0]["flops_floored"]) == (
            floored,
            1236.5,
            True,
        )
        row = _row(client.get("/").text, floored)
        assert f'title="{FLOOR_TITLE}">floor</span>' in row and "1,236.5" in row
        page = client.get(f"/submissions/{floored}").text
        assert page.count(f'title="{FLOOR_TITLE}"') == 2  # the run's cFLOP and its task 6
        assert re.search(r'id="cpu-seconds">1,236.5<', page) and page.count("cpu-unknown") == 4  # tasks 2-5
        tasks = client.get(f"/submissions/{floored}/tasks.json").json()["tasks"]
        assert [(t["cpu_seconds"], t["flops_floored"]) for t in tasks] == [
            (2.0, False),
            *[(None, False)] * 4,
            (1234.5, True),
        ]
        rows = {int(r["submission_id"]): r for r in csv.DictReader(io.StringIO(client.get("/leaderboard.csv").text))}
        assert (rows[floored]["cpu_seconds"], rows[floored]["flops_floored"]) == ("1236.5", "True")
        assert rows[before[0]["submission_id"]]["cpu_seconds"] == ""  # unknown, not 0
        compare = client.get(f"/compare?ids={floored},{before[0]['submission_id']}").text
        assert compare.count(f'title="{FLOOR_TITLE}"') == 1 and "CPU s 1,236.5" in compare
