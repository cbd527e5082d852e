"""How a run's Ray processes are started: learner code gets no credentials.

Learner code runs in Ray worker processes, so the job's environment blanks every storage
and database credential the driver has; the run's harness actor (harness code, the only
process that touches the store) gets the real values back through its own runtime env.
"""

from __future__ import annotations

import os

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
    env.update(NEVIS_DATA_DIR=LEARNER_SANDBOX, NEVIS_STORE_URL=f"file://{LEARNER_SANDBOX}/store",
               NEVIS_DATABASE_URL="sqlite://")
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
    """Join the configured Ray cluster, or start a local one (once per process).

    Learner code runs in these Ray processes, so the job's environment blanks every storage
    and database credential; the harness actor gets them back through its own runtime env.
    """
    if ray.is_initialized():
        return
    ray.init(
        address=settings.ray_address or None, include_dashboard=False, log_to_driver=False,
        configure_logging=False, runtime_env={"env_vars": learner_env()},
    )


__all__ = [
    "LEARNER_SANDBOX", "SECRET_VARS", "connect_ray", "hold_secrets", "learner_env", "storage_env"
]
