"""The one trust rule: code that came from a submitter runs only in a sandboxed learner host.

Decided on the *resolved* sandbox (what :func:`~workers.sandbox.launch.resolve_sandbox` turns
the setting into on this machine), never on the setting's spelling: ``auto`` on a machine with
bubblewrap is ``bwrap`` and binds exactly as an explicit ``bwrap`` does.

Multi-worker trials are the one place learner code would run outside a learner host (Ray
Train workers with ``torch.distributed``, which a sandbox without network cannot offer), so
they are refused wherever the sandbox is in force, and for every uploaded bundle or image
whatever the sandbox: only a researcher's own code under ``NEVIS_SANDBOX=none`` (or ``auto``
on a machine without bubblewrap) may train with several workers.
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
    if num_workers <= 1:
        return None
    resolved = resolve_sandbox(sandbox)
    if submitted:
        return (f"asks for {num_workers} workers per trial, and multi-worker trials run outside "
                "the learner sandbox, which no uploaded bundle or image may do: declare "
                "Resources(num_workers=1)")
    if resolved == "bwrap":
        return (f"asks for {num_workers} workers per trial: multi-worker trials run outside the "
                f"learner sandbox, which is in force here (NEVIS_SANDBOX={sandbox} resolves to "
                "bwrap). Declare Resources(num_workers=1), or run your own code with "
                "NEVIS_SANDBOX=none on a machine you trust")
    return None


def bounded_by_registration(resources: Resources, registered: Mapping[str, Any] | None, *,
                            spec: str) -> Resources:
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
            "needs, or declare fewer in resources()")
    return resources


__all__ = ["bounded_by_registration", "multi_worker_refusal"]
