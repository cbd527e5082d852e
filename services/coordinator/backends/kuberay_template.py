"""The KubeRay ``RayJob`` the ``kuberay`` backend renders for one launch.

One RayJob per launched task (named and labelled with its submission, task and lease), on
a cluster that exists only for that job. The learner's image is the image of every pod (it
must be built FROM the nevis learner base image, which carries the ``nevis`` command). The
database and store settings come from an existing Secret into the head pod only, where the
worker harness (the job's driver) runs; learner processes get them blanked by the runner.
Deadlines mirror the coordinator's: ``preRunningDeadlineSeconds`` is the start timeout and
``activeDeadlineSeconds`` the task deadline; ``backoffLimit`` is 0 because the
coordinator's reaper owns retries (bounded, with back-off, counted per task).
"""

from __future__ import annotations

import copy
import shlex
from importlib.metadata import version
from typing import Any

import yaml

from services.coordinator.backends.base import LaunchSpec
from services.coordinator.core.config import CoordinatorSettings

API_VERSION = "ray.io/v1"
TTL_AFTER_FINISHED_S = 600
_SECURITY = {
    "runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}
_CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
}


def render_rayjob(spec: LaunchSpec, settings: CoordinatorSettings) -> dict[str, Any]:
    """The RayJob manifest (a plain dict, ready for YAML) for one launch."""
    image = spec.image or settings.kuberay_worker_image
    labels = {
        "app.kubernetes.io/name": "nevis-worker",
        "app.kubernetes.io/managed-by": "nevis-coordinator",
        "nevis.io/submission": str(spec.submission_id),
        "nevis.io/task-order": str(spec.task_order),
        "nevis.io/lease": str(spec.lease_id),
    }
    runtime_env = {"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1", "NEVIS_RAY_ADDRESS": ""}}
    entrypoint = shlex.join([*shlex.split(settings.worker_command), *spec.worker_args()])
    return {
        "apiVersion": API_VERSION,
        "kind": "RayJob",
        "metadata": {"name": spec.job_name, "namespace": settings.kuberay_namespace,
                     "labels": labels},
        "spec": {
            "entrypoint": entrypoint,
            "runtimeEnvYAML": yaml.safe_dump(runtime_env, sort_keys=True),
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_S,
            "activeDeadlineSeconds": int(settings.task_deadline_s),
            "preRunningDeadlineSeconds": max(1, int(settings.start_timeout_s)),
            "backoffLimit": 0,
            "rayClusterSpec": {
                "rayVersion": version("ray"),
                "headGroupSpec": {
                    "rayStartParams": {"num-cpus": "0", "dashboard-host": "0.0.0.0"},
                    "template": _pod(image, labels, cpus=1.0, memory_mb=2048, gpus=0,
                                     name="ray-head", secret=settings.kuberay_secret_name),
                },
                "workerGroupSpecs": [{
                    "groupName": "learner",
                    "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
                    "rayStartParams": {},
                    "template": _pod(image, labels, cpus=spec.resources.cpus,
                                     memory_mb=spec.resources.memory_mb,
                                     gpus=spec.resources.gpus, name="ray-worker", secret=None),
                }],
            },
        },
    }


def _pod(image: str, labels: dict[str, str], *, cpus: float, memory_mb: int, gpus: int,
         name: str, secret: str | None) -> dict[str, Any]:
    cpu = f"{int(cpus * 1000)}m"
    resources: dict[str, Any] = {
        "requests": {"cpu": cpu, "memory": f"{memory_mb}Mi"},
        "limits": {"cpu": cpu, "memory": f"{memory_mb}Mi"},
    }
    if gpus:
        resources["limits"]["nvidia.com/gpu"] = gpus
        resources["requests"]["nvidia.com/gpu"] = gpus
    container: dict[str, Any] = {
        "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
        "resources": resources, "securityContext": copy.deepcopy(_CONTAINER_SECURITY),
    }
    if secret:
        container["envFrom"] = [{"secretRef": {"name": secret}}]
    return {"metadata": {"labels": dict(labels)},
            "spec": {"securityContext": copy.deepcopy(_SECURITY), "automountServiceAccountToken": False,
                     "containers": [container]}}


def to_yaml(manifest: dict[str, Any]) -> str:
    return yaml.safe_dump(manifest, sort_keys=False)


__all__ = ["API_VERSION", "TTL_AFTER_FINISHED_S", "render_rayjob", "to_yaml"]
