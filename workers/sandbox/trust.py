"""The one trust rule: code that came from a submitter runs only in a sandboxed learner host.

Decided on the *resolved* sandbox (what :func:`~workers.sandbox.launch.resolve_sandbox` turns
the setting into on this machine), never on the setting's spelling: ``auto`` on a machine with
bubblewrap is ``bwrap`` and binds exactly as an explicit ``bwrap`` does.

Multi-worker trials run each rank in a learner host of its own wherever the sandbox resolves
to ``bwrap``, the ranks on one node sharing a private loopback
(:mod:`workers.trainer.rank_trial`). Without bubblewrap (``NEVIS_SANDBOX=none``, or ``auto``
on a machine without it) they run as a Ray Train group outside any host, which only a
researcher's own code may do: an uploaded bundle or image is refused there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from services.core.errors import LearnerError
from workers.learners.protocol import Resources
from workers.sandbox.launch import resolve_sandbox


def multi_worker_refusal(num_workers: int, *, sandbox: str, submitted: bool) -> str | None:
    """Why a learner asking for ``num_workers`` per trial may not run here, or ``None``.

    ``sandbox`` is the setting (``auto``, ``bwrap``, ``none``); ``submitted`` says the learner
    came from an upload (a bundle or an image) rather than from the operator's installation.
    """
    if num_workers <= 1 or resolve_sandbox(sandbox) == "bwrap":
        return None  # one learner host per rank (workers/trainer/rank_trial.py)
    if submitted:
        return (
            f"asks for {num_workers} workers per trial, and without bubblewrap (NEVIS_SANDBOX={sandbox}) "
            "multi-worker trials run outside the learner sandbox, which no uploaded bundle or image may "
            "do: run it where bubblewrap is installed, or declare Resources(num_workers=1)"
        )
    return None


def bounded_by_registration(resources: Resources, registered: Mapping[str, Any] | None, *, spec: str) -> Resources:
    """The learner's declared ask, held to what its registration allows (``cpus``, ``gpus``
    per task): a submitter declares resources at registration, and the code's own
    ``resources()`` cannot quietly ask for more. An optional GPU over the registration is
    dropped; anything else over it is refused.

    Raises:
        LearnerError: naming the declared and the registered figure.
    """
    if registered is None:
        return resources
    cpus, gpus = float(registered.get("cpus", 1.0)), float(registered.get("gpus", 0))
    asked_gpus = resources.num_workers * resources.gpus_per_worker
    if asked_gpus > gpus and resources.gpu_optional:
        resources = replace(resources, gpus_per_worker=0.0)
        asked_gpus = 0.0
    asked_cpus = resources.num_workers * resources.cpus_per_worker
    if asked_cpus > cpus or asked_gpus > gpus:
        raise LearnerError(
            f"Learner {spec!r} declares {asked_cpus:g} CPUs and {asked_gpus:g} GPUs per trial, more than "
            f"its registration allows ({cpus:g} CPUs, {gpus:g} GPUs): register it with the resources it "
            "needs, or declare fewer in resources()"
        )
    return resources


__all__ = ["bounded_by_registration", "multi_worker_refusal"]
