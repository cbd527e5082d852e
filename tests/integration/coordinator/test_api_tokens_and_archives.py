"""Token hygiene and cheap archive checks (issue 13, items 4 and part of 2), on both dialects.

- A token minted through the API without ``expires_at`` expires after
  NEVIS_TOKEN_DEFAULT_DAYS, and no token mints one that outlives it (a 422 naming
  ``expires_at``); a token without expiry (the CLI's admin bootstrap) mints up to a year.
- An admin revokes anyone's token and disables a user: every token of the user is a 401 at
  once, and no new one can be minted until the user is enabled again.
- Every failed authentication is logged with the token's display prefix, never its secret.
- A zip bomb (16 MB that inflates to 16 GiB) and a 300,000-member archive are refused in well
  under a second, without the database write lock held while they are inspected.
- An upload without a valid token is a 401 before its body is read (a real uvicorn server);
  the gate reads the header as the routes do, so any spelling they accept (a tab, any case)
  uploads.
"""

from __future__ import annotations

import io
import logging
import socket
import sqlite3
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from sqlalchemy.engine import make_url

from services.coordinator.api.routes import learners as learner_routes
from services.coordinator.app import create_app
from services.core.errors import BundleError
from services.store.db.engine import sqlite_path
from tests.support.hostile_archives import many_members_tar, many_members_zip, zip_bomb
from workers.sandbox import bundles
from workers.sandbox.bundles import archives as bundle_archives

DAY = timedelta(days=1)


def _now() -> datetime:
    return datetime.now(UTC)


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _new_user(api, name: str, role: str = "submitter") -> dict[str, str]:
    """A fresh user (so disabling it spares the module's others) and its bearer header."""
    admin = api.tokens.auth("admin")
    assert api.client.post("/v1/users", json={"name": name, "role": role}, headers=admin).status_code == 201
    made = api.client.post(f"/v1/users/{name}/tokens", json={"label": "t"}, headers=admin)
    assert made.status_code == 201, made.text
    return {"Authorization": f"Bearer {made.json()['token']}"}


def _problem(response, status: int, field: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    if field is not None:
        assert body["field"] == field, body
    return body


# --- expiry ------------------------------------------------------------------------------


def test_a_token_without_expiry_gets_the_default(shared_api):
    made = shared_api.client.post("/v1/tokens", json={"label": "laptop"}, headers=shared_api.tokens.auth("alice"))
    assert made.status_code == 201, made.text
    expires = _when(made.json()["expires_at"])
    days = shared_api.settings.token_default_days
    assert _now() + (days * DAY) - timedelta(minutes=5) < expires <= _now() + days * DAY


def test_a_token_cannot_mint_one_that_outlives_it(shared_api):
    short = shared_api.client.post(
        "/v1/tokens",
        json={"label": "short", "expires_at": (_now() + 10 * DAY).isoformat()},
        headers=shared_api.tokens.auth("alice"),
    )
    assert short.status_code == 201, short.text
    short_auth = {"Authorization": f"Bearer {short.json()['token']}"}
    longer = shared_api.client.post(
        "/v1/tokens", json={"label": "longer", "expires_at": (_now() + 20 * DAY).isoformat()}, headers=short_auth
    )
    assert "outlive" in _problem(longer, 422, "expires_at")["detail"]
    # Without an expiry the default (90 days) is cut to the minter's own expiry.
    default = shared_api.client.post("/v1/tokens", json={"label": "default"}, headers=short_auth)
    assert default.status_code == 201, default.text
    assert _when(default.json()["expires_at"]) == _when(short.json()["expires_at"])
    # Within the minter's lifetime is fine.
    shorter = shared_api.client.post(
        "/v1/tokens", json={"label": "shorter", "expires_at": (_now() + 5 * DAY).isoformat()}, headers=short_auth
    )
    assert shorter.status_code == 201, shorter.text


def test_a_bootstrap_token_without_expiry_mints_up_to_a_year(shared_api):
    made = shared_api.client.post(
        "/v1/tokens",
        json={"label": "year", "expires_at": (_now() + 365 * DAY).isoformat()},
        headers=shared_api.tokens.auth("alice"),
    )
    assert made.status_code == 201, made.text


def test_an_admin_minting_for_a_user_is_bounded_by_its_own_token(shared_api):
    _new_user(shared_api, "minted")
    short = shared_api.client.post(
        "/v1/tokens",
        json={"label": "short", "expires_at": (_now() + 3 * DAY).isoformat()},
        headers=shared_api.tokens.auth("admin"),
    )
    short_auth = {"Authorization": f"Bearer {short.json()['token']}"}
    refused = shared_api.client.post(
        "/v1/users/minted/tokens",
        json={"label": "x", "expires_at": (_now() + 30 * DAY).isoformat()},
        headers=short_auth,
    )
    _problem(refused, 422, "expires_at")


def test_a_submitter_mints_only_for_itself(shared_api):
    refused = shared_api.client.post(
        "/v1/users/bob/tokens", json={"label": "x"}, headers=shared_api.tokens.auth("alice")
    )
    _problem(refused, 403, "Authorization")


# --- revocation and disabling -----------------------------------------------------------------


def test_an_admin_revokes_another_users_token(shared_api):
    carol = _new_user(shared_api, "carol")
    assert shared_api.client.get("/v1/users/me", headers=carol).status_code == 200
    listed = shared_api.client.get("/v1/users/carol/tokens", headers=shared_api.tokens.auth("admin"))
    assert listed.status_code == 200, listed.text
    (token,) = listed.json()
    revoked = shared_api.client.delete(f"/v1/users/carol/tokens/{token['id']}", headers=shared_api.tokens.auth("admin"))
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked_at"] is not None
    _problem(shared_api.client.get("/v1/users/me", headers=carol), 401, "Authorization")


def test_only_admins_revoke_others_tokens_and_ids_must_match_the_user(shared_api):
    _new_user(shared_api, "dave")
    (token,) = shared_api.client.get("/v1/users/dave/tokens", headers=shared_api.tokens.auth("admin")).json()
    _problem(
        shared_api.client.delete(f"/v1/users/dave/tokens/{token['id']}", headers=shared_api.tokens.auth("alice")), 403
    )
    _problem(
        shared_api.client.delete(f"/v1/users/bob/tokens/{token['id']}", headers=shared_api.tokens.auth("admin")),
        404,
        "token_id",
    )


def test_a_disabled_user_is_locked_out_until_enabled(shared_api):
    admin = shared_api.tokens.auth("admin")
    erin = _new_user(shared_api, "erin")
    second = shared_api.client.post("/v1/tokens", json={"label": "second"}, headers=erin)
    erin2 = {"Authorization": f"Bearer {second.json()['token']}"}
    disabled = shared_api.client.post("/v1/users/erin/disable", headers=admin)
    assert disabled.status_code == 200, disabled.text
    assert len(disabled.json()) == 2 and all(t["revoked_at"] for t in disabled.json())
    for auth in (erin, erin2):
        _problem(shared_api.client.get("/v1/users/me", headers=auth), 401, "Authorization")
    _problem(shared_api.client.post("/v1/users/erin/tokens", json={"label": "again"}, headers=admin), 409, "user")
    assert len(shared_api.client.get("/v1/users/erin/tokens", headers=admin).json()) == 2
    shown = shared_api.client.get("/v1/users", headers=admin).json()
    erin_row = next(u for u in (shown["items"] if isinstance(shown, dict) else shown) if u["name"] == "erin")
    assert erin_row["disabled_at"] is not None
    assert shared_api.client.post("/v1/users/erin/enable", headers=admin).status_code == 200
    again = shared_api.client.post("/v1/users/erin/tokens", json={"label": "again"}, headers=admin)
    assert again.status_code == 201, again.text
    fresh = {"Authorization": f"Bearer {again.json()['token']}"}
    assert shared_api.client.get("/v1/users/me", headers=fresh).json()["name"] == "erin"
    _problem(shared_api.client.get("/v1/users/me", headers=erin), 401)  # old ones stay revoked


def test_disabling_is_for_admins_and_not_for_oneself(shared_api):
    _problem(shared_api.client.post("/v1/users/bob/disable", headers=shared_api.tokens.auth("alice")), 403)
    _problem(shared_api.client.post("/v1/users/root/disable", headers=shared_api.tokens.auth("admin")), 409, "name")
    _problem(shared_api.client.post("/v1/users/nobody/disable", headers=shared_api.tokens.auth("admin")), 404, "user")


# --- logging -------------------------------------------------------------------------------


def test_failed_authentication_is_logged_with_the_prefix_only(shared_api, caplog):
    frank = _new_user(shared_api, "frank")
    secret = frank["Authorization"].split()[1]
    shared_api.client.post("/v1/users/frank/disable", headers=shared_api.tokens.auth("admin"))
    caplog.set_level(logging.WARNING, logger="nevis.api.auth")
    _problem(shared_api.client.get("/v1/users/me", headers=frank), 401)
    unknown = "nvs_" + "A" * 43
    _problem(shared_api.client.get("/v1/users/me", headers={"Authorization": f"Bearer {unknown}"}), 401)
    _problem(shared_api.client.get("/v1/users/me", headers={"Authorization": "Bearer hunter2-xyz"}), 401)
    _problem(shared_api.client.get("/v1/users/me"), 401)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "nevis.api.auth")
    assert "revoked token" in text and secret[:12] in text
    assert "unknown token" in text and unknown[:12] in text
    assert "malformed token" in text and "no token" in text
    for leaked in (secret, secret[12:], unknown, "hunter2"):
        assert leaked not in text


# --- archives ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile")
    return {
        "bomb.zip": zip_bomb(folder / "bomb.zip"),
        "many.tar.gz": many_members_tar(folder / "many.tar.gz"),
        "many.zip": many_members_zip(folder / "many.zip"),
    }


def test_the_zip_bomb_is_what_it_claims(hostile):
    assert hostile["bomb.zip"].stat().st_size < 20 * 1024 * 1024
    with zipfile.ZipFile(hostile["bomb.zip"]) as archive:
        assert sum(i.file_size for i in archive.infolist()) == 16 * 1024**3
        assert archive.read("pkg/m0.py") == bytes(16 * 1024 * 1024)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("bomb.zip", "unpacks to more than"),
        ("many.tar.gz", "more than 10000 entries"),
        ("many.zip", "more than 10000 entries"),
    ],
)
def test_hostile_archives_are_refused_in_well_under_a_second(hostile, name, words):
    with pytest.raises(BundleError, match=words) as caught:
        bundles.check_bundle(hostile[name], filename=name, max_unpacked_bytes=1024**3)
    assert caught.value.field == "file"


def _writer_lock_free(database_url: str) -> bool:
    """Whether another connection could take SQLite's write lock right now."""
    connection = sqlite3.connect(sqlite_path(make_url(database_url)), timeout=0)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.rollback()
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        connection.close()


@pytest.mark.parametrize("name", ["bomb.zip", "many.tar.gz", "many.zip"])
def test_hostile_uploads_are_422_without_the_write_lock(shared_api, hostile, name, monkeypatch):
    seen: list[bool] = []
    sqlite = shared_api.settings.database_url.startswith("sqlite")

    def spying_check(path, **kwargs):
        if sqlite:
            seen.append(_writer_lock_free(shared_api.settings.database_url))
        return bundles.check_bundle(path, **kwargs)

    monkeypatch.setattr(learner_routes, "check_bundle", spying_check)
    with open(hostile[name], "rb") as handle:
        response = shared_api.client.post(
            "/v1/learners/bundle",
            headers=shared_api.tokens.auth("alice"),
            data={"name": f"hostile-{name.replace('.', '-')}", "entrypoint": "pkg.m0:make"},
            files={"file": (name, handle, "application/octet-stream")},
        )
    _problem(response, 422, "file")
    assert seen == ([True] if sqlite else [])


def test_a_good_bundle_is_still_accepted(shared_api, tmp_path):
    path = tmp_path / "good.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/__init__.py", "")
        archive.writestr("pkg/learner.py", "def make():\n    return None\n")
    with open(path, "rb") as handle:
        response = shared_api.client.post(
            "/v1/learners/bundle",
            headers=shared_api.tokens.auth("alice"),
            data={"name": "good-archive", "entrypoint": "pkg.learner:make"},
            files={"file": ("good.zip", handle, "application/zip")},
        )
    assert response.status_code == 201, response.text
    assert response.json()["owner"] == "alice"


# --- authentication before the upload is read (a real server) ----------------------------------

# The upload gate reads the Authorization header as the routes do (security.bearer_secret):
# any case of the scheme and any whitespace, tabs included. A spelling the route accepts must
# never be a 401 at the gate.
SPELLINGS = ["Bearer {}", "bearer {}", "BEARER  {}", "Bearer\t{}", "\tbearer \t{}\t"]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_upload_gate_reads_the_header_as_the_routes_do(spelling):
    from services.coordinator.api.middleware import UploadLimit
    from services.coordinator.common.security import bearer_secret

    secret = "nvs_" + "C" * 43
    header = spelling.format(secret)
    seen: list[str | None] = []
    reached: list[bool] = []

    async def app(scope, receive, send):
        reached.append(True)

    gate = UploadLimit(app, path="/upload", limit=1024, authenticate=seen.append)
    scope = {
        "type": "http",
        "path": "/upload",
        "method": "POST",
        "headers": [(b"content-length", b"10"), (b"authorization", header.encode())],
    }
    anyio.run(gate, scope, None, None)
    assert seen == [bearer_secret(header)] == [secret]
    assert reached == [True]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_an_upload_with_any_accepted_spelling_of_its_token_is_201(shared_api, spelling):
    payload = io.BytesIO()
    with zipfile.ZipFile(payload, "w") as archive:
        archive.writestr("pkg/__init__.py", "")
        archive.writestr("pkg/learner.py", "def make():\n    return None\n")
    header = spelling.format(shared_api.tokens.alice)
    me = shared_api.client.get("/v1/users/me", headers={"Authorization": header})
    assert me.status_code == 200, me.text
    response = shared_api.client.post(
        "/v1/learners/bundle",
        headers={"Authorization": header},
        data={"name": f"spelled-{SPELLINGS.index(spelling)}", "entrypoint": "pkg.learner:make"},
        files={"file": ("spelled.zip", payload.getvalue(), "application/zip")},
    )
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("authorization", [None, "Bearer nvs_" + "B" * 43, "Basic abc"])
def test_a_49_mb_upload_without_a_valid_token_is_401_unread(live_server, authorization, kit):
    """Content-Length says 49 MB (within the upload limit); only a few KB are ever sent."""
    headers = (
        b"POST /v1/learners/bundle HTTP/1.1\r\nHost: test\r\n"
        b"Content-Type: multipart/form-data; boundary=xyz\r\n"
        b"Content-Length: 51380224\r\n"
    )
    if authorization:
        headers += b"Authorization: " + authorization.encode() + b"\r\n"
    with socket.create_connection(("127.0.0.1", live_server)) as sock:
        sock.sendall(
            headers + b"\r\n" + b'--xyz\r\nContent-Disposition: form-data; name="file"; '
            b'filename="a.zip"\r\n\r\n' + b"\0" * 4096
        )
        status = kit.read_status(sock)
    assert status.startswith("HTTP/1.1 401"), status


# --- CLI parity and zip64 -------------------------------------------------------------------


def test_the_cli_disables_and_enables_a_user(settings_env):
    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    from services.cli.main import app
    from services.coordinator.common.client_errors import ConflictError
    from services.coordinator.common.config import get_coordinator_settings
    from services.store.db import upgrade

    runner = CliRunner()
    get_coordinator_settings.cache_clear()
    try:
        settings_env.mkdir(parents=True, exist_ok=True)
        settings = get_coordinator_settings()
        upgrade(settings.database_url)
        assert runner.invoke(app, ["users", "create", "gus"]).exit_code == 0
        secret = runner.invoke(app, ["tokens", "create", "--user", "gus"]).stdout.strip()
        disabled = runner.invoke(app, ["users", "disable", "gus"])
        assert disabled.exit_code == 0 and "1 token(s) revoked" in disabled.stdout
        refused = runner.invoke(app, ["tokens", "create", "--user", "gus"])
        assert isinstance(refused.exception, ConflictError) and "disabled" in str(refused.exception)
        with TestClient(create_app(settings)) as client:
            assert client.get("/v1/users/me", headers={"Authorization": f"Bearer {secret}"}).status_code == 401
        assert runner.invoke(app, ["users", "enable", "gus"]).exit_code == 0
        assert runner.invoke(app, ["tokens", "create", "--user", "gus"]).exit_code == 0
    finally:
        get_coordinator_settings.cache_clear()


def test_a_zip64_directory_is_counted(tmp_path):
    path = tmp_path / "z64.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a.py", "x = 1\n")
        with archive.open("big.bin", "w", force_zip64=True) as member:
            member.write(b"0" * 10)
    assert bundle_archives.zip_entry_count(path, stop_after=100) == 2
    assert bundles.check_bundle(path, filename="z64.zip", max_unpacked_bytes=1024) == "zip"
