"""How a run's Ray processes are started: learner code gets no credentials.

Learner code can run in Ray worker processes (multi-worker learners), so every storage and
database credential the driver has is blanked for them; the run's harness actor (harness
code, the only process that touches the store) gets the real values back through its own
runtime env. A local cluster is started from a blanked environment, which its processes
inherit; a job's runtime env does the blanking only on a cluster of another's making, because
a job with one cannot use the workers Ray starts ahead (each actor would wait ~0.6 s for a
fresh process instead of ~0.1 s).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ray

from services.core.config import Settings
from services.core.credentials import CREDENTIAL_VARS, SECRETS_PATH_VAR

# Storage and database credentials, and the path they were read from: learner processes get
# these blanked out; only the harness actor gets them back (``storage_env``, ``learner_env``).
SECRET_VARS = (*CREDENTIAL_VARS, SECRETS_PATH_VAR)
LEARNER_SANDBOX = "/nonexistent/nevis-learner-sandbox"


def learner_env() -> dict[str, str]:
    """Environment overrides for every Ray process of a run: no credentials, no store."""
    env = {name: "" for name in SECRET_VARS if name in os.environ}
    env.update(
        NEVIS_DATA_DIR=LEARNER_SANDBOX,
        NEVIS_STORE_URL=f"file://{LEARNER_SANDBOX}/store",
        NEVIS_DATABASE_URL="sqlite://",
    )
    return env


_HELD: dict[str, str] = {}


def hold_secrets() -> None:
    """Move the credentials out of this process's environment, kept in memory for
    :func:`storage_env`: processes started from now on (Ray's raylet, its workers, learner
    hosts) do not inherit them, so no ``/proc/<pid>/environ`` of theirs holds one."""
    for name in SECRET_VARS:
        if name in os.environ:
            _HELD[name] = os.environ.pop(name)


def storage_env() -> dict[str, str]:
    """What the harness actor needs to reach the store, for its runtime env alone.

    When the credentials came from a secrets path (remote backends), only the path travels:
    a runtime env is cluster metadata, and the actor reads the path on its own node (the
    driver's, where it is pinned)."""
    held = {**_HELD, **{name: os.environ[name] for name in SECRET_VARS if name in os.environ}}
    if held.get(SECRETS_PATH_VAR):
        return {SECRETS_PATH_VAR: held[SECRETS_PATH_VAR]}
    return held


def connect_ray(settings: Settings) -> None:
    """Join the configured Ray cluster, or start a local one (once per process)."""
    if ray.is_initialized():
        return
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if settings.ray_address or os.environ.get("RAY_ADDRESS"):
        ray.init(address=settings.ray_address or None, runtime_env={"env_vars": learner_env()}, **options)
    else:
        start_local_ray(**options)


def start_local_ray(**options: Any) -> None:
    """Start a local Ray cluster whose processes (raylet, workers, the ones started ahead)
    inherit :func:`learner_env`; this process's own environment is as it was afterwards."""
    with _environment(learner_env()):
        ray.init(**options)


@contextmanager
def _environment(overrides: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in overrides}
    os.environ.update(overrides)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


__all__ = [
    "LEARNER_SANDBOX",
    "SECRET_VARS",
    "connect_ray",
    "hold_secrets",
    "learner_env",
    "start_local_ray",
    "storage_env",
]
