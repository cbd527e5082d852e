"""Backends by name: NEVIS_BACKEND is checked against BACKENDS, and each name builds its class."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from services.coordinator.backends import BACKENDS, Backend, make_backend
from services.coordinator.backends.kuberay import KubeRayBackend
from services.coordinator.backends.local import LocalBackend
from services.coordinator.backends.ray_jobs import RayJobsBackend
from services.coordinator.common.config import CoordinatorSettings, get_coordinator_settings
from services.core.errors import ConfigError, UnknownNameError

CLASSES = {"local": LocalBackend, "ray": RayJobsBackend, "kuberay": KubeRayBackend}


@pytest.fixture
def env(settings_env, monkeypatch):
    monkeypatch.delenv("NEVIS_BACKEND", raising=False)
    get_coordinator_settings.cache_clear()
    yield monkeypatch
    get_coordinator_settings.cache_clear()


def _settings(tmp_path, backend: str) -> CoordinatorSettings:
    return CoordinatorSettings(
        data_dir=tmp_path,
        database_url="sqlite://",
        backend=backend,
        ray_address="http://ray-head:8265",
        ray_secrets_path="/etc/nevis/worker.env",
    )


def test_the_three_backends_are_registered() -> None:
    assert BACKENDS.names() == tuple(sorted(CLASSES))


@pytest.mark.parametrize("name", BACKENDS.names())
def test_each_registered_name_builds_its_backend(tmp_path, name) -> None:
    backend = make_backend(_settings(tmp_path, name))
    assert backend.name == name and isinstance(backend, Backend)
    assert type(backend) is CLASSES[name]


@pytest.mark.parametrize(("typo", "guess"), [("kuberey", "kuberay"), ("locl", "local"), ("rays", "ray")])
def test_an_unknown_backend_names_the_variable_and_the_closest(env, typo, guess) -> None:
    env.setenv("NEVIS_BACKEND", typo)
    with pytest.raises(ConfigError) as info:
        get_coordinator_settings()
    message = str(info.value)
    assert "NEVIS_BACKEND" in message and f"Unknown backend {typo!r}" in message
    assert f"Did you mean {guess!r}" in message and "Known: kuberay, local, ray." in message


def test_backend_names_are_exact(env) -> None:
    env.setenv("NEVIS_BACKEND", "Local")
    with pytest.raises(ConfigError, match="Did you mean 'local'"):
        get_coordinator_settings()


def test_settings_built_without_validation_still_fail_by_name(tmp_path) -> None:
    settings = _settings(tmp_path, "local").model_copy(update={"backend": "slurm"})
    with pytest.raises(UnknownNameError, match="Unknown backend 'slurm'"):
        make_backend(settings)


def test_validating_the_name_imports_no_backend_module() -> None:
    """The registry is lazy: choosing ``ray`` or ``kuberay`` loads their code only when built."""
    script = textwrap.dedent("""
        import sys
        from services.coordinator.common.config import CoordinatorSettings
        from services.coordinator.backends import BACKENDS
        for name in BACKENDS.names():
            CoordinatorSettings(database_url="sqlite://", backend=name)
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("ray", "kubernetes")
                        or m.startswith("services.coordinator.backends.")
                        and m.rsplit(".", 1)[1] in ("local", "ray_jobs", "kuberay", "kuberay_template"))
        print(loaded)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
