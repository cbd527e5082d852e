"""Coordinator settings: read from NEVIS_* variables, unsafe combinations refused."""

from __future__ import annotations

import pytest

from services.coordinator.backends import make_backend
from services.coordinator.backends.base import worker_env
from services.coordinator.backends.kuberay import KubeRayBackend
from services.coordinator.backends.local import LocalBackend
from services.coordinator.common.config import CoordinatorSettings, get_coordinator_settings
from services.core.errors import ConfigError


@pytest.fixture
def env(settings_env, monkeypatch):
    for name in (
        "NEVIS_BACKEND",
        "NEVIS_ENVIRONMENT",
        "NEVIS_HEARTBEAT_INTERVAL_S",
        "NEVIS_HEARTBEAT_TIMEOUT_S",
        "NEVIS_STREAMS_DIR",
    ):
        monkeypatch.delenv(name, raising=False)
    get_coordinator_settings.cache_clear()
    yield monkeypatch
    get_coordinator_settings.cache_clear()


def test_defaults_are_a_local_development_setup(env, settings_env):
    settings = get_coordinator_settings()
    assert (settings.backend, settings.environment) == ("local", "development")
    assert settings.database_url.startswith("sqlite:///") and settings.outbox == settings_env / "kuberay"
    assert isinstance(make_backend(settings), LocalBackend)


@pytest.mark.parametrize(
    ("variables", "words"),
    [
        ({"NEVIS_HEARTBEAT_INTERVAL_S": "30", "NEVIS_HEARTBEAT_TIMEOUT_S": "40"}, "NEVIS_HEARTBEAT_TIMEOUT_S"),
        ({"NEVIS_ENVIRONMENT": "production"}, "PostgreSQL"),
        ({"NEVIS_BACKEND": "slurm"}, "NEVIS_BACKEND"),
        (
            {
                "NEVIS_ENVIRONMENT": "production",
                "NEVIS_DATABASE_URL": "postgresql+psycopg://u@h/db",
                "NEVIS_SANDBOX": "none",
            },
            "NEVIS_SANDBOX=bwrap",
        ),
        (
            {"NEVIS_ENVIRONMENT": "production", "NEVIS_DATABASE_URL": "postgresql+psycopg://u@h/db"},
            "NEVIS_SANDBOX=bwrap, spelled out",
        ),  # the default auto is refused even where bwrap exists
        ({"NEVIS_SCHEDULER_SLOTS": "0"}, "NEVIS_SCHEDULER_SLOTS"),
        ({"NEVIS_BACKOFF_BASE_S": "100", "NEVIS_BACKOFF_MAX_S": "10"}, "NEVIS_BACKOFF_MAX_S"),
    ],
)
def test_bad_settings_name_the_variable(env, variables, words):
    for name, value in variables.items():
        env.setenv(name, value)
    with pytest.raises(ConfigError, match=words):
        get_coordinator_settings()


def test_production_accepts_postgresql(env):
    env.setenv("NEVIS_ENVIRONMENT", "production")
    env.setenv("NEVIS_DATABASE_URL", "postgresql+psycopg://nevis:pw@db/nevis")
    env.setenv("NEVIS_BACKEND", "kuberay")
    env.setenv("NEVIS_SANDBOX", "bwrap")
    settings = get_coordinator_settings()
    assert isinstance(make_backend(settings), KubeRayBackend)


def test_workers_get_the_values_this_coordinator_runs_with(tmp_path, monkeypatch):
    settings = CoordinatorSettings(
        data_dir=tmp_path,
        database_url="postgresql+psycopg://u:secret@h/db",
        heartbeat_interval_s=3,
        heartbeat_timeout_s=9,
        max_attempts=5,
    )
    env = worker_env(settings)
    assert env["NEVIS_DATABASE_URL"] == settings.database_url
    assert (env["NEVIS_HEARTBEAT_INTERVAL_S"], env["NEVIS_HEARTBEAT_TIMEOUT_S"], env["NEVIS_MAX_ATTEMPTS"]) == (
        "3.0",
        "9.0",
        "5",
    )
    assert env["NEVIS_DATA_DIR"] == str(tmp_path) and "NEVIS_IMAGE_SIZE" not in env
    assert "NEVIS_SANDBOX" not in env  # auto is resolved where the hosts start: a pod's bwrap stands
    for name, value in env.items():  # what the worker process reads back
        monkeypatch.setenv(name, value)
    in_worker = CoordinatorSettings()
    assert (in_worker.heartbeat_timeout_s, in_worker.max_attempts, in_worker.database_url) == (
        9,
        5,
        settings.database_url,
    )
