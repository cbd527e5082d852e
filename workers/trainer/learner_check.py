"""What a run's learner declares, asked of a learner host once per runner, and checked: its
workers allowed under the sandbox, its placement possible here, its resources within its
registration, and its ask fitted to the connected cluster.

Kept apart from :class:`~workers.trainer.stream_runner.StreamRunner`, which drives tasks: the
runner and :mod:`workers.trainer.run_create` both ask before a task or a submission starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import ray

from services.core.budget import RunBudget
from services.core.config import Settings
from services.core.errors import LearnerError
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.declaration import LearnerDeclaration
from workers.sandbox.learner_calls import describe
from workers.sandbox.limits import HostLimits
from workers.sandbox.trust import bounded_by_registration, multi_worker_refusal
from workers.trainer.placement import check_placement_here
from workers.trainer.run_actors import RunActors
from workers.trainer.task_job import fit_to_cluster


class LearnerCheck:
    """A learner's declaration per host spec, described once and checked on every ask."""

    def __init__(
        self, actors: RunActors, import_paths: tuple[str, ...], *, submitted: bool, registered: Mapping[str, Any] | None
    ) -> None:
        self.actors, self.import_paths = actors, import_paths
        self.submitted, self.registered = submitted, registered
        self._declarations: dict[HostSpec, LearnerDeclaration] = {}

    def __call__(self, settings: Settings, spec: str, budget: RunBudget) -> tuple[HostSpec, LearnerDeclaration]:
        """Where the learner runs and what it declares, asked of a learner host (this process
        never imports learner code); once per runner. ``settings``: the runner's, as they are
        now (its sandbox, its hosts' limits).

        Raises:
            UnknownNameError, LearnerError: the learner cannot be loaded or declares nonsense.
            ConfigError: the sandbox asked for is not installed.
        """
        limits = HostLimits.from_settings(settings)
        probe = HostSpec(spec, self.import_paths, settings.sandbox, budget.threads_per_trial, limits=limits)
        if probe not in self._declarations:
            declared = self.actors.describe_in_guessed_pool(probe, budget) if ray.is_initialized() else None
            if declared is None:
                with LearnerHost(probe) as host:
                    declared = describe(host)
            self._declarations[probe] = declared
        declaration = self._declarations[probe]
        resources = declaration.resources
        refusal = multi_worker_refusal(resources.num_workers, sandbox=settings.sandbox, submitted=self.submitted)
        if refusal is not None:
            raise LearnerError(f"Learner {spec!r} {refusal}.")
        check_placement_here(resources, sandbox=settings.sandbox, spec=spec)  # before any trial waits
        bounded = bounded_by_registration(resources, self.registered, spec=spec)
        if bounded != resources:
            resources, declaration = bounded, replace(declaration, resources=bounded)
        cpus = max(float(resources.cpus_per_worker), float(budget.threads_per_trial))  # the host's CPU quota
        return HostSpec(
            spec,
            self.import_paths,
            settings.sandbox,
            budget.threads_per_trial,
            gpu=resources.gpus_per_worker > 0,
            limits=replace(limits, cpus=cpus),
        ), declaration


def fit_to_cluster_here(host: HostSpec, learner: LearnerDeclaration) -> tuple[HostSpec, LearnerDeclaration]:
    """The learner's ask on the connected cluster (an optional GPU only where there is one)."""
    resources = fit_to_cluster(learner.resources, ray.cluster_resources())
    if resources == learner.resources:
        return host, learner
    return replace(host, gpu=resources.gpus_per_worker > 0), replace(learner, resources=resources)


__all__ = ["LearnerCheck", "fit_to_cluster_here"]
