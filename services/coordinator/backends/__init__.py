"""Execution backends behind one interface (:class:`Backend`), by name in :data:`BACKENDS`."""

from __future__ import annotations

from services.coordinator.backends.base import Backend, JobState, JobStatus, LaunchSpec
from services.coordinator.common.backend_registry import BACKENDS
from services.coordinator.common.config import CoordinatorSettings

__all__ = ["BACKENDS", "Backend", "JobState", "JobStatus", "LaunchSpec", "make_backend"]


def make_backend(settings: CoordinatorSettings) -> Backend:
    """The backend named by ``NEVIS_BACKEND`` (see :data:`~services.coordinator.common.backend_registry.BACKENDS`).

    Raises:
        UnknownNameError: the name is not registered (the settings refuse such a name
            already; this guards settings built without validation).
    """
    return BACKENDS.get(settings.backend)(settings)
