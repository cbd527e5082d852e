"""``nevis users``, ``nevis tokens``, ``nevis openapi`` and ``nevis serve`` checks (SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from services.cli.main import app
from services.coordinator.app import create_app
from services.coordinator.common.client_errors import ConflictError, NotFoundError
from services.coordinator.common.config import get_coordinator_settings
from services.store.db import upgrade

runner = CliRunner()


@pytest.fixture
def database(settings_env):
    get_coordinator_settings.cache_clear()
    settings_env.mkdir(parents=True)
    upgrade(get_coordinator_settings().database_url)
    yield get_coordinator_settings()
    get_coordinator_settings.cache_clear()


def test_create_a_user_and_a_token_that_the_api_accepts(database):
    made = runner.invoke(app, ["users", "create", "ada", "--role", "admin", "--max-per-day", "5"])
    assert made.exit_code == 0 and "created user 'ada'" in made.stdout
    token = runner.invoke(app, ["tokens", "create", "--user", "ada", "--label", "laptop"])
    assert token.exit_code == 0
    secret = token.stdout.strip()
    assert secret.startswith("nvs_") and "\n" not in secret
    with TestClient(create_app(database)) as client:
        me = client.get("/v1/users/me", headers={"Authorization": f"Bearer {secret}"}).json()
    assert (me["name"], me["role"], me["max_per_day"]) == ("ada", "admin", 5)
    listed = runner.invoke(app, ["tokens", "list", "--user", "ada"])
    assert secret[:12] in listed.stdout and secret not in listed.stdout
    revoked = runner.invoke(app, ["tokens", "revoke", "1", "--user", "ada"])
    assert revoked.exit_code == 0
    with TestClient(create_app(database)) as client:
        assert client.get("/v1/users/me", headers={"Authorization": f"Bearer {secret}"}).status_code == 401


def test_operator_mistakes_are_clear_errors(database):
    runner.invoke(app, ["users", "create", "ada"])
    again = runner.invoke(app, ["users", "create", "ada"])
    assert isinstance(again.exception, ConflictError) and "exists already" in str(again.exception)
    nobody = runner.invoke(app, ["tokens", "create", "--user", "nobody"])
    assert isinstance(nobody.exception, NotFoundError) and "nevis users create" in str(nobody.exception)
    role = runner.invoke(app, ["users", "create", "eve", "--role", "root"])
    assert "'role'" in str(role.exception)


def test_openapi_writes_and_checks_the_document(tmp_path: Path):
    target = tmp_path / "openapi.json"
    assert runner.invoke(app, ["openapi", "--output", str(target)]).exit_code == 0
    assert runner.invoke(app, ["openapi", "--output", str(target), "--check"]).exit_code == 0
    target.write_text(target.read_text().replace('"title": "NEVIS coordinator"', '"title": "old"'))
    stale = runner.invoke(app, ["openapi", "--output", str(target), "--check"])
    assert stale.exit_code == 1 and "out of date" in stale.output


def test_serve_refuses_a_bad_port(database):
    result = runner.invoke(app, ["serve", "--port", "70000", "--no-scheduler"])
    assert "'--port'" in str(result.exception)


def test_serve_workers_need_the_scheduler_elsewhere(database):
    result = runner.invoke(app, ["serve", "--workers", "2"])
    assert result.exit_code != 0 and "'--workers 2' needs '--no-scheduler'" in str(result.exception)


@pytest.mark.parametrize("command", [["serve"], ["openapi"], ["users"], ["tokens"], ["worker", "run-task"]])
def test_every_command_has_help(command):
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0 and "Usage" in result.output
