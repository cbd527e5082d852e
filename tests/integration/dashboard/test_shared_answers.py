"""The anonymous answers kept as sent (``SharedAnswers``): the same bytes, headers, ETag and 304
as the routes give, new bytes after a change, nothing kept for a token, a bad query or a
private leaderboard, and a first render run once for many readers who ask at once."""

from __future__ import annotations

import asyncio
import threading

import pytest
from fastapi.testclient import TestClient

from services.coordinator.api import answers
from services.coordinator.api.answers import AnswerCache, answer_cache
from services.coordinator.crud import users
from services.dashboard.server import create_server_app
from services.store.db import transaction
from services.store.db.models import Submission

VARYING = {"date", "server"}  # set by uvicorn per response, not by the app


@pytest.fixture
def seeded(seed_board):
    return seed_board(submissions=30, tasks=4, seed=2)


def _headers(response) -> list[tuple[str, str]]:
    return [(k, v) for k, v in response.headers.multi_items() if k not in VARYING]


def _requests(app, route: str) -> float:
    """How many requests the metrics counted for ``route`` (a template), any status."""
    return sum(
        sample.value
        for metric in app.state.metrics.requests.collect()
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels.get("route") == route
    )


def test_a_repeated_anonymous_read_gets_the_kept_bytes_headers_and_304(seeded):
    settings, _, _ = seeded
    app = create_server_app(settings)
    with TestClient(app) as client:
        first = client.get("/v1/leaderboard?limit=20&sort=cflop")
        kept = answer_cache(app).shared(("/v1/leaderboard", b"limit=20&sort=cflop"))
        assert first.status_code == 200 and kept is not None
        assert kept.body == first.content and kept.etag == first.headers["etag"]
        again = client.get("/v1/leaderboard?limit=20&sort=cflop")
        assert (again.status_code, again.content, _headers(again)) == (200, first.content, _headers(first))
        assert again.headers["cache-control"] == "public, max-age=5, must-revalidate"
        assert again.headers["vary"] == "Authorization" and again.headers["content-type"] == "application/json"
        # The 304 of the kept answer and the route's own (a query string not kept yet, same answer).
        kept_304 = client.get("/v1/leaderboard?limit=20&sort=cflop", headers={"If-None-Match": first.headers["etag"]})
        route_304 = client.get("/v1/leaderboard?sort=cflop&limit=20", headers={"If-None-Match": first.headers["etag"]})
        assert (kept_304.status_code, route_304.status_code) == (304, 304)
        assert kept_304.content == route_304.content == b""
        assert _headers(kept_304) == _headers(route_304)
        assert answer_cache(app).shared(("/v1/leaderboard", b"sort=cflop&limit=20")) is None  # a 304 is not kept
        other = client.get("/v1/leaderboard?limit=20&sort=cflop", headers={"If-None-Match": '"other", "tags"'})
        assert (other.status_code, other.content) == (200, first.content)
        # Answered before routing, still counted under the route's template.
        assert _requests(app, "/v1/leaderboard") == 5
        # The dashboard's pages are kept the same way.
        page = client.get("/?sort=E")
        assert answer_cache(app).shared(("/", b"sort=E")) is not None
        assert client.get("/?sort=E").text == page.text and page.headers["cache-control"] == "no-cache"


def test_a_change_in_the_database_replaces_the_kept_answer(seeded):
    settings, sessions, _ = seeded
    app = create_server_app(settings)
    with TestClient(app) as client:
        before = client.get("/v1/leaderboard")
        assert client.get("/v1/leaderboard").content == before.content  # from the kept bytes
        leader = before.json()["items"][0]["submission_id"]
        with transaction(sessions) as session:
            session.get(Submission, leader).status = "cancelled"
        after = client.get("/v1/leaderboard", headers={"If-None-Match": before.headers["etag"]})
        assert after.status_code == 200 and after.headers["etag"] != before.headers["etag"]
        assert after.json()["items"][0] == {**before.json()["items"][0], "status": "cancelled"}
        assert answer_cache(app).shared(("/v1/leaderboard", b"")).etag == after.headers["etag"]


def test_requests_the_routes_refuse_or_answer_for_someone_are_never_kept(seeded):
    settings, sessions, _ = seeded
    with transaction(sessions) as session:
        _, secret = users.create_token(
            session, user=users.create_user(session, name="reader", role="submitter"), label="t"
        )
    app = create_server_app(settings)
    with TestClient(app, raise_server_exceptions=False) as client:
        for _ in range(2):
            assert client.get("/v1/leaderboard?limit=0").status_code == 422
        assert answer_cache(app).shared(("/v1/leaderboard", b"limit=0")) is None
        mine = client.get("/v1/leaderboard?limit=7", headers={"Authorization": f"Bearer {secret}"})
        assert mine.status_code == 200 and answer_cache(app).shared(("/v1/leaderboard", b"limit=7")) is None
        anonymous = client.get("/v1/leaderboard?limit=7")
        assert answer_cache(app).shared(("/v1/leaderboard", b"limit=7")) is not None
        # With the anonymous answer kept, a token is still checked and a long If-None-Match still refused.
        assert (
            client.get("/v1/leaderboard?limit=7", headers={"Authorization": "Bearer nvs_" + "x" * 40}).status_code
            == 401
        )
        assert client.get("/v1/leaderboard?limit=7", headers={"If-None-Match": "x" * 1001}).status_code == 422
        assert (
            client.get("/v1/leaderboard?limit=7", headers={"Authorization": f"Bearer {secret}"}).content
            == anonymous.content
        )  # the reader has no private rows: the same view
    private = create_server_app(settings.model_copy(update={"dashboard_public": False}))
    with TestClient(private, raise_server_exceptions=False) as client:
        assert client.get("/v1/leaderboard").status_code == 401
        assert client.get("/v1/leaderboard", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
        assert client.get("/v1/leaderboard").status_code == 401  # the reader's answer is not everyone's
        assert answer_cache(private).shared(("/v1/leaderboard", b"")) is None


def test_readers_who_ask_at_once_wait_for_one_render(seeded, monkeypatch):
    _, sessions, _ = seeded
    monkeypatch.setattr(answers, "FINGERPRINT_TTL_S", 600.0)  # read once: no await before the render
    cache = AnswerCache(8)
    calls: list[int] = []
    release = threading.Event()

    def render(session) -> str:
        calls.append(1)
        release.wait(60)
        return "the answer"

    def broken(session) -> str:
        calls.append(1)
        release.wait(60)
        raise LookupError("render failed")

    async def readers(how) -> list:
        release.clear()
        await cache.fingerprint(sessions)
        tasks = [asyncio.ensure_future(cache.answer(sessions, ("k", how.__name__), how)) for _ in range(8)]
        await asyncio.sleep(0)  # each reader ran up to its first wait: the first one's render, or that render
        while not calls:
            await asyncio.sleep(0.01)
        release.set()
        return await asyncio.gather(*tasks, return_exceptions=True)

    assert asyncio.run(readers(render)) == ["the answer"] * 8 and len(calls) == 1
    calls.clear()
    failed = asyncio.run(readers(broken))
    assert len(calls) == 1 and all(isinstance(f, LookupError) for f in failed)
    calls.clear()
    assert asyncio.run(cache.answer(sessions, ("k", "render"), render)) == "the answer" and not calls  # cached
