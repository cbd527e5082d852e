"""The auth matrix: every mutating route refuses no token, a wrong token, and another user's
token, with a problem document naming the field, and changes nothing when it refuses."""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from typing import Any

import pytest

ALICE_LEARNER = {"name": "alice-learner", "entrypoint": "nevis_test_learners:nearest_mean"}


def _bundle_bytes() -> bytes:
    data = b"def make():\n    return None\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("pkg/learner.py")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # may use {submission} and {token}
    json: dict[str, Any] | None = None
    upload: bool = False
    # (status, field) when a token of the wrong user is used; bob acts on alice's things
    other: tuple[int, str] = (404, "")
    admin_only: bool = False


ROUTES = [
    Route("POST", "/v1/users", json={"name": "mallory", "role": "admin"}, admin_only=True),
    Route("POST", "/v1/users/alice/tokens", json={"label": "stolen"}, admin_only=True),
    Route("POST", "/v1/tokens", json={"label": "mine"}),
    Route("DELETE", "/v1/tokens/{token}", other=(404, "token_id")),
    Route("POST", "/v1/learners", json={"name": "x1", "entrypoint": "m:f"}),
    Route("POST", "/v1/learners/bundle", upload=True),
    Route("POST", "/v1/submissions", json={"learner_id": "{learner}", "stream": "tiny2"}, other=(404, "learner_id")),
    Route("POST", "/v1/submissions/{submission}/cancel", other=(404, "submission_id")),
]
ROUTE_IDS = [f"{r.method} {r.path}" for r in ROUTES]
# Routes that act on something of another user's, or need the admin role. (The others create
# a resource of the caller's own, so another user's token simply makes one for that user.)
GUARDED = [r for r in ROUTES if r.admin_only or r.other[1]]


@pytest.fixture(scope="module")
def world(shared_api):
    """Alice owns a learner, a submission and a token; returns the ids (shared by the module)."""
    client, tokens = shared_api.client, shared_api.tokens
    learner = client.post("/v1/learners", json=ALICE_LEARNER, headers=tokens.auth("alice"))
    assert learner.status_code == 201, learner.text
    sub = client.post(
        "/v1/submissions", headers=tokens.auth("alice"), json={"learner_id": learner.json()["id"], "stream": "tiny2"}
    )
    assert sub.status_code == 201, sub.text
    token = client.get("/v1/tokens", headers=tokens.auth("alice")).json()[0]
    return {"learner": learner.json()["id"], "submission": sub.json()["id"], "token": token["id"]}


def _call(client, route: Route, world: dict[str, int], headers: dict[str, str]):
    path = route.path.format(**world)
    if route.upload:
        return client.post(
            path,
            headers=headers,
            files={"file": ("b.tar.gz", _bundle_bytes(), "application/gzip")},
            data={"name": "bundled", "entrypoint": "learner:make"},
        )
    body = (
        {
            k: (int(v.format(**world)) if isinstance(v, str) and v.startswith("{") else v)
            for k, v in (route.json or {}).items()
        }
        if route.json is not None
        else None
    )
    return client.request(route.method, path, json=body, headers=headers)


def _state(client, tokens) -> tuple:
    """Everything a refused request could have changed."""
    admin = tokens.auth("admin")
    users = [u["name"] for u in client.get("/v1/users", headers=admin).json()]
    learners = client.get("/v1/learners", headers=admin).json()["total"]
    subs = [(s["id"], s["status"]) for s in client.get("/v1/submissions", headers=admin).json()["items"]]
    alice_tokens = [(t["id"], t["revoked_at"]) for t in client.get("/v1/tokens", headers=tokens.auth("alice")).json()]
    return users, learners, subs, alice_tokens


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("credential", ["none", "malformed", "unknown"])
def test_mutating_route_refuses_a_missing_or_bad_token(shared_api, world, route, credential):
    client, tokens = shared_api.client, shared_api.tokens
    headers = {
        "none": {},
        "malformed": {"Authorization": "Basic YWxpY2U6cHc="},
        "unknown": {"Authorization": "Bearer nvs_" + "x" * 43},
    }[credential]
    before = _state(client, tokens)
    response = _call(client, route, world, headers)
    assert response.status_code == 401, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["www-authenticate"] == "Bearer"
    body = response.json()
    assert body["status"] == 401 and body["field"] == "Authorization"
    assert _state(client, tokens) == before


@pytest.mark.parametrize("route", GUARDED, ids=[f"{r.method} {r.path}" for r in GUARDED])
def test_mutating_route_refuses_another_users_token(shared_api, world, route):
    client, tokens = shared_api.client, shared_api.tokens
    before = _state(client, tokens)
    response = _call(client, route, world, tokens.auth("bob"))
    expected = (403, "Authorization") if route.admin_only else route.other
    assert (response.status_code, response.json().get("field")) == expected, response.text
    assert _state(client, tokens) == before


def test_a_revoked_token_stops_working(client, tokens):
    made = client.post("/v1/tokens", json={"label": "short-lived"}, headers=tokens.auth("alice"))
    assert made.status_code == 201
    secret, token_id = made.json()["token"], made.json()["id"]
    mine = {"Authorization": f"Bearer {secret}"}
    assert client.get("/v1/users/me", headers=mine).json()["name"] == "alice"
    assert client.delete(f"/v1/tokens/{token_id}", headers=mine).status_code == 200
    refused = client.post("/v1/learners", json={"name": "late", "entrypoint": "m:f"}, headers=mine)
    assert refused.status_code == 401


def test_an_expired_token_is_refused(client, tokens, coord_settings):
    from datetime import timedelta

    from services.store.db import make_engine, session_factory, transaction
    from services.store.db.models_coordinator import ApiToken
    from services.store.db.types import utcnow

    made = client.post(
        "/v1/tokens",
        json={"label": "soon", "expires_at": (utcnow() + timedelta(minutes=5)).isoformat()},
        headers=tokens.auth("alice"),
    ).json()
    engine = make_engine(coord_settings.database_url)
    with transaction(session_factory(engine)) as session:
        session.get(ApiToken, made["id"]).expires_at = utcnow() - timedelta(seconds=1)
    engine.dispose()
    response = client.get("/v1/users/me", headers={"Authorization": f"Bearer {made['token']}"})
    assert response.status_code == 401


def test_tokens_are_stored_hashed(client, tokens, coord_settings, kit):
    rows = kit.query(coord_settings.database_url, "SELECT token_sha256, token_prefix FROM api_tokens")
    stored = " ".join(" ".join(r) for r in rows)
    assert tokens.alice not in stored and tokens.alice[:12] in stored


def test_admin_sees_everyones_submissions_and_a_submitter_only_its_own(shared_api, world):
    client, tokens = shared_api.client, shared_api.tokens
    assert client.get("/v1/submissions", headers=tokens.auth("admin")).json()["total"] == 1
    assert client.get("/v1/submissions", headers=tokens.auth("bob")).json()["total"] == 0
    hidden = client.get(f"/v1/submissions/{world['submission']}", headers=tokens.auth("bob"))
    assert hidden.status_code == 404 and hidden.json()["field"] == "submission_id"
    events = client.get(f"/v1/submissions/{world['submission']}/events", headers=tokens.auth("bob"))
    assert events.status_code == 404
    shown = client.get(f"/v1/submissions/{world['submission']}", headers=tokens.auth("admin"))
    assert shown.status_code == 200 and shown.json()["owner"] == "alice"
