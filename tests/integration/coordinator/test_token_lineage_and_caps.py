"""Token lineage, the per-user token cap and the write rate limit's keys, through the real app
on both dialects.

- A token minted through the API records the token that minted it; revoking a token (the
  caller's route, the admin's route, the CLI, or disabling its user) revokes every token
  minted from it, down the chain, and nothing else.
- A user holds at most NEVIS_MAX_TOKENS_PER_USER live tokens: minting past it is a 409 problem
  naming the cap (through the API for oneself, an admin for a user, or the CLI); revoked and
  expired tokens do not count.
- The write rate limit keys a valid token by its user, whatever the spelling of its header and
  whichever of the user's tokens it is, and every bogus token from one address by that address.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from services.coordinator.app import create_app
from services.coordinator.common.config import CoordinatorSettings
from services.store.db.types import utcnow

LEARNER = {"name": "cnn", "entrypoint": "my_pkg.learner:make"}


def _client(settings: CoordinatorSettings, **update) -> TestClient:
    return TestClient(create_app(settings.model_copy(update=update)), raise_server_exceptions=False)


@pytest.fixture
def api(coord_settings: CoordinatorSettings, tokens) -> Iterator[TestClient]:
    with _client(coord_settings) as client:
        yield client


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def _mint(client: TestClient, headers: dict[str, str], *, user: str | None = None, label: str = "t", **body) -> dict:
    """A new token (201 expected): for oneself, or for ``user`` by an admin."""
    path = f"/v1/users/{user}/tokens" if user else "/v1/tokens"
    made = client.post(path, json={"label": label, **body}, headers=headers)
    assert made.status_code == 201, made.text
    return made.json()


def _works(client: TestClient, secret: str) -> bool:
    status = client.get("/v1/users/me", headers=_auth(secret)).status_code
    assert status in (200, 401), status
    return status == 200


def _parents(url: str, kit) -> dict[int, int | None]:
    return dict(kit.query(url, "SELECT id, parent_token_id FROM api_tokens"))


# --- lineage -----------------------------------------------------------------------------


def test_a_minted_token_records_its_minter(api, tokens, coord_settings, kit):
    child = _mint(api, tokens.auth("alice"))
    grandchild = _mint(api, _auth(child["token"]))
    for_bob = _mint(api, tokens.auth("admin"), user="bob")
    parents = _parents(coord_settings.database_url, kit)
    alice_first = api.get("/v1/tokens", headers=tokens.auth("alice")).json()[0]["id"]
    admin_first = api.get("/v1/tokens", headers=tokens.auth("admin")).json()[0]["id"]
    assert parents[alice_first] is None and parents[admin_first] is None  # made by the CLI's path
    assert parents[child["id"]] == alice_first
    assert parents[grandchild["id"]] == child["id"]
    assert parents[for_bob["id"]] == admin_first


def test_revoking_a_token_revokes_its_descendants_only(api, tokens):
    alice = tokens.auth("alice")
    child = _mint(api, alice)
    grandchild = _mint(api, _auth(child["token"]), label="g")
    great = _mint(api, _auth(grandchild["token"]), label="gg")
    sibling = _mint(api, alice, label="sibling")
    revoked = api.delete(f"/v1/tokens/{child['id']}", headers=alice)
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked_at"] is not None
    assert not any(_works(api, t["token"]) for t in (child, grandchild, great))
    assert _works(api, sibling["token"]) and _works(api, tokens.alice)
    listed = {t["id"]: t["revoked_at"] for t in api.get("/v1/tokens", headers=alice).json()}
    assert all(listed[t["id"]] for t in (child, grandchild, great))
    assert listed[sibling["id"]] is None
    # A revoked token mints nothing more, and revoking again is harmless.
    refused = api.post("/v1/tokens", json={"label": "late"}, headers=_auth(grandchild["token"]))
    assert refused.status_code == 401 and refused.json()["field"] == "Authorization"
    assert api.delete(f"/v1/tokens/{child['id']}", headers=alice).status_code == 200


def test_revoking_an_admins_token_revokes_what_it_minted_for_others(api, tokens):
    admin = tokens.auth("admin")
    assert api.post("/v1/users", json={"name": "ops", "role": "admin"}, headers=admin).status_code == 201
    ops = _mint(api, admin, user="ops")
    for_bob = _mint(api, _auth(ops["token"]), user="bob")
    bobs_own = _mint(api, _auth(for_bob["token"]), label="bob's own")
    revoked = api.delete(f"/v1/users/ops/tokens/{ops['id']}", headers=admin)
    assert revoked.status_code == 200, revoked.text
    assert not any(_works(api, t["token"]) for t in (ops, for_bob, bobs_own))
    assert _works(api, tokens.bob) and _works(api, tokens.admin)


def test_disabling_a_user_revokes_what_its_tokens_minted_for_others(api, tokens):
    admin = tokens.auth("admin")
    assert api.post("/v1/users", json={"name": "ops", "role": "admin"}, headers=admin).status_code == 201
    ops = _mint(api, admin, user="ops")
    for_alice = _mint(api, _auth(ops["token"]), user="alice")
    disabled = api.post("/v1/users/ops/disable", headers=admin)
    assert disabled.status_code == 200, disabled.text
    assert [t["id"] for t in disabled.json()] == [ops["id"]]  # its own tokens, as before
    assert not _works(api, for_alice["token"])
    assert _works(api, tokens.alice)


def test_the_cli_revokes_a_token_with_its_descendants(settings_env):
    from typer.testing import CliRunner

    from services.cli.main import app
    from services.coordinator.common.config import get_coordinator_settings
    from services.store.db import upgrade

    runner = CliRunner()
    get_coordinator_settings.cache_clear()
    try:
        settings_env.mkdir(parents=True, exist_ok=True)
        settings = get_coordinator_settings()
        upgrade(settings.database_url)
        assert runner.invoke(app, ["users", "create", "gus"]).exit_code == 0
        root = runner.invoke(app, ["tokens", "create", "--user", "gus"]).stdout.strip()
        with TestClient(create_app(settings)) as client:
            child = _mint(client, _auth(root))
            grandchild = _mint(client, _auth(child["token"]))
            root_id = client.get("/v1/tokens", headers=_auth(root)).json()[0]["id"]
            done = runner.invoke(app, ["tokens", "revoke", str(root_id), "--user", "gus"])
            assert done.exit_code == 0, done.output
            assert f"revoked token {root_id} and 2 token(s) minted from it" in done.stdout
            assert not any(_works(client, s) for s in (root, child["token"], grandchild["token"]))
    finally:
        get_coordinator_settings.cache_clear()


def test_cli_tokens_expire_by_default_and_within_a_year(settings_env):
    from typer.testing import CliRunner

    from services.cli.main import app
    from services.coordinator.common.config import get_coordinator_settings
    from services.store.db import upgrade

    runner = CliRunner()
    get_coordinator_settings.cache_clear()
    try:
        settings_env.mkdir(parents=True, exist_ok=True)
        settings = get_coordinator_settings()
        upgrade(settings.database_url)
        assert runner.invoke(app, ["users", "create", "gus"]).exit_code == 0
        default = runner.invoke(app, ["tokens", "create", "--user", "gus"]).stdout.strip()
        short = runner.invoke(app, ["tokens", "create", "--user", "gus", "--expires-in-days", "7"])
        assert short.exit_code == 0, short.output
        too_long = runner.invoke(app, ["tokens", "create", "--user", "gus", "--expires-in-days", "400"])
        assert too_long.exit_code == 2 and "--expires-in-days" in too_long.output
        with TestClient(create_app(settings)) as client:
            listed = client.get("/v1/tokens", headers=_auth(default)).json()
        assert len(listed) == 2
        lifetimes = [(datetime.fromisoformat(t["expires_at"]) - utcnow()) for t in listed]
        assert (
            timedelta(days=settings.token_default_days) - timedelta(minutes=5)
            < lifetimes[0]
            <= timedelta(days=settings.token_default_days)
        )
        assert timedelta(days=7) - timedelta(minutes=5) < lifetimes[1] <= timedelta(days=7)
    finally:
        get_coordinator_settings.cache_clear()


# --- the cap on live tokens per user -------------------------------------------------------


def _expire(url: str, token_id: int) -> None:
    from services.store.db import make_engine, session_factory, transaction
    from services.store.db.models_coordinator import ApiToken

    engine = make_engine(url)
    try:
        with transaction(session_factory(engine)) as session:
            session.get(ApiToken, token_id).expires_at = utcnow() - timedelta(seconds=1)
    finally:
        engine.dispose()


def test_minting_past_the_cap_is_a_409_naming_it(coord_settings, tokens):
    with _client(coord_settings, max_tokens_per_user=3) as client:
        alice = tokens.auth("alice")
        minted = [_mint(client, alice, label=f"t{i}") for i in range(2)]  # 3 with the first
        refused = client.post("/v1/tokens", json={"label": "one too many"}, headers=alice)
        assert refused.status_code == 409, refused.text
        body = refused.json()
        assert refused.headers["content-type"] == "application/problem+json"
        assert body["field"] == "user" and "NEVIS_MAX_TOKENS_PER_USER=3" in body["detail"]
        by_admin = client.post("/v1/users/alice/tokens", json={"label": "x"}, headers=tokens.auth("admin"))
        assert by_admin.status_code == 409 and "NEVIS_MAX_TOKENS_PER_USER=3" in by_admin.json()["detail"]
        # A revoked token frees its place; so does an expired one.
        assert client.delete(f"/v1/tokens/{minted[0]['id']}", headers=alice).status_code == 200
        soon = _mint(client, alice, label="soon", expires_at=(utcnow() + timedelta(minutes=5)).isoformat())
        assert client.post("/v1/tokens", json={"label": "x"}, headers=alice).status_code == 409
        _expire(coord_settings.database_url, soon["id"])
        _mint(client, alice, label="after expiry")
        # Other users have caps of their own.
        _mint(client, tokens.auth("bob"), label="bob's")


def test_the_cli_is_held_to_the_cap(settings_env, monkeypatch):
    from typer.testing import CliRunner

    from services.cli.main import app
    from services.coordinator.common.client_errors import ConflictError
    from services.coordinator.common.config import get_coordinator_settings
    from services.store.db import upgrade

    runner = CliRunner()
    monkeypatch.setenv("NEVIS_MAX_TOKENS_PER_USER", "2")
    get_coordinator_settings.cache_clear()
    try:
        settings_env.mkdir(parents=True, exist_ok=True)
        upgrade(get_coordinator_settings().database_url)
        assert runner.invoke(app, ["users", "create", "gus"]).exit_code == 0
        for _ in range(2):
            assert runner.invoke(app, ["tokens", "create", "--user", "gus"]).exit_code == 0
        refused = runner.invoke(app, ["tokens", "create", "--user", "gus"])
        assert isinstance(refused.exception, ConflictError)
        assert "NEVIS_MAX_TOKENS_PER_USER=2" in str(refused.exception)
    finally:
        get_coordinator_settings.cache_clear()


# --- the write rate limit's keys --------------------------------------------------------------


def test_spellings_of_one_token_share_one_budget(coord_settings, tokens):
    spellings = ["Bearer {t}", "bearer {t}", "BEARER  {t}", "\tBearer {t} "]
    with _client(coord_settings, write_rate="3/minute") as client:
        codes = [
            client.post(
                "/v1/learners",
                json={**LEARNER, "name": f"cnn{i}"},
                headers={"Authorization": form.format(t=tokens.alice)},
            ).status_code
            for i, form in enumerate(spellings)
        ]
        assert codes == [201, 201, 201, 429]  # every spelling authenticates, and all share one budget


def test_a_users_tokens_share_one_budget(coord_settings, tokens):
    with _client(coord_settings, write_rate="2/minute") as client:
        second = client.post("/v1/tokens", json={"label": "second"}, headers=tokens.auth("alice"))
        assert second.status_code == 201, second.text
        made = client.post("/v1/learners", json=LEARNER, headers=_auth(second.json()["token"]))
        assert made.status_code == 201, made.text
        assert (
            client.post("/v1/learners", json={**LEARNER, "name": "x"}, headers=tokens.auth("alice")).status_code == 429
        )
        assert (
            client.post("/v1/learners", json={**LEARNER, "name": "bobs"}, headers=tokens.auth("bob")).status_code == 201
        )


def test_bogus_tokens_from_one_address_share_its_budget(coord_settings, tokens):
    with _client(coord_settings, write_rate="3/minute") as client:
        alice = tokens.auth("alice")
        revoked = _mint(client, alice)  # alice's writes count against alice's budget
        assert client.delete(f"/v1/tokens/{revoked['id']}", headers=alice).status_code == 200
        bogus = (
            [f"Bearer {revoked['token']}"]
            + [f"Bearer nvs_{c * 43}" for c in "abcde"]
            + ["Bearer hunter2", "Basic YWxpY2U6cHc=", "Bearer a b"]
        )
        codes = [
            client.post("/v1/learners", json=LEARNER, headers={"Authorization": value}).status_code for value in bogus
        ]
        assert codes == [401, 401, 401] + [429] * (len(bogus) - 3)
        assert client.post("/v1/learners", json=LEARNER).status_code == 429  # no token: the same
        # A valid user keeps its own budget (one write left of three).
        assert client.post("/v1/learners", json=LEARNER, headers=alice).status_code == 201
        assert client.post("/v1/learners", json={**LEARNER, "name": "x"}, headers=alice).status_code == 429
