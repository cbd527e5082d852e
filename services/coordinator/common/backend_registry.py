"""Execution backends by name (``NEVIS_BACKEND``): one lazy entry per backend.

Each entry names its class as ``module:Class``, imported only when that backend is built,
so the settings can validate ``NEVIS_BACKEND`` against :data:`BACKENDS` without loading Ray
or Kubernetes code; it lives beside the settings (not in the backends package, which imports
the settings) so that no import cycle forms. A new backend is one module in
``services/coordinator/backends/`` implementing
:class:`~services.coordinator.backends.base.Backend`, plus one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.core.registry import Registry, lazy

BackendFactory = Callable[[Any], Any]  # CoordinatorSettings -> Backend

BACKENDS: Registry[BackendFactory] = Registry("backend")
"""Backend name (``NEVIS_BACKEND``) → factory taking the coordinator settings."""

BACKENDS.register("local", lazy("services.coordinator.backends.local:LocalBackend"))
BACKENDS.register("ray", lazy("services.coordinator.backends.ray_jobs:RayJobsBackend"))
BACKENDS.register("kuberay", lazy("services.coordinator.backends.kuberay:KubeRayBackend"))

__all__ = ["BACKENDS", "BackendFactory"]
