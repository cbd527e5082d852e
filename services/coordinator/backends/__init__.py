"""Execution backends behind one interface (:class:`Backend`): local, ray, kuberay."""

from __future__ import annotations

from services.coordinator.backends.base import Backend, JobState, JobStatus, LaunchSpec
from services.coordinator.core.config import CoordinatorSettings

__all__ = ["Backend", "JobState", "JobStatus", "LaunchSpec", "make_backend"]


def make_backend(settings: CoordinatorSettings) -> Backend:
    """The backend named by ``NEVIS_BACKEND``."""
    if settings.backend == "ray":
        from services.coordinator.backends.ray_jobs import RayJobsBackend  # noqa: PLC0415

        return RayJobsBackend(settings)
    if settings.backend == "kuberay":
        from services.coordinator.backends.kuberay import KubeRayBackend  # noqa: PLC0415

        return KubeRayBackend(settings)
    from services.coordinator.backends.local import LocalBackend  # noqa: PLC0415

    return LocalBackend(settings)
