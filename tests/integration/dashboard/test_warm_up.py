"""The server's warm-up at start (issue 48): the first reads are made, and their answers kept,
before the first request; a start on an empty database, or one whose reads fail, still serves."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from services.coordinator import warm_up
from services.coordinator.api import answers
from services.coordinator.api.answers import answer_cache
from services.coordinator.api.routes import leaderboard as leaderboard_route
from services.coordinator.common.config import CoordinatorSettings
from services.dashboard.server import create_server_app
from services.store.runs import leaderboard as board_store


def test_a_start_renders_the_first_reads_before_any_request(seed_board, monkeypatch):
    settings, _, _ = seed_board(submissions=20, tasks=4, seed=3)
    renders = []
    real = board_store.leaderboard  # what the route imported

    def counted(*args, **kwargs):
        renders.append(kwargs.get("offset"))
        return real(*args, **kwargs)

    monkeypatch.setattr(leaderboard_route, "leaderboard", counted)
    monkeypatch.setattr(warm_up, "WAIT_S", 300.0)  # the start waits for it (however loaded the machine)
    app = create_server_app(settings, warm_up=True)
    with TestClient(app) as client:
        record = app.state.warm_up
        assert record.done and record.error is None and renders == [0]  # before any request
        cache = answer_cache(app)
        kept = cache.shared(("/v1/leaderboard", b""))
        assert kept is not None and cache.shared(("/v1/leaderboard/front", b"")) is not None
        assert cache.shared(("/", b"")) is not None
        top = kept.body and client.get("/v1/leaderboard?limit=50&offset=0").json()["items"][0]["submission_id"]
        assert renders == [0]  # the first reader's query (another query string) was not rendered again
        assert record.statuses == {
            "/v1/leaderboard": 200,
            "/v1/leaderboard/front": 200,
            "/": 200,
            f"/submissions/{top}": 200,
        }
        assert cache.shared((f"/submissions/{top}", b"")) is not None
        client.get("/v1/leaderboard?limit=50&offset=50")
        assert renders == [0, 50]  # a new query still renders


def test_without_a_warm_up_the_first_reader_renders(seed_board):
    settings, _, _ = seed_board(submissions=5, tasks=2, seed=4)
    app = create_server_app(settings)
    with TestClient(app) as client:
        assert app.state.warm_up is None and answer_cache(app).shared(("/v1/leaderboard", b"")) is None
        assert client.get("/v1/leaderboard").status_code == 200


def test_a_start_on_an_empty_database_warms_and_serves(database_url, tmp_path, monkeypatch):
    monkeypatch.setattr(answers, "FINGERPRINT_TTL_S", 0.0)
    monkeypatch.setattr(warm_up, "WAIT_S", 300.0)
    app = create_server_app(CoordinatorSettings(data_dir=tmp_path, database_url=database_url), warm_up=True)
    with TestClient(app) as client:
        record = app.state.warm_up
        assert record.done and record.error is None
        assert record.statuses == {
            "/v1/leaderboard": 200,
            "/v1/leaderboard/front": 200,
            "/": 200,
            "/submissions/{top}": "skipped: the default leaderboard page is empty",
        }
        board = client.get("/v1/leaderboard")
        assert board.status_code == 200 and board.json()["items"] == [] and board.json()["total"] == 0


def test_a_warm_up_whose_reads_fail_never_fails_the_start(empty_database_url, tmp_path, monkeypatch):
    monkeypatch.setattr(warm_up, "WAIT_S", 300.0)
    app = create_server_app(CoordinatorSettings(data_dir=tmp_path, database_url=empty_database_url), warm_up=True)
    with TestClient(app, raise_server_exceptions=False) as client:  # a database without a schema
        record = app.state.warm_up
        assert record.done and record.statuses["/v1/leaderboard"] != 200
        assert client.get("/healthz").json() == {"status": "ok"}


def test_a_warm_up_longer_than_the_wait_goes_on_while_the_server_serves(database_url, tmp_path, monkeypatch):
    monkeypatch.setattr(warm_up, "WAIT_S", 0.0)  # the start does not wait at all
    app = create_server_app(CoordinatorSettings(data_dir=tmp_path, database_url=database_url), warm_up=True)
    with TestClient(app) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        deadline = time.monotonic() + 120
        while not app.state.warm_up.done and time.monotonic() < deadline:
            client.get("/healthz")  # the warm-up runs on the client's event loop, between requests
            time.sleep(0.05)
        assert app.state.warm_up.done and app.state.warm_up.statuses["/v1/leaderboard"] == 200
