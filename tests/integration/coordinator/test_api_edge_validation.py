"""Hostile input gets a 4xx, fast, never a 500 (issue 13), on SQLite and PostgreSQL.

- Integers in paths, queries and bodies are bounded to their INTEGER columns: a 422 naming
  the parameter, never a driver's overflow turned 500.
- Bodies are strict (``true`` is no id), finite (``1e309`` is no number), bounded (a
  megabyte string is a short 422), and timestamps carry a zone.
- A body above ``NEVIS_MAX_JSON_BYTES`` is a 413 before it is read or anyone authenticated.
- A database that is down, locked or read-only is a 503 with ``Retry-After``, and /readyz
  says so when the database refuses writes.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from services.coordinator.api.middleware import BodyLimit
from services.coordinator.app import create_app
from services.store.db.engine import sqlite_path

BIG = 2**63
LEARNER = {"name": "edge", "entrypoint": "nevis_test_learners:nearest_mean"}
IDS = [BIG, 2**31, 10**30, -1, 0]


@pytest.fixture(scope="module")
def learner_id(shared_api) -> int:
    response = shared_api.client.post("/v1/learners", json=LEARNER, headers=shared_api.tokens.auth("alice"))
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _is_problem(response, status: int, field: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    if field is not None:
        assert body["field"] == field, body
    return body


# --- integers within their columns ----------------------------------------------------------

ROUTES = [
    ("get", "/v1/learners/{v}", "learner_id"),
    ("get", "/v1/submissions/{v}", "submission_id"),
    ("post", "/v1/submissions/{v}/cancel", "submission_id"),
    ("get", "/v1/submissions/{v}/events", "submission_id"),
    ("get", "/v1/submissions/{v}/probes", "submission_id"),
    ("delete", "/v1/tokens/{v}", "token_id"),
    ("get", "/v1/submissions?learner_id={v}", "learner_id"),
    ("get", "/v1/submissions?offset={v}", "offset"),
    ("get", "/v1/learners?offset={v}", "offset"),
    ("get", "/v1/submissions/1/events?after={v}", "after"),
    ("get", "/v1/submissions/1/probes?task={v}", "task"),
]


@pytest.mark.parametrize(
    ("method", "template", "field", "value"),
    [
        (*route, value)
        for route in ROUTES
        for value in IDS
        if not (value == 0 and route[2] in ("offset", "after"))  # 0 is a valid offset or cursor
    ],
)
def test_out_of_range_integers_in_paths_and_queries_are_422(shared_api, method, template, field, value):
    response = getattr(shared_api.client, method)(template.format(v=value), headers=shared_api.tokens.auth("admin"))
    problem = _is_problem(response, 422, field)
    assert field in problem["detail"]


@pytest.mark.parametrize(
    "url",
    [
        "/v1/learners/2147483647",
        "/v1/submissions/2147483647",
        "/v1/submissions/2147483647/events",
        "/v1/submissions/1/events?after=2147483647",
        "/v1/submissions?offset=2147483647&learner_id=2147483647",
        "/v1/learners?offset=2147483647",
    ],
)
def test_the_largest_ids_are_a_plain_404_or_an_empty_page(shared_api, url):
    response = shared_api.client.get(url, headers=shared_api.tokens.auth("admin"))
    assert response.status_code in (200, 404), response.text
    if response.status_code == 200 and "items" in response.json():
        assert response.json()["items"] == []


def test_a_5000_digit_id_is_422(shared_api):
    response = shared_api.client.get("/v1/learners/" + "9" * 5000, headers=shared_api.tokens.auth("admin"))
    _is_problem(response, 422, "learner_id")
    assert len(response.content) < 3000


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("/v1/submissions", {"learner_id": BIG, "stream": "tiny2"}, "learner_id"),
        ("/v1/submissions", {"learner_id": 2**31, "stream": "tiny2"}, "learner_id"),
        ("/v1/submissions", {"learner_id": -1, "stream": "tiny2"}, "learner_id"),
        ("/v1/submissions", {"learner_id": 1, "stream": "tiny2", "image_size": BIG}, "image_size"),
        ("/v1/users", {"name": "quota1", "max_concurrent": BIG}, "max_concurrent"),
        ("/v1/users", {"name": "quota2", "max_per_day": 2**31}, "max_per_day"),
        ("/v1/users", {"name": "quota3", "max_per_day": -1}, "max_per_day"),
    ],
)
def test_out_of_range_integers_in_bodies_are_422(shared_api, route, body, field):
    response = shared_api.client.post(route, json=body, headers=shared_api.tokens.auth("admin"))
    _is_problem(response, 422, field)


# --- strict types ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("/v1/submissions", {"learner_id": True, "stream": "tiny2"}, "learner_id"),
        ("/v1/submissions", {"learner_id": "1", "stream": "tiny2"}, "learner_id"),
        ("/v1/submissions", {"learner_id": 1.0, "stream": "tiny2"}, "learner_id"),
        ("/v1/submissions", {"learner_id": 1, "stream": "tiny2", "image_size": True}, "image_size"),
        ("/v1/users", {"name": "strict1", "max_concurrent": True}, "max_concurrent"),
        ("/v1/users", {"name": "strict2", "max_per_day": "5"}, "max_per_day"),
        ("/v1/learners", {**LEARNER, "name": "strict3", "resources": {"gpus": True}}, "resources.gpus"),
        ("/v1/learners", {**LEARNER, "name": "strict4", "resources": {"cpus": True}}, "resources.cpus"),
        ("/v1/learners", {**LEARNER, "name": "strict5", "resources": {"memory_mb": "4096"}}, "resources.memory_mb"),
    ],
)
def test_bodies_are_strict(shared_api, route, body, field):
    response = shared_api.client.post(route, json=body, headers=shared_api.tokens.auth("admin"))
    _is_problem(response, 422, field)


# --- expires_at ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expires_at", "words"),
    [
        ("2030-01-01T00:00:00", "time"),  # naive
        ((datetime.now(UTC) - timedelta(minutes=1)).isoformat(), "future"),
        ((datetime.now(UTC) + timedelta(days=400)).isoformat(), "366 days"),
        ("9999-12-31T23:59:59-05:00", "366 days"),
        ("0001-01-01T00:00:00+01:00", "future"),
        ("soon", "datetime"),
    ],
)
def test_token_expiry_must_be_aware_and_within_a_year(shared_api, expires_at, words):
    for route in ("/v1/tokens", "/v1/users/alice/tokens"):
        response = shared_api.client.post(
            route, json={"label": "x", "expires_at": expires_at}, headers=shared_api.tokens.auth("admin")
        )
        problem = _is_problem(response, 422, "expires_at")
        assert words in problem["detail"], problem


def test_an_aware_expiry_within_a_year_is_accepted(shared_api):
    when = datetime.now(timezone(timedelta(hours=2))) + timedelta(days=30)
    response = shared_api.client.post(
        "/v1/tokens", json={"label": "month", "expires_at": when.isoformat()}, headers=shared_api.tokens.auth("bob")
    )
    assert response.status_code == 201, response.text
    assert datetime.fromisoformat(response.json()["expires_at"].replace("Z", "+00:00")) == when


# --- finite numbers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("route", "raw", "field"),
    [
        ("/v1/submissions", b'{"learner_id": 1, "stream": "tiny2", "budget": {"flop_cap": 1e309}}', "budget.flop_cap"),
        (
            "/v1/submissions",
            b'{"learner_id": 1, "stream": "tiny2", "budget": {"wall_cap_s": -1e309}}',
            "budget.wall_cap_s",
        ),
        ("/v1/submissions", b'{"learner_id": 1, "stream": "tiny2", "budget": {"flop_cap": NaN}}', "budget.flop_cap"),
        (
            "/v1/submissions",
            b'{"learner_id": 1, "stream": "tiny2", "budget": {"flop_cap": Infinity}}',
            "budget.flop_cap",
        ),
        ("/v1/learners", b'{"name": "inf", "entrypoint": "a:b", "resources": {"cpus": 1e309}}', "resources.cpus"),
        ("/v1/learners", b'{"name": "nan", "entrypoint": "a:b", "resources": {"cpus": NaN}}', "resources.cpus"),
    ],
)
def test_infinities_and_nan_are_422(shared_api, route, raw, field):
    response = shared_api.client.post(
        route, content=raw, headers={**shared_api.tokens.auth("alice"), "content-type": "application/json"}
    )
    _is_problem(response, 422, field)


# --- bounded strings, short answers ----------------------------------------------------------

MEGA = "x" * 1_000_000


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("/v1/learners", {**LEARNER, "name": MEGA}, "name"),
        ("/v1/learners", {**LEARNER, "entrypoint": MEGA}, "entrypoint"),
        ("/v1/learners", {**LEARNER, "image": MEGA}, "image"),
        ("/v1/learners", {**LEARNER, "name": "ok-name", "image": "Bad Image " * 40}, "image"),
        ("/v1/tokens", {"label": MEGA}, "label"),
        ("/v1/users", {"name": MEGA}, "name"),
        ("/v1/submissions", {"learner_id": 1, "stream": MEGA}, "stream"),
        ("/v1/submissions", {"learner_id": 1, "stream": "tiny2", "stream_version": MEGA}, "stream_version"),
        (
            "/v1/submissions",
            {"learner_id": 1, "stream": "tiny2", "budget": {"checkpoint_fractions": [0.5] * 100_000}},
            "budget.checkpoint_fractions",
        ),
    ],
)
def test_huge_strings_and_lists_are_a_short_422(shared_api, route, body, field):
    response = shared_api.client.post(route, json=body, headers=shared_api.tokens.auth("admin"))
    _is_problem(response, 422, field)
    assert len(response.content) < 3000, len(response.content)


def test_a_huge_unknown_key_is_named_but_cut(shared_api):
    response = shared_api.client.post(
        "/v1/learners", json={**LEARNER, "k" * 500_000: 1}, headers=shared_api.tokens.auth("alice")
    )
    problem = _is_problem(response, 422)
    assert problem["field"].startswith("kkk") and len(problem["field"]) <= 300
    assert len(response.content) < 3000


@pytest.mark.parametrize(
    "raw",
    [
        b'{"name": "s", "entrypoint": "a:b", "\\ud800": 1}',  # a lone surrogate as a key
        b'{"name": "\\ud800", "entrypoint": "a:b"}',
    ],
)
def test_lone_surrogates_are_422(shared_api, raw):
    response = shared_api.client.post(
        "/v1/learners", content=raw, headers={**shared_api.tokens.auth("alice"), "content-type": "application/json"}
    )
    _is_problem(response, 422)


@pytest.mark.parametrize(
    ("route", "content_type", "raw"),
    [
        ("/v1/users", "application/json", b'"\xff\xfe"'),  # found by test_api_fuzz: was a 400
        ("/v1/learners", "application/json", b'{"name": "caf\xe9", "entrypoint": "a:b"}'),  # latin-1
        ("/v1/learners/bundle", "multipart/form-data", b"--x\r\n"),  # no boundary
    ],
)
def test_bodies_that_cannot_be_parsed_are_422_naming_the_body(shared_api, route, content_type, raw):
    response = shared_api.client.post(
        route, content=raw, headers={**shared_api.tokens.auth("admin"), "content-type": content_type}
    )
    problem = _is_problem(response, 422, "body")
    assert "cannot be parsed" in problem["detail"] and problem["errors"][0]["field"] == "body"


@pytest.mark.parametrize("label", ["a\x00b", "bell\x07", "\x1b[31mred"])
def test_labels_refuse_control_characters(shared_api, label):
    response = shared_api.client.post("/v1/tokens", json={"label": label}, headers=shared_api.tokens.auth("bob"))
    problem = _is_problem(response, 422, "label")
    assert "control character" in problem["detail"]


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/v1/submissions?owner=%00", "owner"),
        ("/v1/submissions?owner=a%20b", "owner"),
        ("/v1/users/a%00b/tokens", "name"),
    ],
)
def test_names_in_paths_and_queries_are_checked(shared_api, url, field):
    method = shared_api.client.post if url.endswith("/tokens") else shared_api.client.get
    kwargs = {"json": {"label": "x"}} if url.endswith("/tokens") else {}
    _is_problem(method(url, headers=shared_api.tokens.auth("admin"), **kwargs), 422, field)


# --- entry points ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entrypoint",
    [
        "os:system",
        "os.path:join",
        "sys:exit",
        "subprocess:Popen",
        "builtins:eval",
        "shutil:rmtree",
        "importlib:import_module",
        "pickle:loads",
        "socket:socket",
        "pkg:make.__globals__",
    ],
)
def test_entrypoints_may_not_name_dangerous_modules(shared_api, entrypoint):
    response = shared_api.client.post(
        "/v1/learners", json={"name": "danger", "entrypoint": entrypoint}, headers=shared_api.tokens.auth("alice")
    )
    problem = _is_problem(response, 422, "entrypoint")
    assert "entrypoint" in problem["detail"]


# --- body size -----------------------------------------------------------------------------


def test_a_body_above_the_limit_is_413_naming_the_setting(shared_api, learner_id):
    body = {"learner_id": learner_id, "stream": "tiny2", "stream_version": "v" * (2 * 1024 * 1024)}
    response = shared_api.client.post("/v1/submissions", json=body, headers=shared_api.tokens.auth("alice"))
    problem = _is_problem(response, 413, "body")
    assert "NEVIS_MAX_JSON_BYTES" in problem["detail"]
    # No token at all: still the 413 (nothing is authenticated before the size is known).
    anonymous = shared_api.client.post("/v1/submissions", json=body)
    _is_problem(anonymous, 413, "body")


def test_a_150_mb_unauthenticated_body_is_refused_at_once(live_server, kit):
    """Content-Length says 150 MB: 413 after a few kilobytes (the rest is never sent)."""
    with socket.create_connection(("127.0.0.1", live_server)) as sock:
        sock.sendall(
            b"POST /v1/submissions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            b"Content-Length: 157286400\r\n\r\n" + b'{"learner_id": ' + b" " * 4096
        )
        status = kit.read_status(sock)
    assert status.startswith("HTTP/1.1 413"), status


def test_a_chunked_body_is_refused_once_it_passes_the_limit(live_server, kit):
    """No Content-Length: the server stops reading soon after the limit, not at 150 MB."""
    sent = 0
    chunk = b" " * (256 * 1024)
    with socket.create_connection(("127.0.0.1", live_server)) as sock:
        sock.sendall(
            b"POST /v1/learners HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        sock.settimeout(5)
        try:
            for _ in range(600):  # 150 MiB if nobody stops it
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                sent += len(chunk)
        except OSError:
            pass  # the server answered and closed the connection
        status = kit.read_status(sock)
    assert status.startswith("HTTP/1.1 413"), status
    assert sent < 64 * 1024 * 1024


def test_body_limit_reads_no_more_than_the_limit_and_spares_uploads():
    """The middleware alone: a streamed body is cut off one chunk past the limit; a body
    within it reaches the app whole; an exempt path is passed through untouched."""
    seen: list[bytes] = []

    async def app(scope, receive, send):
        message = await receive()
        seen.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    limited = BodyLimit(app, limit=1024, exempt=("/upload",))

    def run(path: str, chunks: list[bytes]) -> tuple[int, int]:
        pulled, sent = [0], []

        async def receive():
            pulled[0] += 1
            index = pulled[0] - 1
            if index >= len(chunks):
                return {"type": "http.disconnect"}
            return {"type": "http.request", "body": chunks[index], "more_body": index < len(chunks) - 1}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": path, "headers": []}
        asyncio.run(limited(scope, receive, send))
        return sent[0]["status"], pulled[0]

    status, pulled = run("/v1/learners", [b"x" * 512] * 1000)
    assert (status, pulled) == (413, 3)
    assert seen == []
    assert run("/v1/learners", [b"a" * 500, b"b" * 500]) == (200, 2)
    assert seen == [b"a" * 500 + b"b" * 500]
    assert run("/upload", [b"x" * 4096]) == (200, 1)


# --- the database unavailable ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:////nonexistent-nevis-folder/sub/nevis.sqlite",
        "postgresql+psycopg://postgres@127.0.0.1:1/nevis",  # nothing listens on port 1
    ],
)
def test_an_unreachable_database_is_503_with_retry_after(url, tmp_path, kit, settings_env):
    settings = kit.make_settings(url, tmp_path / "data", tmp_path)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        response = client.get("/v1/users/me", headers={"Authorization": "Bearer nvs_" + "a" * 43})
        ready = client.get("/readyz")
    problem = _is_problem(response, 503)
    assert problem["type"].endswith("database-unavailable") and int(response.headers["Retry-After"]) > 0
    assert "127.0.0.1" not in problem["detail"] and "sqlite" not in problem["detail"].lower()
    assert _is_problem(ready, 503)["checks"]["database"].startswith("unreachable")


def _read_only(url: str) -> str:
    path = sqlite_path(url)
    if path is not None:
        return f"sqlite:///file:{path}?mode=ro&uri=true"
    return (
        make_url(url)
        .update_query_dict({"options": "-c default_transaction_read_only=on"})
        .render_as_string(hide_password=False)
    )


def test_a_read_only_database_is_503_and_not_ready(coord_settings, tokens, kit):
    settings = coord_settings.model_copy(update={"database_url": _read_only(coord_settings.database_url)})
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        me = client.get("/v1/users/me", headers=tokens.auth("alice"))
        assert me.status_code == 200, me.text  # reads still work
        write = client.post("/v1/learners", json=LEARNER, headers=tokens.auth("alice"))
        ready = client.get("/readyz")
    problem = _is_problem(write, 503)
    assert problem["type"].endswith("database-unavailable") and write.headers["Retry-After"]
    checks = _is_problem(ready, 503)["checks"]
    assert checks["database"].startswith("refuses writes"), checks
    assert ready.headers["Retry-After"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # SQLite's database-wide lock
def test_a_locked_sqlite_database_is_503_and_not_ready(coord_settings, tokens, monkeypatch):
    path = sqlite_path(coord_settings.database_url)
    assert path is not None, coord_settings.database_url
    monkeypatch.setattr("services.store.db.engine.SQLITE_BUSY_TIMEOUT_MS", 200)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with TestClient(create_app(coord_settings), raise_server_exceptions=False) as client:
            write = client.post("/v1/learners", json=LEARNER, headers=tokens.auth("alice"))
            ready = client.get("/readyz")
        holder.execute("ROLLBACK")
    finally:
        holder.close()
    problem = _is_problem(write, 503)
    assert problem["type"].endswith("database-unavailable") and write.headers["Retry-After"]
    assert _is_problem(ready, 503)["checks"]["database"].startswith("refuses writes")
